"""What the sop_tools suites share: the export's tasks and environments (read once per process), prompt
rendering into requests with stable call keys, answer tags, and precision/recall/F1."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from sopforge.evaluation.protocol import EvalContext, EvalItem
from sopforge.families.sop_tools.evaluation.environment import SopToolsEnvironment, domain_folder
from sopforge.families.sop_tools.models.ground_truth import Task
from sopforge.families.sop_tools.verify.oracle import TASKS_FILE, read_tasks_jsonl
from sopforge.llm.types import LLMRequest, Message, ToolSpec
from sopforge.prompts import default_registry

__all__ = ["FAMILY", "environment", "f1", "last_tag", "prf", "request_factory", "tasks_of"]

FAMILY = "sop_tools"
_lock = threading.Lock()
_tasks: dict[Path, list[Task]] = {}
_environments: dict[tuple[Path, str, str], SopToolsEnvironment] = {}


def tasks_of(export_dir: Path) -> list[Task]:
    """The ground-truth tasks of the export (``<slug>/tasks.jsonl``), read once.

    Raises:
        UserError: Not a sop_tools export.
        FileNotFoundError: The export has no tasks.jsonl (no ground truth).
    """
    folder = domain_folder(export_dir)
    with _lock:
        if folder not in _tasks:
            path = folder / TASKS_FILE
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing: the export has no ground truth to score against; "
                                        "re-export it with `sopforge rerun RUN --from package`")
            _tasks[folder] = read_tasks_jsonl(path)
        return _tasks[folder]


def environment(export_dir: Path, sop: str = "base", registry: str = "with_distractors") -> SopToolsEnvironment:
    """The environment of one export, SOP and registry, built once (it is read-only; sessions hold state)."""
    key = (Path(export_dir).resolve(), sop, registry)
    with _lock:
        if key not in _environments:
            _environments[key] = SopToolsEnvironment(export_dir, {"sop": sop, "registry": registry})
        return _environments[key]


def request_factory(ctx: EvalContext, item: EvalItem, template_id: str, *, model: str | None = None,
                    max_tokens: int | None = None):
    """``request(turn, messages, tools) -> LLMRequest`` for an item's turns (call keys from the context)."""
    template = default_registry(ctx.settings).get(template_id)

    def request(turn: int | str, messages: list[Message], tools: list[ToolSpec] | None) -> LLMRequest:
        return LLMRequest(messages=messages, model=model or ctx.options.model, temperature=ctx.options.temperature,
                          max_tokens=max_tokens or ctx.options.max_tokens, call_key=ctx.call_key(FAMILY, item, turn),
                          stage=f"eval_{FAMILY}", template_id=template_id, template_hash=template.sha256,
                          tools=tools)

    return request


def first_message(ctx: EvalContext, template_id: str, **params: Any) -> Message:
    """The rendered template as the conversation's first user message (its shared prefix marked for caching)."""
    rendered = default_registry(ctx.settings).render(template_id, **params)
    return Message(role="user", content=rendered.text, cache_prefix=rendered.cache_prefix)


def last_tag(text: str, tag: str) -> str | None:
    """The content of the last ``<tag>…</tag>`` block (case-insensitive), or None."""
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", text or "", re.DOTALL | re.IGNORECASE)
    return blocks[-1].strip() if blocks else None


def prf(predicted: set[Any], gold: set[Any]) -> dict[str, float]:
    """Precision, recall and F1 of a predicted set (empty prediction: precision 0)."""
    hits = len(predicted & gold)
    precision = hits / len(predicted) if predicted else 0.0
    recall = hits / len(gold) if gold else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": f1(precision, recall)}


def f1(precision: float, recall: float) -> float:
    return round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """A JSON object in ``text`` (code fences allowed), or None."""
    if not text:
        return None
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    start = body.find("{")
    if start < 0:
        return None
    try:
        value = json.JSONDecoder().raw_decode(body[start:])[0]
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def tool_lines(tools: list[Any]) -> str:
    """Tools as a prompt lists them: name, description, input schema."""
    return "\n\n".join(f"{t.name}: {t.description}\ninput schema: {json.dumps(t.input_schema, ensure_ascii=False)}"
                       for t in tools)
