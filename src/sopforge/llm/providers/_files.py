"""The on-disk format shared by the exchange and replay providers.

One call is a pair of markdown files named after its call key (``/`` → ``__``):

* ``<stem>.request.md``: YAML front matter identifying the call (including ``prompt_sha256``),
  then the prompt as readable ``## system`` / ``## user`` / ``## assistant`` sections;
* ``<stem>.response.md``: the model's answer, optionally preceded by YAML front matter
  (e.g. ``model: claude-sonnet-4-5`` to note who answered), which is stripped.

An exchange folder is therefore also a recording that ``replay`` can serve offline.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sopforge.llm.types import LLMRequest

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
    return (request.system or "") + "".join(m.content for m in request.messages)


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
    for message in request.messages:
        parts.append(f"\n## {message.role}\n\n{message.content.rstrip()}\n")
    return "".join(parts)


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
