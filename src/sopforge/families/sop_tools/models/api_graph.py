"""APIGraph: the APIs that carry out an SOP and their direct dependencies (TELLER P4).

Nodes are APIs; an edge runs from a prerequisite (``direct_dependencies[].dependent_api``) to
the API that lists it. The graph is grounded in the DataSchema (every parameter is a schema
field) and in the SOP (every API names the ``5.x`` steps it implements). Its central invariant
is **provenance closure**: every input is either an existing field or an output of an upstream
API, and every intermediate to-be-obtained field is produced by some API. Decision fields are
never produced by an API: the agent decides by applying the SOP to tool outputs, so a benchmark
task cannot be answered by calling one tool (format: ``docs/formats.md``, section "api_graph").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from sopforge.families.sop_tools.models import write_conditions
from sopforge.families.sop_tools.models.write_conditions import Conditions
from sopforge.parsing import ParseError, extract_tag, one_line, strip_code_fence

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "API_NAME_RE",
    "TAG",
    "InputParameter",
    "OutputParameter",
    "APIDependency",
    "APISpec",
    "GraphMetrics",
    "APIGraph",
]

TAG = "api_dependency_graph"
# Valid as a Python function name (TELLER P8: function name = API name), a Bedrock toolSpec
# name and an OpenAI function name (<= 64 characters).
API_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
# Spellings of a schema type that mean the same thing; anything else is reported.


def _lower(value: Any) -> Any:
    # "Data_Dependency" or "High " has one reading; anything else is left for the Literal to refuse.
    return value.strip().lower() if isinstance(value, str) else value


Source = Annotated[Literal["user_input", "other_api", "system_state", "decision"], BeforeValidator(_lower)]
Effect = Annotated[Literal["read", "write"], BeforeValidator(_lower)]
Destination = Annotated[Literal["other_api", "storage", "ui_display"], BeforeValidator(_lower)]
DependencyType = Annotated[Literal["data_dependency", "state_dependency", "temporal_dependency"],
                           BeforeValidator(_lower)]
Level = Annotated[Literal["low", "medium", "high"], BeforeValidator(_lower)]


class InputParameter(BaseModel):
    """One input of an API; its name is a schema field."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Schema field name the API takes.")
    data_type: str = Field(description="The field's schema type, e.g. 'integer' or 'enum'.")
    source: Source = Field(
        description="'user_input': an existing field supplied with the case; 'other_api': output of a "
                    "prerequisite API; 'system_state': read from the case record (an existing field, or a "
                    "to-be-obtained field an upstream API stored); 'decision': a [decision] field the agent has "
                    "decided by applying the SOP, which only a write API takes (to record it).")
    required: bool = Field(True, description="Whether the API cannot run without it.")


class OutputParameter(BaseModel):
    """One output of an API; its name is a schema field, never a decision field."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Schema field name the API returns.")
    data_type: str = Field(description="The field's schema type.")
    destination: Destination = Field(
        description="'other_api': consumed by a later API; 'storage': written back to the case record; "
                    "'ui_display': shown to the operator.")


class APIDependency(BaseModel):
    """A direct prerequisite of an API: the edge ``dependent_api -> this API``."""

    model_config = ConfigDict(extra="forbid")

    dependent_api: str = Field(description="Name of the prerequisite API that must run first (TELLER's key name).")
    dependency_type: DependencyType = Field(
        description="'data_dependency': this API takes an output of the prerequisite as an input; "
                    "'state_dependency': it needs a state change the prerequisite makes; "
                    "'temporal_dependency': it must only run after it.")
    dependency_reason: str = Field(description="Evidence: the parameter passed or the state relied on.")


class APISpec(BaseModel):
    """One node of the graph: a read (a look-up or computation) or a write (it changes the simulated database)."""

    model_config = ConfigDict(extra="forbid")

    api_name: str = Field(description="Unique name matching ^[A-Za-z][A-Za-z0-9_]{0,63}$.")
    description: str = Field(description="What the API does.")
    purpose: str = Field(description="Its role in the business process.")
    effect: Effect = Field("read", description=(
        "'read': returns values and changes nothing; 'write': creates or replaces one record of the case in "
        "writes_table (record a decision, open a referral, notify a party) and returns only its record_id."))
    writes_table: str | None = Field(None, description="Write APIs: the snake_case table of the simulated database "
                                                       "it writes one record per case into.")
    when: Annotated[Conditions, BeforeValidator(write_conditions.normalize)] = Field(default_factory=dict, description=(
        "Write APIs: the branch of the SOP on which the write happens, as field -> entries (every field must "
        "match; a field matches when one of its entries does). An entry is a value label, a number, or a "
        "comparison with a number ('> 0', '!= 0', '>= 2500'). A list of such mappings means any of them. The SOP "
        "forbids the write on every other branch. {} means on every branch (sopforge.families.sop_tools.models."
        "write_conditions)."))
    sop_steps: list[str] = Field(default_factory=list,
                                 description="Main Procedure step numbers (e.g. '5.2.1') the API implements.")
    input_parameters: list[InputParameter] = Field(default_factory=list, description="Inputs, in call order.")
    output_parameters: list[OutputParameter] = Field(default_factory=list,
                                                     description="Outputs: at least one for a read, none for a write.")
    direct_dependencies: list[APIDependency] = Field(default_factory=list,
                                                     description="Prerequisite APIs (incoming edges).")
    complexity_level: Level = Field(description="Technical complexity.")
    business_criticality: Level = Field(description="Business criticality.")

    @field_validator("sop_steps", mode="before")
    @classmethod
    def _steps_are_text(cls, value: Any) -> Any:
        # Our YAML loader keeps '5.10' as text; a bare integer (5) is still turned into text so the
        # step check, not a type error, reports it.
        if isinstance(value, list):
            return [str(v).strip().rstrip(".") if isinstance(v, (str, int)) else v for v in value]
        return value

    @property
    def writes(self) -> bool:
        return self.effect == "write"

    def allowed_on(self, values: dict[str, Any]) -> bool:
        """Whether the SOP allows (and requires) this write on a task with these field values."""
        return write_conditions.satisfied(self.when, values)

    @property
    def conditional(self) -> bool:
        """Whether the write happens on some branches only."""
        return bool(write_conditions.alternatives(self.when))

    @property
    def when_text(self) -> str:
        """The write's branch in plain words (``every branch`` when it has no condition)."""
        return write_conditions.render(self.when)

    @property
    def input_names(self) -> list[str]:
        return [p.name for p in self.input_parameters]

    @property
    def output_names(self) -> list[str]:
        return [p.name for p in self.output_parameters]


class GraphMetrics(BaseModel):
    """Size of a graph as TELLER Table 4 reports it."""

    nodes: int = Field(description="Number of APIs.")
    edges: int = Field(description="Number of distinct directed edges between existing APIs.")
    density: float = Field(description="E / (N (N - 1)); 0 for fewer than two nodes.")


class APIGraph(BaseModel):
    """The API dependency graph of one SOP."""

    model_config = ConfigDict(extra="forbid")

    apis: list[APISpec] = Field(min_length=1, description="The APIs, in the order written.")

    @classmethod
    def parse(cls, raw_text: str) -> APIGraph:
        """Parse the YAML inside ``<api_dependency_graph>`` (``<dependency_analysis>`` is ignored).

        Args:
            raw_text: The model's full answer.

        Returns:
            The parsed graph; run :func:`check_graph` for the schema- and SOP-grounded checks.

        Raises:
            ParseError: The block is missing, the YAML is invalid or repeats a key (the message
                names the line), or the structure does not match the format.
        """
        body = strip_code_fence(extract_tag(raw_text, TAG))
        data = _load_yaml(body)
        if not isinstance(data, dict) or "apis" not in data:
            raise ParseError(f"<{TAG}> must be a YAML mapping with one key 'apis' holding a list of APIs")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ParseError(_describe(exc, data)) from exc

    @property
    def names(self) -> list[str]:
        """API names in the order written."""
        return [a.api_name for a in self.apis]

    @property
    def write_apis(self) -> list[APISpec]:
        """The APIs that change the simulated database, in the order written."""
        return [a for a in self.apis if a.writes]

    @property
    def read_apis(self) -> list[APISpec]:
        return [a for a in self.apis if not a.writes]

    def tables(self) -> list[str]:
        """The tables the write APIs write, each once, in the order written."""
        return list(dict.fromkeys(a.writes_table for a in self.write_apis if a.writes_table))

    def api(self, name: str) -> APISpec:
        """Return the API called ``name``.

        Raises:
            KeyError: No such API.
        """
        for a in self.apis:
            if a.api_name == name:
                return a
        raise KeyError(f"no API named {name!r} in the graph")

    def to_prompt_text(self) -> str:
        """The graph as YAML in the answer format, for later templates (TELLER ``direct_graph``/``api_graph``)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)

    def edges(self) -> list[tuple[str, str]]:
        """Declared edges ``(prerequisite, consumer)`` in order written, without repeats (dangling ones included)."""
        return list(dict.fromkeys((d.dependent_api, a.api_name) for a in self.apis for d in a.direct_dependencies))

    def to_networkx(self) -> nx.DiGraph:
        """A DiGraph with one node per API and one edge per dependency between existing APIs.

        Node attribute ``spec`` holds the APISpec; edge attributes are ``dependency_type`` and
        ``dependency_reason`` of the first declaration. Dangling dependencies are left out
        (``api_graph.dependencies_exist`` reports them).
        """
        import networkx as nx  # 0.2 s: loaded when a graph is walked, not by every command that names the model

        g = nx.DiGraph()
        for a in self.apis:
            if a.api_name not in g:
                g.add_node(a.api_name, spec=a)
        for a in self.apis:
            for d in a.direct_dependencies:
                if d.dependent_api in g and not g.has_edge(d.dependent_api, a.api_name):
                    g.add_edge(d.dependent_api, a.api_name, dependency_type=d.dependency_type,
                               dependency_reason=d.dependency_reason)
        return g

    def topological_order(self) -> list[str]:
        """API names with every prerequisite before its consumers; ties keep the written order.

        Raises:
            ValueError: The graph has a cycle (named in the message).
        """
        import networkx as nx

        g = self.to_networkx()
        position = {n: i for i, n in enumerate(dict.fromkeys(self.names))}
        try:
            return list(nx.lexicographical_topological_sort(g, key=position.__getitem__))
        except nx.NetworkXUnfeasible as exc:
            raise ValueError(f"the API graph has a cycle: {_cycle_text(g)}") from exc

    def metrics(self) -> GraphMetrics:
        """Nodes, edges and density E/(N(N-1)), as in TELLER Table 4."""
        g = self.to_networkx()
        n, e = g.number_of_nodes(), g.number_of_edges()
        return GraphMetrics(nodes=n, edges=e, density=e / (n * (n - 1)) if n > 1 else 0.0)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses repeated keys and keeps decimals such as step '5.10' as text."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML signature
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# No field of the format is a float; without the resolver '5.10' is not read as 5.1.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(body: str) -> Any:
    try:
        return yaml.load(body, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is None:
            raise ParseError(f"<{TAG}>: invalid YAML: {one_line(problem)}") from exc
        lines = body.splitlines()
        text = lines[mark.line] if mark.line < len(lines) else ""
        hint = "" if isinstance(exc, yaml.constructor.ConstructorError) else \
            "; quote text values and indent with two spaces"
        raise ParseError(f"<{TAG}>: invalid YAML at line {mark.line + 1} of the block ({one_line(problem)}): "
                         f"{one_line(text, 100)!r}{hint}") from exc


def _describe(exc: ValidationError, data: dict) -> str:
    # "apis[2] (calculateAge).input_parameters[0].source: ..." says which API to fix.
    apis = data.get("apis") if isinstance(data.get("apis"), list) else []
    parts = []
    for err in exc.errors():
        loc, out = list(err["loc"]), []
        for i, p in enumerate(loc):
            if isinstance(p, int):
                out[-1] += f"[{p}]"
                if i == 1 and loc[0] == "apis" and p < len(apis) and isinstance(apis[p], dict) \
                        and isinstance(apis[p].get("api_name"), str):
                    out[-1] += f" ({apis[p]['api_name']})"
            else:
                out.append(str(p))
        parts.append(f"{'.'.join(out) or 'apis'}: {err['msg']}")
    return one_line(f"<{TAG}>: " + "; ".join(parts), 400)


def _cycle_text(g: nx.DiGraph) -> str:
    import networkx as nx

    cycle = nx.find_cycle(g)
    return " -> ".join([u for u, _ in cycle] + [cycle[-1][1]])
