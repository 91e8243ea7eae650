"""The paper's four-part task prompt: objective, SOP, user input, output requirement (L56-64).

The headers follow the authors' skeleton (digest section 3, P1: 【Background】 【Requirements】
【Input】 【Output Requirement】), in English, and the schema is embedded as JSON. The SOP is the
messy rendering (:mod:`..models.sop_text`), as production SOPs are (L77). The output requirement
gives the informal per-key format first, as the appendix sample does (L486), then the draft-07
schema.
"""

from __future__ import annotations

import json

from sopforge.families.maze.models.scenario import Scenario

__all__ = ["INPUT_PLACEHOLDER", "output_requirement", "task_prompt"]

INPUT_PLACEHOLDER = "{{user_input}}"


def output_requirement(scenario: Scenario) -> str:
    """Part 4: the informal format of every key, then the JSON Schema the answer must satisfy."""
    schema = scenario.answer_schema()
    keys = ", ".join(f'"{key}": ({spec["type"]}, {spec["description"]})' for key, spec in schema["properties"].items())
    step = "The step in your output is the final step reached after the last user turn.\n" if scenario.kind == "HRS" else ""
    return (f"Output one JSON object and nothing else: {{{keys}}}\n{step}"
            f"Your output must satisfy this JSON_SCHEMA: {json.dumps(schema, ensure_ascii=False)}")


def task_prompt(scenario: Scenario, user_input: str = INPUT_PLACEHOLDER) -> str:
    """The complete prompt the evaluated model receives (with ``{{user_input}}`` as a placeholder by default)."""
    return (f"【Background】\n{scenario.objective}\n\n【Requirements】\n{scenario.sop_text(messy=True)}\n\n"
            f"【Input】\n{user_input}\n\n【Output Requirement】\n{output_requirement(scenario)}\n")
