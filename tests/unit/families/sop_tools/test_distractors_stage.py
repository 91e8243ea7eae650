"""distractors stage ``run()`` with the real templates, a scripted model behind the Gateway and the real sandbox."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from sopforge.errors import UserError
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.models.dataset import Dataset, DatasetBatch, find_id_field
from sopforge.families.sop_tools.models.distractors import DistractorSet
from sopforge.families.sop_tools.models.ground_truth import ReferenceProcedure
from sopforge.families.sop_tools.models.tools import APIDocs, ToolCode, ToolsArtifact, ToolSpecs
from sopforge.families.sop_tools.stages import distractors as stage
from sopforge.families.sop_tools.verify.ground_truth import compute_ground_truth
from sopforge.families.sop_tools.verify.ground_truth_bundle import write_bundle, write_rows_csv
from sopforge.sandbox import SandboxLimits, run_in_sandbox
from sopforge.families.sop_tools.verify.tool_checks import check_code_static

ANSWERS = Path(__file__).resolve().parents[3] / "fixtures" / "answers"
CLASS = "PharmacyPrescriptionRefillsManager"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=30)
GOOD_TOOLS = ["getRefillHistory", "getPrescriptionSummary", "calculateDaysSupplyRatio", "checkFormularyTier",
              "getWeatherForecast"]
SPECS_END = "\n]\n</distractor_toolspecs>"
CODE_END = '                "high_celsius": 5 + code % 25}\n'


def answer(name: str) -> str:
    return (ANSWERS / f"{name}.txt").read_text(encoding="utf-8")


def spec_entry(kind: str, name: str, props: dict) -> str:
    spec = {"name": name, "description": f"{name} look-alike. Params: {', '.join(props)}.",
            "inputSchema": {"json": {"type": "object", "properties": props, "required": list(props)}}}
    return ",\n" + json.dumps({"kind": kind, "toolSpec": spec})


ID = {"prescription_id": {"type": "string", "description": "Prescription id, e.g. RX-004512."}}


@pytest.fixture(scope="module")
def domain():
    """The recorded pharmacy domain with its ground truth computed once (real sandbox)."""
    schema = DataSchema.parse(answer("schema"))
    graph = APIGraph.parse(answer("api_graph"))
    rows = [r for n in (1, 2) for r in DatasetBatch.parse(answer(f"dataset_batch{n}"), schema).rows]
    dataset = Dataset(fields=[f.name for f in schema.existing], id_field=find_id_field(schema), rows=rows,
                      rows_requested=len(rows))
    tools = ToolsArtifact(class_name=CLASS, id_field="prescription_id", api_docs=APIDocs.parse(answer("api_docs")),
                          toolspecs=ToolSpecs.parse(answer("toolspecs")), code=ToolCode.parse(answer("tool_code"), CLASS))
    procedure = ReferenceProcedure.parse(answer("reference_procedure"))
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_bundle(Path(tmp) / "b", tool_code=tools.code.source, toolspecs=tools.toolspecs.specs,
                              procedure_source=procedure.source, rows=rows, schema=schema)
        gt, _ = compute_ground_truth(bundle, schema, graph, rows, limits=LIMITS)
    assert len(gt.tasks) == len(rows)
    return schema, graph, dataset, tools, gt


@pytest.fixture
def inputs(domain, good_context, good_sop, slug):
    schema, graph, dataset, tools, gt = domain
    return stage.DistractorsInputs(theme_slug=slug, context=good_context, schema=schema, sop=good_sop,
                                   api_graph=graph, tools=tools, dataset=dataset, ground_truth=gt, n_tools=5,
                                   n_fields=3, seed=7)


def kw(settings, llm):
    return {"llm": llm, "settings": settings, "model": "fake-1", "temperature": 0.1, "limits": LIMITS}


def call_in_sandbox(tmp_path: Path, source: str, calls: list[dict], schema, rows) -> list:
    """Call tools of ``source`` through its Manager, with the dataset CSV next to it as in a bundle."""
    write_rows_csv(tmp_path / "test_set_with_outputs.csv", rows, schema)
    (tmp_path / "tools.py").write_text(source, encoding="utf-8")
    return run_in_sandbox(tmp_path, "tools.py", {"op": "call_tools", "groups": [calls]}, limits=LIMITS).results[0]


# --------------------------------------------------------------------------------------- good answers

def test_good_answers_keep_every_distractor_and_the_domain_still_scores_one(scripted, settings, inputs, domain,
                                                                          slug, tmp_path):
    schema, _, dataset, tools, gt = domain
    llm, provider = scripted([answer("distractor_tools"), answer("distractor_fields")])
    result = stage.run(inputs, **kw(settings, llm))
    got: DistractorSet = result.artifact

    assert [t.name for t in got.kept_tools()] == GOOD_TOOLS and all(t.reason == "" for t in got.tools)
    assert {t.kind for t in got.tools} == {"similar", "redundant", "subtly_different", "off_domain"}
    assert [r.call_key for r in provider.requests] == [f"{slug}/distractors/tools/a1", f"{slug}/distractors/fields/a1"]
    assert result.attempts == 2 and result.template_id == "sop_bench/distractor_tools"
    checks = {c.name: c for c in result.checks}
    assert checks["distractors.oracle_with_distractors"].passed and "TSR 1.00" in \
        checks["distractors.oracle_with_distractors"].message
    assert checks["distractors.tools_kept"].passed and checks["distractors.fields_kept"].passed

    # Prompts carry what the model must avoid and mimic.
    tools_prompt, fields_prompt = (r.messages[0].content for r in provider.requests)
    assert "<distractor_toolspecs>" in tools_prompt and "determineBlockingReason" in tools_prompt
    assert "_matched_record" in tools_prompt and "process_tool_call" in tools_prompt
    assert "<distractor_fields>" in fields_prompt and "refill_decision" in fields_prompt

    # Exports: base specs first, then the distractors; the merged tools.py passes the tools contract.
    base_specs = json.loads(tools.toolspecs.to_json())
    exported = got.exported_toolspecs(base_specs)
    assert exported[:len(base_specs)] == base_specs
    assert [e["toolSpec"]["name"] for e in exported[len(base_specs):]] == GOOD_TOOLS
    assert all("kind" not in e and "kind" not in e["toolSpec"] for e in exported)
    merged = got.merged_tools_source(tools.code.source, CLASS)
    specs = ToolSpecs(specs=[e["toolSpec"] for e in exported])
    assert all(c.passed for c in check_code_static(ToolCode(source=merged, class_name=CLASS), specs))

    # The harness's Manager answers both a real tool (as before) and a distractor.
    row = dataset.rows[0]
    outcomes = call_in_sandbox(tmp_path, merged, [
        {"tool": "getPrescriptionRecord", "input": {"prescription_id": row["prescription_id"],
                                                    "patient_id": row["patient_id"]}},
        {"tool": "getWeatherForecast", "input": {"city": "Denver", "date": "2025-04-18"}}], schema, dataset.rows)
    assert outcomes[0].ok and outcomes[0].result == gt.tasks[0].expected_calls[0].output
    assert outcomes[1].ok and set(outcomes[1].result) == {"city", "date", "conditions", "high_celsius"}

    # Fields: values drawn from the pool per row, reproducibly; the columns are listed.
    assert got.distractor_columns() == ["prescriber_specialty", "preferred_pickup_method", "patient_age_years"]
    wide = got.rows_with_fields(dataset.rows, dataset.id_field)
    pool = got.fields[2].pool
    assert all(r["patient_age_years"] in pool for r in wide) and len({r["patient_age_years"] for r in wide}) > 1
    assert all("unchanged" in f.reason for f in got.fields)
    again = stage.run(inputs, **kw(settings, scripted([answer("distractor_tools"), answer("distractor_fields")])[0]))
    assert again.artifact.fields[0].values == got.fields[0].values
    assert [(r.component, r.item_type, r.kept) for r in got.funnel] == [
        ("distractor_tool", "similar", 1), ("distractor_tool", "redundant", 1),
        ("distractor_tool", "subtly_different", 2), ("distractor_tool", "off_domain", 1),
        ("distractor_field", "new", 3)]
    assert got.drops == []


# --------------------------------------------------------------------------------------- bad tools

BAD_TOOLS_CODE = '''
    _FORMULARY_REVIEW_DAYS = _VALIDITY_LIMIT_DAYS.update(maintenance=30) or 30

    def _record(self, prescription_id):
        return {"prescription_id": str(prescription_id)}

    def getPatientProfile(self, prescription_id):
        return {"profile": self._record(prescription_id)["prescription_id"]}

    def getFormularyReviewDate(self, prescription_id):
        return {"review_after_days": self._FORMULARY_REVIEW_DAYS}

    def getLoyaltyPoints(self, prescription_id):
        raise ValueError("loyalty service unavailable")

    def checkinsuranceeligibility(self, patient_id):
        return {"insurance_status": "active"}
'''


def test_bad_distractor_tools_are_dropped_counted_and_never_exported(scripted, settings, inputs, domain, edit):
    _, _, _, tools, _ = domain
    specs = (spec_entry("redundant", "checkinsuranceeligibility", {"patient_id": {"type": "string"}})
             + spec_entry("similar", "getPatientProfile", ID)
             + spec_entry("subtly_different", "getFormularyReviewDate", ID)
             + spec_entry("off_domain", "getLoyaltyPoints", ID))
    bad = edit(edit(answer("distractor_tools"), SPECS_END, specs + SPECS_END), CODE_END, CODE_END + BAD_TOOLS_CODE)
    inputs = inputs.model_copy(update={"n_fields": 0})
    llm, provider = scripted([bad])
    result = stage.run(inputs, **kw(settings, llm))
    got = result.artifact
    reasons = {t.name: t.reason for t in got.tools if not t.kept}

    assert len(provider.requests) == 1, "single bad items are dropped, not re-asked"
    assert [t.name for t in got.kept_tools()] == GOOD_TOOLS
    assert "collides with the real tool checkInsuranceEligibility" in reasons["checkinsuranceeligibility"]
    assert "DistractorTools._record" in reasons["getPatientProfile"]
    assert "TSR" in reasons["getFormularyReviewDate"], "a distractor that changes shared state is caught by the oracle"
    assert "raised on every tried row" in reasons["getLoyaltyPoints"] and "loyalty" in reasons["getLoyaltyPoints"]
    assert {d.item: d.reason for d in got.drops} == reasons
    funnel = {r.item_type: r for r in got.funnel}
    assert (funnel["redundant"].generated, funnel["redundant"].dropped) == (2, 1)
    assert (funnel["similar"].generated, funnel["similar"].dropped) == (2, 1)
    assert (funnel["subtly_different"].dropped, funnel["off_domain"].dropped) == (1, 1)
    assert all(r.retried == 0 for r in got.funnel)

    exported = {e["toolSpec"]["name"] for e in got.exported_toolspecs([])}
    merged = got.merged_tools_source(tools.code.source, CLASS)
    for name in reasons:
        assert name not in exported and f"def {name}(" not in merged and f"def {name}(" not in got.code
    assert "_FORMULARY_REVIEW_DAYS" not in merged and "def _record(self, prescription_id):\n        return {" \
        not in merged, "helpers of dropped tools go with them"
    checks = {c.name: c for c in result.checks}
    assert checks["distractors.oracle_with_distractors"].passed
    assert checks["distractors.tools_kept"].passed  # 5 kept of 5 asked


def test_a_distractor_named_in_the_expected_calls_is_refused(scripted, settings, inputs, edit):
    renamed = answer("distractor_tools").replace("getWeatherForecast", "getInteractionAlerts")
    llm, _ = scripted([renamed])
    got = stage.run(inputs.model_copy(update={"n_fields": 0}), **kw(settings, llm)).artifact
    [dropped] = [t for t in got.tools if not t.kept]
    assert dropped.name == "getInteractionAlerts" and "collides with the real tool" in dropped.reason
    assert "getInteractionAlerts" not in {e["toolSpec"]["name"] for e in got.exported_toolspecs([])}


# --------------------------------------------------------------------------------------- answer-level problems

@pytest.mark.parametrize("bad, why", [
    ("<distractor_toolspecs>[{\"toolSpec\": {\"name\": \"x\"}}]</distractor_toolspecs>", "distractors.parse"),
    ("I cannot help with that.", "distractors.parse"),
])
def test_unparsable_answer_is_reasked_and_raw_texts_kept(scripted, settings, inputs, bad, why):
    llm, provider = scripted([bad, answer("distractor_tools")])
    result = stage.run(inputs.model_copy(update={"n_fields": 0}), **kw(settings, llm))
    assert result.attempts == 2 and result.raw_texts == [bad, answer("distractor_tools")]
    reask = provider.requests[1].messages[-1].content
    assert why in reask and "Reply again" in reask
    assert all(r.retried == r.generated for r in result.artifact.funnel), "items of a re-asked answer count as retried"


@pytest.mark.parametrize("old, new, expected", [
    ("import os\n", "import os\nimport random\n", "distractors.code.policy.randomness"),
    ("    _CONDITIONS = (", "    def __init__(self):\n        self.cache = {}\n\n    _CONDITIONS = (", "__init__"),
    ("\n\nclass DistractorTools:", "\n_SHARED = {}\n\n\nclass DistractorTools:", "only imports"),
    ("import datetime\n", "import datetime as csv\n", "rebinds csv"),
])
def test_code_level_problems_are_reasked(scripted, settings, inputs, edit, old, new, expected):
    bad = edit(answer("distractor_tools"), old, new)
    llm, provider = scripted([bad, answer("distractor_tools")])
    result = stage.run(inputs.model_copy(update={"n_fields": 0}), **kw(settings, llm))
    assert result.attempts == 2 and expected in provider.requests[1].messages[-1].content
    assert len(result.artifact.kept_tools()) == 5


# --------------------------------------------------------------------------------------- fields

def test_fields_that_are_not_distractors_are_dropped_with_their_reason(scripted, settings, inputs, edit):
    extra = (',\n  {"name": "refills_remaining", "origin": "existing", "why": "looks administrative"},\n'
             '  {"name": "medication_class", "origin": "new", "type": "enum", "description": "x", '
             '"values": ["a", "b"]},\n'
             '  {"name": "store_region", "origin": "new", "type": "enum", "description": "x", "values": ["north"]},\n'
             '  {"name": "loyalty_tier", "origin": "new", "type": "integer", "description": "x", '
             '"values": ["gold", "silver"]}\n]')
    bad = edit(answer("distractor_fields"), "\n]", extra)
    llm, _ = scripted([bad])
    got = stage.run(inputs.model_copy(update={"n_tools": 0}), **kw(settings, llm)).artifact
    dropped = {f.name: f for f in got.fields if not f.kept}
    assert got.distractor_columns() == ["prescriber_specialty", "preferred_pickup_method", "patient_age_years"]
    refills = dropped["refills_remaining"]
    assert refills.changed_tasks and refills.changed_tasks[0] in refills.reason and "not a distractor" in refills.reason
    assert "collides with a field of the schema" in dropped["medication_class"].reason
    assert "two different values" in dropped["store_region"].reason
    assert "not a integer" in dropped["loyalty_tier"].reason
    funnel = {r.item_type: r for r in got.funnel}
    assert (funnel["existing"].generated, funnel["existing"].kept) == (1, 0)
    assert (funnel["new"].generated, funnel["new"].kept, funnel["new"].dropped) == (6, 3, 3)
    assert "refills_remaining" not in got.rows_with_fields([{"prescription_id": "RX-004512"}], "prescription_id")[0]


# --------------------------------------------------------------------------------------- skipping and inputs

def test_zero_counts_ask_nothing_and_export_the_base_registry(scripted, settings, inputs, domain):
    _, _, _, tools, _ = domain
    llm, provider = scripted([])
    result = stage.run(inputs.model_copy(update={"n_tools": 0, "n_fields": 0}), **kw(settings, llm))
    assert provider.requests == [] and result.attempts == 0 and result.raw_texts == []
    got = result.artifact
    assert got.tools == [] and got.fields == [] and got.funnel == []
    assert got.merged_tools_source(tools.code.source, CLASS) == tools.code.source
    assert got.exported_toolspecs([{"toolSpec": {"name": "a"}}]) == [{"toolSpec": {"name": "a"}}]


def test_a_stale_ground_truth_is_a_user_error_before_any_ask(scripted, settings, inputs, domain):
    _, _, _, _, gt = domain
    tasks = [t.model_copy(update={"expected_outputs": {"refill_decision": "deny"}}) for t in gt.tasks]
    stale = inputs.model_copy(update={"ground_truth": gt.model_copy(update={"tasks": tasks})})
    llm, provider = scripted([answer("distractor_tools")])
    with pytest.raises(UserError, match="re-run the reference stage"):
        stage.run(stale, **kw(settings, llm))
    assert provider.requests == []
