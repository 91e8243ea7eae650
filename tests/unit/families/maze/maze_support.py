"""Helpers for the maze family's tests: the recorded example answers (the demo's source of truth)."""

from __future__ import annotations

import json
from pathlib import Path

from sopforge.families.maze.models.scenario import HRSScenario, LRSScenario
from sopforge.llm.providers._files import read_response

RECORDINGS = Path(__file__).resolve().parents[4] / "examples" / "recordings" / "pharmacy_refills"
THEME = ("Retail pharmacy prescription refill requests: deciding whether a patient's refill can be dispensed, must be "
         "referred to the prescriber, or must be denied")


def recorded(stage: str, item: str = "main") -> str:
    """The recorded answer of one call (front matter stripped)."""
    return read_response(RECORDINGS / f"pharmacy_refills__{stage}__{item}__a1.response.md")[1]


def scenario_answer(scenario: LRSScenario | HRSScenario) -> str:
    """A model answer holding ``scenario`` (for edited trees)."""
    data = scenario.model_dump(mode="json", exclude={"kind"})
    return f"<scenario>\n{json.dumps(data)}\n</scenario>"


def replay(request) -> str:
    """A scripted provider's answer: the recording of the request's call key (an in-process replay)."""
    path = RECORDINGS / (request.call_key.replace("/", "__") + ".response.md")
    if not path.exists():
        raise AssertionError(f"no recording for {request.call_key}")
    return read_response(path)[1]
