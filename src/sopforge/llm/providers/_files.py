"""The on-disk format shared by the exchange and replay providers.

One call is a pair of markdown files named after its call key (``/`` → ``__``):

* ``<stem>.request.md``: YAML front matter identifying the call (including ``prompt_sha256``),
  then the prompt as readable ``## system`` / ``## user`` / ``## assistant`` sections;
* ``<stem>.response.md``: the model's answer, optionally preceded by YAML front matter
  (e.g. ``model: claude-sonnet-4-5`` to note who answered), which is stripped.

An exchange folder is therefore also a recording that ``replay`` can serve offline.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sopforge.llm.types import LLMRequest, Message, ToolCall, sha256_text

REQUEST_SUFFIX = ".request.md"
RESPONSE_SUFFIX = ".response.md"


def stem_for(call_key: str) -> str:
    """File stem for a call key: ``theme/stage/item/a1`` → ``theme__stage__item__a1``."""
    return call_key.replace("/", "__").replace("\\", "__")


def request_path(folder: Path, call_key: str) -> Path:
    """Where the prompt for ``call_key`` is written."""
    return folder / f"{stem_for(call_key)}{REQUEST_SUFFIX}"


def response_path(folder: Path, call_key: str) -> Path:
    """Where the answer for ``call_key`` is expected."""
    return folder / f"{stem_for(call_key)}{RESPONSE_SUFFIX}"


def estimate_tokens(text: str) -> int:
    """Rough token count for providers without a tokenizer.

    ``len(text) // 4`` is the usual English average; tiktoken would be closer but it downloads
    its encodings on first use, which air-gapped runs cannot do.
    """
    return len(text) // 4


def prompt_text(request: LLMRequest) -> str:
    """Everything the model reads, concatenated (for token estimates)."""
    return (request.system or "") + "".join(m.content + "".join(r.content for r in m.tool_results)
                                            for m in request.messages)


def render_request(request: LLMRequest) -> str:
    """The request file: identifying front matter, then the prompt as markdown sections."""
    meta: dict[str, Any] = {
        "call_key": request.call_key,
        "stage": request.stage,
        "attempt": request.attempt,
        "template_id": request.template_id,
        "template_hash": request.template_hash,
        "prompt_sha256": request.prompt_hash(),
        "model": request.model,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    parts = ["---\n", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True), "---\n"]
    if request.system:
        parts.append(f"\n## system\n\n{request.system.rstrip()}\n")
    names: dict[str, str] = {}
    for message in request.messages:
        parts.append(f"\n## {message.role}\n\n{_message_text(message, names).rstrip()}\n")
    if request.tools is not None:
        parts.append(_tools_section(request))
    return "".join(parts)


TOOL_CALL_TAG = "tool_call"
_TOOL_CALL = re.compile(rf"<{TOOL_CALL_TAG}>(.*?)</{TOOL_CALL_TAG}>", re.DOTALL)
HOW_TO_CALL_TOOLS = f"""\
## how to answer

Answer as the assistant of this conversation. To call a tool, write a block like this (one per call;
several calls in one answer run in order, and their results come back in the next user turn):

<{TOOL_CALL_TAG}>{{"name": "TOOL_NAME", "arguments": {{"parameter": "value"}}}}</{TOOL_CALL_TAG}>

The arguments must be a JSON object that follows the tool's input schema. To finish, answer without
any <{TOOL_CALL_TAG}> block: that text is the final answer.
"""


def _message_text(message: Message, names: dict[str, str]) -> str:
    """A turn as the answerer reads it: tool results, the text, then the tool calls (as they are written)."""
    parts = []
    for result in message.tool_results:
        error = ' error="true"' if result.is_error else ""
        parts.append(f'<tool_result name="{names.get(result.call_id, "?")}"{error}>{result.content}</tool_result>')
    if message.content:
        parts.append(message.content)
    for call in message.tool_calls:
        names[call.id] = call.name
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        parts.append(f'<{TOOL_CALL_TAG}>{{"name": {json.dumps(call.name)}, "arguments": {arguments}}}</{TOOL_CALL_TAG}>')
    return "\n\n".join(parts)


def _tools_section(request: LLMRequest) -> str:
    lines = ["\n## tools\n"]
    for tool in request.tools or []:
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
        lines.append(f"\n### {tool.name}\n\n{tool.description.strip()}\n\ninput schema:\n\n```json\n{schema}\n```\n")
    return "".join(lines) + "\n" + HOW_TO_CALL_TOOLS


def parse_tool_calls(text: str, call_key: str) -> tuple[str, list[ToolCall]]:
    """Split a written answer into its text and its ``<tool_call>`` blocks.

    A block that is not ``{"name": str, "arguments": {...}}`` is kept as a call with its text in
    ``raw_arguments``, so the agent tells the model what was wrong instead of dropping it. Call ids are
    derived from the call key, so a replayed conversation is identical to the recorded one.
    """
    calls = []
    prefix = sha256_text(call_key)[:8]
    for index, block in enumerate(_TOOL_CALL.findall(text)):
        try:
            value = json.loads(block)
        except ValueError:
            value = None
        call_id = f"call_{prefix}_{index}"
        if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("arguments", {}), dict):
            calls.append(ToolCall(id=call_id, name=value["name"], arguments=value.get("arguments", {})))
        else:
            name = value.get("name") if isinstance(value, dict) and isinstance(value.get("name"), str) else ""
            calls.append(ToolCall(id=call_id, name=name, raw_arguments=block.strip()))
    return _TOOL_CALL.sub("", text).strip(), calls


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split an optional leading ``---`` YAML block from the body.

    Returns:
        (metadata, body); metadata is empty when there is no well-formed front matter, in
        which case the whole text is the body (an answer may legitimately start with ``---``).
    """
    normalized = text.replace("\r\n", "\n")
    if not normalized.startswith("---\n"):
        return {}, normalized
    end = normalized.find("\n---", 3)
    while end != -1:
        after = end + len("\n---")
        if after == len(normalized) or normalized[after] == "\n":
            try:
                meta = yaml.safe_load(normalized[4:end + 1])
            except yaml.YAMLError:
                return {}, normalized
            if meta is not None and not isinstance(meta, dict):
                return {}, normalized
            return meta or {}, normalized[after + 1:]
        end = normalized.find("\n---", after)
    return {}, normalized


def read_response(path: Path) -> tuple[dict[str, Any], str]:
    """Read a response file: (front matter, answer text without surrounding blank lines)."""
    meta, body = split_front_matter(path.read_text(encoding="utf-8"))
    return meta, body.strip("\n")


def recorded_prompt_hash(path: Path) -> str | None:
    """The ``prompt_sha256`` written in a request file, or None when absent/unreadable."""
    try:
        meta, _ = split_front_matter(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    value = meta.get("prompt_sha256")
    return str(value) if value else None


def atomic_write(path: Path, text: str) -> None:
    """Write via a temp file and rename, so a watcher never reads a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
