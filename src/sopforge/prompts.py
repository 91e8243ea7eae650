"""Prompt template registry: prompts are files with an identity.

Templates live at ``<prompts_dir>/<source>/<stage>.j2`` and are addressed by the id
``"<source>/<stage>"`` (e.g. ``teller/context``). Each file opens with a Jinja comment whose
body is YAML (name, source, parameters, output, decisions); it documents where the prompt
comes from and is the contract for its parameters. Rendering happens in a sandbox with
``StrictUndefined`` and yields the text together with the sha256 of the template source and
of the rendered prompt, which the stages store with every output and use in cache keys.

Templates are self-contained: the environment has no loader, so ``{% include %}`` and
``{% extends %}`` fail. That keeps the template hash a complete identity of the prompt.

Prompt caching: a template may mark where the part it shares with the stage's other prompts ends
with the comment ``{# cache-break #}`` at top level (outside any block). The comment renders to
nothing, so the prompt text is the same with or without it; the render also reports how many
characters precede it (``RenderedPrompt.cache_prefix``), and the Anthropic provider marks that
prefix for its prompt cache. Put the long shared material (business context, SOP, schema, tools)
before the marker and the per-item part after it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from jinja2 import StrictUndefined, Template, TemplateError, TemplateSyntaxError, UndefinedError, meta
from jinja2.sandbox import SandboxedEnvironment, SecurityError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sopforge.errors import UserError

if TYPE_CHECKING:
    from sopforge.settings import Settings

TEMPLATE_SUFFIX = ".j2"
_ID_PART = re.compile(r"^[a-z][a-z0-9_]*$")
# The header must be the very first thing in the file so nobody mistakes a later comment for it.
_HEADER = re.compile(r"\A\{#-?(?P<body>.*?)-?#\}", re.DOTALL)
CACHE_BREAK = "{# cache-break #}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class OutputSpec(BaseModel):
    """What a template asks the model to produce."""

    model_config = ConfigDict(extra="forbid")

    format: str = Field(description="Where the format is specified, e.g. 'docs/formats.md#context'.")
    tags: list[str] = Field(min_length=1, description="Answer tags the parser extracts, outermost first.")
    analysis_tags: list[str] = Field(default_factory=list,
                                     description="Reasoning tags the model writes first; kept raw, never parsed.")


class TemplateHeader(BaseModel):
    """The YAML header at the top of every template file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Human-readable name of the prompt.")
    source: list[str] = Field(min_length=1,
                              description="Paper, table/appendix and seed line numbers the prompt is ported from.")
    parameters: dict[str, str] = Field(description="Parameter name -> what the caller must pass.")
    output: OutputSpec = Field(description="Tags and format the model must answer with.")
    decisions: list[str] = Field(min_length=1,
                                 description="What the papers left open and what we chose; deliberate departures.")

    @field_validator("source", mode="before")
    @classmethod
    def _one_source_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("parameters", mode="before")
    @classmethod
    def _no_parameters_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class PromptTemplate(BaseModel):
    """One template file, loaded: identity, header and source text."""

    id: str = Field(description="Template id '<source>/<stage>'.")
    path: Path = Field(description="File the template was read from.")
    header: TemplateHeader = Field(description="Parsed header comment.")
    source: str = Field(description="Full template source, header included.")
    sha256: str = Field(description="sha256 of the template file's bytes.")


class RenderedPrompt(BaseModel):
    """A rendered prompt with the identity stored next to every LLM output."""

    text: str = Field(description="The prompt text sent to the model.")
    template_id: str = Field(description="Id of the template that produced it.")
    template_hash: str = Field(description="sha256 of the template source.")
    prompt_hash: str = Field(description="sha256 of the rendered text (UTF-8).")
    cache_prefix: int | None = Field(None, description=(
        "Characters of ``text`` before the template's ``{# cache-break #}`` marker: the part shared with "
        "the stage's other prompts, marked for prompt caching. None without a marker."))


class ParameterReport(BaseModel):
    """Header-declared parameters against the variables the template body actually reads."""

    template_id: str = Field(description="Template the report is about.")
    declared: list[str] = Field(description="Parameters named in the header, sorted.")
    used: list[str] = Field(description="Variables the template reads from its context, sorted.")

    @property
    def undeclared(self) -> list[str]:
        """Variables the body reads that the header does not declare."""
        return sorted(set(self.used) - set(self.declared))

    @property
    def unused(self) -> list[str]:
        """Declared parameters the body never reads."""
        return sorted(set(self.declared) - set(self.used))

    @property
    def ok(self) -> bool:
        return set(self.declared) == set(self.used)


def _new_environment() -> SandboxedEnvironment:
    # trim/lstrip_blocks keep `{% ... %}` lines from leaking blank lines into prompts.
    return SandboxedEnvironment(
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def parse_header(template_id: str, source: str) -> TemplateHeader:
    """Parse the leading ``{#- yaml -#}`` comment of a template.

    Args:
        template_id: Id used in error messages.
        source: Full template source.

    Returns:
        The validated header.

    Raises:
        UserError: The comment is missing, is not a YAML mapping, or misses/misnames keys.
    """
    match = _HEADER.match(source)
    if match is None:
        raise UserError(f"prompt template {template_id!r} must start with a '{{#- ... -#}}' YAML header comment")
    try:
        data = yaml.safe_load(match.group("body"))
    except yaml.YAMLError as exc:
        raise UserError(f"prompt template {template_id!r}: header is not valid YAML: {exc}".replace("\n", " ")) from exc
    if not isinstance(data, dict):
        raise UserError(f"prompt template {template_id!r}: header must be a YAML mapping")
    try:
        return TemplateHeader.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'header'}: {e['msg']}" for e in exc.errors())
        raise UserError(f"prompt template {template_id!r}: bad header: {problems}") from exc


class PromptRegistry:
    """Discovers, describes and renders the templates under one prompts directory.

    Files are re-read on every ``get``/``render`` so an edited template is never served stale;
    headers and compiled templates are kept by source hash, so an unchanged file is parsed and
    compiled once (YAML parsing every header at every render was 0.2-0.3 CPU-s of a generation).
    """

    def __init__(self, prompts_dir: Path):
        """Create a registry.

        Args:
            prompts_dir: Folder holding ``<source>/<stage>.j2`` files.
        """
        self.prompts_dir = Path(prompts_dir)
        self._env = _new_environment()
        self._compiled: dict[str, Template] = {}
        self._headers: dict[str, TemplateHeader] = {}

    def ids(self) -> list[str]:
        """Return the ids of all templates on disk, sorted.

        Returns:
            Ids ``"<source>/<stage>"``; files whose folder or stem is not snake_case are ignored.
        """
        if not self.prompts_dir.is_dir():
            return []
        found = []
        for path in self.prompts_dir.glob(f"*/*{TEMPLATE_SUFFIX}"):
            source, stage = path.parent.name, path.name[: -len(TEMPLATE_SUFFIX)]
            if path.is_file() and _ID_PART.match(source) and _ID_PART.match(stage):
                found.append(f"{source}/{stage}")
        return sorted(found)

    def get(self, template_id: str) -> PromptTemplate:
        """Load one template with its header and hash.

        Args:
            template_id: ``"<source>/<stage>"``.

        Returns:
            The loaded template.

        Raises:
            UserError: Unknown id (the message lists the known ids) or a malformed header.
        """
        known = self.ids()
        if template_id not in known:
            raise UserError(
                f"unknown prompt template {template_id!r} in {self.prompts_dir}; "
                f"known: {', '.join(known) or '(none)'}"
            )
        source_name, stage = template_id.split("/")
        path = self.prompts_dir / source_name / f"{stage}{TEMPLATE_SUFFIX}"
        raw = path.read_bytes()
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"prompt template {template_id!r} is not UTF-8: {path}") from exc
        digest = _sha256(raw)
        header = self._headers.get(digest)
        if header is None:
            header = self._headers[digest] = parse_header(template_id, source)
        return PromptTemplate(id=template_id, path=path, header=header.model_copy(deep=True), source=source,
                              sha256=digest)

    def declared_vs_used(self, template_id: str) -> ParameterReport:
        """Compare the header's parameters with the variables the template reads.

        Args:
            template_id: ``"<source>/<stage>"``.

        Returns:
            Both sets; ``report.ok`` is True when they are equal.
        """
        template = self.get(template_id)
        try:
            ast = self._env.parse(template.source)
        except TemplateSyntaxError as exc:
            raise UserError(f"prompt template {template_id!r}: syntax error line {exc.lineno}: {exc.message}") from exc
        used = meta.find_undeclared_variables(ast)
        return ParameterReport(template_id=template_id, declared=sorted(template.header.parameters),
                               used=sorted(used))

    def render(self, template_id: str, **params: Any) -> RenderedPrompt:
        """Render a template with exactly its declared parameters.

        Args:
            template_id: ``"<source>/<stage>"``.
            **params: One value per parameter declared in the header; no more, no fewer.

        Returns:
            The prompt text with its template id, template hash and prompt hash.

        Raises:
            UserError: Unknown id, missing or extra parameters, a variable the header does not
                declare, a sandbox violation, or a template syntax/runtime error.
        """
        template = self.get(template_id)
        declared = set(template.header.parameters)
        missing = sorted(declared - set(params))
        extra = sorted(set(params) - declared)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing parameter(s): {', '.join(missing)}")
            if extra:
                parts.append(f"undeclared parameter(s): {', '.join(extra)}")
            raise UserError(f"prompt template {template_id!r}: {'; '.join(parts)} "
                            f"(declared: {', '.join(sorted(declared)) or 'none'})")
        try:
            text = self._compile(template).render(**params)
            prefix = self._cache_prefix(template, text, params)
        except SecurityError as exc:
            raise UserError(f"prompt template {template_id!r}: blocked by the sandbox: {exc}") from exc
        except UndefinedError as exc:
            hint = " (declare it in the header and pass it)" if str(exc).endswith("is undefined") else ""
            raise UserError(f"prompt template {template_id!r}: {exc}{hint}") from exc
        except (TemplateError, TypeError) as exc:
            # TypeError covers `{% include %}` (no loader, by design) and type clashes in expressions.
            raise UserError(f"prompt template {template_id!r}: render failed: {exc}") from exc
        return RenderedPrompt(text=text, template_id=template_id, template_hash=template.sha256,
                              prompt_hash=_sha256(text.encode("utf-8")), cache_prefix=prefix)

    def _cache_prefix(self, template: PromptTemplate, text: str, params: dict[str, Any]) -> int | None:
        """Length of the text rendered before ``{# cache-break #}``; None without the marker, or when
        the marker sits inside a block (the cut-off source would not render a prefix of the text)."""
        cut = template.source.find(CACHE_BREAK)
        if cut < 0:
            return None
        try:
            prefix = self._compile(template, end=cut).render(**params)
        except (UserError, TemplateError):
            return None
        return len(prefix) if prefix and text.startswith(prefix) else None

    def _compile(self, template: PromptTemplate, end: int | None = None) -> Template:
        # Compiling the exact source we hashed guarantees the hash describes what was rendered.
        key = template.sha256 if end is None else f"{template.sha256}:{end}"
        compiled = self._compiled.get(key)
        if compiled is None:
            try:
                compiled = self._env.from_string(template.source[:end])
            except TemplateSyntaxError as exc:
                raise UserError(f"prompt template {template.id!r}: syntax error line {exc.lineno}: "
                                f"{exc.message}") from exc
            self._compiled[key] = compiled
        return compiled


def default_registry(settings: Settings | None = None) -> PromptRegistry:
    """Registry over the project's ``prompts/`` folder.

    Args:
        settings: Settings to read ``prompts_dir`` from; defaults to the environment's.

    Returns:
        A registry rooted at ``settings.prompts_dir``.
    """
    if settings is None:
        from sopforge.settings import load_settings

        settings = load_settings()
    return PromptRegistry(settings.prompts_dir)
