"""Tools artifacts: API documentation, toolspecs and tool code (SOP-Bench C.4a/C.4b/C.5, TELLER P6-P8).

The tools stage asks three times, each answer building on the last: ``<TOOLS>`` API docs (one
``<API>`` block per API-graph node), a ``<SCHEMA>`` JSON array of Bedrock ``toolSpec`` objects,
and a ``<code>`` block holding the whole ``tools.py`` of the domain bundle (``docs/bundle.md``).
The parsers here only read the formats; whether the three agree with the API graph, the data and
each other is judged by ``sopforge.families.sop_tools.verify.tool_checks``.

Also here: how the bundle's CSV spells a value (:func:`csv_cell`) and how a value is read back
by schema type (:func:`parse_cell`), shared by the checks and later stages.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

from sopforge.parsing import ParseError, extract_all_tags, extract_tag, one_line, strip_code_fence

__all__ = [
    "APIDoc", "APIDocs", "ToolSpecs", "ToolCode", "ToolsStepRecord", "ToolsArtifact",
    "manager_class_name", "csv_cell", "parse_cell",
]

_SECTIONS = {"name": "name", "description": "description", "endpoint": None, "method": None,
             "request body": "request_body", "request": "request_body", "response": "response",
             "response body": "response", "dependencies": "dependencies", "error scenarios": "error_scenarios"}
# A section heading: "Request Body:" at the start of a line, optionally bulleted or in bold.
_HEADING_RE = re.compile(r"^[ \t]*(?:[-*][ \t]+)?\**[ \t]*(?P<key>Name|Description|Endpoint|Method|Request Body|"
                         r"Request|Response Body|Response|Dependencies|Error Scenarios)[ \t]*\**[ \t]*:\**[ \t]*"
                         r"(?P<rest>.*)$", re.IGNORECASE)
_REQUIRED_SECTIONS = ("name", "description", "request_body", "response", "dependencies", "error_scenarios")
_NONE_WORDS = {"", "none", "[]", "n/a", "-", "no dependencies", "none."}
_IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_BULLET_RE = re.compile(r"^[ \t]*[-*•][ \t]+")


class APIDoc(BaseModel):
    """One ``<API>`` block: documentation of one API of the graph."""

    name: str = Field(description="API name; must equal an API-graph node.")
    description: str = Field(description="What the API does.")
    request_body: dict[str, Any] = Field(description="Parameter name -> type/format note (the request JSON).")
    response: dict[str, Any] = Field(description="Returned field name -> type/format note (the response JSON).")
    dependencies: list[str] = Field(default_factory=list, description="APIs whose outputs this one uses.")
    error_scenarios: list[str] = Field(description="'<error>: <handling>' lines, at least one.")

    def to_text(self) -> str:
        """Render the block in the answer format (``Name: …`` through ``Error Scenarios:``)."""
        deps = "[" + ", ".join(self.dependencies) + "]"
        errors = "\n".join(f"- {e}" for e in self.error_scenarios)
        return (f"<API>\nName: {self.name}\nDescription: {self.description}\n"
                f"Request Body:\n{json.dumps(self.request_body, indent=2, ensure_ascii=False)}\n"
                f"Response:\n{json.dumps(self.response, indent=2, ensure_ascii=False)}\n"
                f"Dependencies: {deps}\nError Scenarios:\n{errors}\n</API>")


class APIDocs(BaseModel):
    """The ``<TOOLS>`` block: one APIDoc per API, in the order written."""

    apis: list[APIDoc] = Field(min_length=1, description="The documented APIs.")

    @classmethod
    def parse(cls, raw_text: str) -> APIDocs:
        """Parse the last ``<TOOLS>`` block and its ``<API>`` blocks (``<sop_breakdown>`` is ignored).

        Args:
            raw_text: The model's full answer.

        Returns:
            The parsed docs; run ``tool_checks.check_api_docs`` for the graph checks.

        Raises:
            ParseError: No ``<TOOLS>``/``<API>`` block, a missing section, a request or response
                that is not a JSON object, or a dependency that is not an API name.
        """
        body = extract_tag(raw_text, "TOOLS")
        blocks = extract_all_tags(body, "API")
        if not blocks:
            raise ParseError("<TOOLS> holds no <API>…</API> block; write one <API> block per API of the graph")
        return cls(apis=[_parse_api(block, i) for i, block in enumerate(blocks, 1)])

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.apis]

    def to_prompt_text(self) -> str:
        """The docs as a ``<TOOLS>`` block, for the toolspec and code prompts."""
        return "<TOOLS>\n" + "\n".join(a.to_text() for a in self.apis) + "\n</TOOLS>"


def _parse_api(block: str, index: int) -> APIDoc:
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in block.strip().splitlines():
        m = _HEADING_RE.match(line)
        if m:
            current = _SECTIONS[m.group("key").lower()] or "_ignored"
            if current in sections and current != "_ignored":
                raise ParseError(f"<API> block {index}: section '{m.group('key')}' appears twice")
            sections[current] = [m.group("rest")]
        elif current is not None:
            sections[current].append(line)
    name_text = " ".join(sections.get("name", [])).strip().strip("`*\"'")
    label = f"<API> block {index}" + (f" ({name_text})" if name_text else "")
    missing = [s for s in _REQUIRED_SECTIONS if s not in sections]
    if missing:
        shown = ", ".join(s.replace("_", " ").title() for s in missing)
        raise ParseError(f"{label}: missing section(s) {shown}; write Name, Description, Request Body, Response, "
                         "Dependencies and Error Scenarios, each starting a line with 'Section:'")
    if not _IDENT_RE.fullmatch(name_text):
        raise ParseError(f"{label}: Name must be the API name alone, e.g. 'Name: getLoanRecord'")
    errors = _bullets(sections["error_scenarios"])
    if not errors:
        raise ParseError(f"{label}: Error Scenarios lists nothing; write '- <error>: <handling>' lines")
    return APIDoc(name=name_text, description=" ".join(" ".join(sections["description"]).split()),
                  request_body=_json_object(sections["request_body"], label, "Request Body"),
                  response=_json_object(sections["response"], label, "Response"),
                  dependencies=_dependencies(sections["dependencies"], label), error_scenarios=errors)


def _json_object(lines: list[str], label: str, section: str) -> dict[str, Any]:
    text = strip_code_fence("\n".join(lines).strip())
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{label}: {section} is not valid JSON ({exc.msg} at line {exc.lineno}): "
                         f"{one_line(text, 80)!r}; write one JSON object {{\"field\": \"type, format\"}} "
                         "with no comments") from exc
    if not isinstance(value, dict):
        raise ParseError(f"{label}: {section} must be a JSON object mapping field names to type notes")
    return value


def _dependencies(lines: list[str], label: str) -> list[str]:
    text = " ".join(line.strip() for line in lines).strip()
    if text.lower() in _NONE_WORDS:
        return []
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    found = []
    for item in re.split(r"[,\n]|\s-\s", text):
        item = _BULLET_RE.sub("", item).strip().strip("\"'`* ")
        if not item or item.lower() in _NONE_WORDS:
            continue
        m = _IDENT_RE.match(item)
        if not m:
            raise ParseError(f"{label}: Dependencies must list API names, e.g. [getLoanRecord] or []: "
                             f"{one_line(item, 60)!r}")
        found.append(m.group(0))
    return list(dict.fromkeys(found))


def _bullets(lines: list[str]) -> list[str]:
    items: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        if _BULLET_RE.match(line) or not items:
            items.append(_BULLET_RE.sub("", line).strip())
        else:
            items[-1] += " " + line.strip()
    return [i for i in items if i]


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ParseError(f"key {key!r} appears twice in one JSON object; write a JSON array with one "
                             "{\"toolSpec\": {...}} object per tool")
        seen[key] = value
    return seen


class ToolSpecs(BaseModel):
    """The ``<SCHEMA>`` array: one Bedrock ``toolSpec`` per API (``research/sopbench_format.md`` §5)."""

    specs: list[dict[str, Any]] = Field(min_length=1, description=(
        "The inner toolSpec objects ({name, description, inputSchema: {json: JSON Schema}}), in order; "
        "toolspecs.json wraps each as {\"toolSpec\": ...}."))

    @classmethod
    def parse(cls, raw_text: str) -> ToolSpecs:
        """Parse the strict JSON array inside the last ``<SCHEMA>`` block.

        Elements are ``{"toolSpec": {...}}``; a flat ``{"name": …, "inputSchema": …}`` (also accepted
        by the SOP-Bench harness) is read as its toolSpec. Shape and JSON Schema validity are judged
        by ``tool_checks.check_toolspecs``, so the message can say which tool is wrong.

        Raises:
            ParseError: Missing block, invalid JSON, a repeated key, or not an array of objects.
        """
        text = strip_code_fence(extract_tag(raw_text, "SCHEMA"))
        try:
            data = json.loads(text, object_pairs_hook=_no_repeated_keys)
        except json.JSONDecodeError as exc:
            raise ParseError(f"<SCHEMA>: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
        if isinstance(data, dict):
            raise ParseError("<SCHEMA> must hold a JSON array [{\"toolSpec\": {...}}, ...], one element per API, "
                             "not a single object")
        if not isinstance(data, list) or not data:
            raise ParseError("<SCHEMA> must hold a non-empty JSON array of {\"toolSpec\": {...}} objects")
        specs = []
        for i, item in enumerate(data):
            inner = item.get("toolSpec", item) if isinstance(item, dict) else None
            if not isinstance(inner, dict):
                raise ParseError(f"<SCHEMA> element {i} is not an object {{\"toolSpec\": {{name, description, "
                                 "inputSchema}}}}")
            specs.append(inner)
        return cls(specs=specs)

    @property
    def names(self) -> list[Any]:
        """Each spec's ``name`` as written (None when missing)."""
        return [s.get("name") for s in self.specs]

    def spec(self, name: str) -> dict[str, Any]:
        """The first toolSpec called ``name``.

        Raises:
            KeyError: No such tool.
        """
        for s in self.specs:
            if s.get("name") == name:
                return s
        raise KeyError(f"no toolSpec named {name!r}")

    def input_schema(self, name: str) -> dict[str, Any]:
        """``inputSchema.json`` of a tool ({} when malformed)."""
        schema = (self.spec(name).get("inputSchema") or {})
        inner = schema.get("json") if isinstance(schema, dict) else None
        return inner if isinstance(inner, dict) else {}

    def properties(self, name: str) -> list[str]:
        """Parameter names of a tool, in the order written."""
        props = self.input_schema(name).get("properties")
        return list(props) if isinstance(props, dict) else []

    def to_json(self) -> str:
        """The bundle's ``toolspecs.json``: a JSON array of ``{"toolSpec": ...}``, two-space indented."""
        return json.dumps([{"toolSpec": s} for s in self.specs], indent=2, ensure_ascii=False) + "\n"

    def to_prompt_text(self) -> str:
        return self.to_json().rstrip()


class ToolCode(BaseModel):
    """The ``<code>`` block: the complete ``tools.py`` of the bundle."""

    source: str = Field(description="Python source of tools.py.")
    class_name: str = Field(description="The Manager class the prompt asked for, e.g. 'PharmacyRefillsManager'.")

    @classmethod
    def parse(cls, raw_text: str, class_name: str) -> ToolCode:
        """Read the last ``<code>`` block (a Markdown fence around it is removed).

        Raises:
            ParseError: Missing or empty block.
        """
        source = strip_code_fence(extract_tag(raw_text, "code"))
        if not source.strip():
            raise ParseError("<code> is empty; write the complete tools.py inside <code></code>")
        return cls(source=source.rstrip() + "\n", class_name=class_name)


class ToolsStepRecord(BaseModel):
    """Provenance of one of the stage's three asks."""

    step: str = Field(description="'api_docs', 'toolspecs' or 'code'.")
    template_id: str = Field(description="Prompt template id.")
    template_hash: str = Field(description="sha256 of the template source.")
    prompt_hash: str = Field(description="sha256 of the rendered prompt.")
    attempts: int = Field(description="Attempts used; 1 when the first answer was accepted.")


class ToolsArtifact(BaseModel):
    """What the tools stage produces: docs, toolspecs and tools.py, mutually consistent and checked."""

    class_name: str = Field(description="Name of the Manager class in tools.py.")
    id_field: str = Field(description="Existing field the tools look rows up by.")
    api_docs: APIDocs = Field(description="API documentation, one entry per API-graph node.")
    toolspecs: ToolSpecs = Field(description="Bedrock toolSpecs, one per API-graph node (toolspecs.json).")
    code: ToolCode = Field(description="tools.py of the bundle.")
    steps: list[ToolsStepRecord] = Field(default_factory=list, description="Provenance of each ask, in order.")


def manager_class_name(theme_slug: str) -> str:
    """``pharmacy-prescription-refills`` -> ``PharmacyPrescriptionRefillsManager``.

    The name is a valid identifier that starts with a capital letter (``Domain`` is prefixed
    when the slug starts with a digit) and ends in ``Manager``, as the harness requires.
    """
    words = [w for w in re.split(r"[^A-Za-z0-9]+", theme_slug) if w]
    stem = "".join(w[:1].upper() + w[1:] for w in words) or "Domain"
    if stem[0].isdigit():
        stem = "Domain" + stem
    return stem[:56] + "Manager"


def csv_cell(value: Any) -> str:
    """How the bundle CSV spells a value: ``True``/``False``, ``repr`` of floats, JSON for lists."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def parse_cell(text: str, field_type: str) -> Any:
    """Read a CSV cell back by its schema type; a cell that does not convert is returned as text.

    Args:
        text: The cell as written by :func:`csv_cell`.
        field_type: Schema type (``integer``, ``float``, ``boolean``, ``list[...]``, …).
    """
    try:
        if field_type == "integer":
            return int(text)
        if field_type == "float":
            return float(text)
        if field_type == "boolean":
            lowered = text.strip().lower()
            return {"true": True, "false": False}.get(lowered, text)
        if field_type.startswith("list"):
            value = json.loads(text)
            return value if isinstance(value, list) else text
    except ValueError:
        return text
    return text
