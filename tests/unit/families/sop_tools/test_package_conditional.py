"""The package stage exports conditional fields ([present_if]) as empty cells and tells the agent so.

The permits trial: an owner-builder declaration exists only for owner-builders, a contractor's
licence only for contractors. Every stage before ``package`` allowed their ``None``; the package
stage did not hand the schema to the exporter, which refused every such cell after every LLM
call was paid for.
"""

from __future__ import annotations

import json

from sopforge.families.sop_tools import family
from sopforge.families.sop_tools.models.data_schema import DataSchema
from sopforge.families.sop_tools.stages import package

SCHEMA = DataSchema.parse("""<schema>
<Existing_fields>
application_id - string, unique identifier of the permit application (e.g., "RP-2026-004817")
applicant_type - enum, who is responsible for the work (e.g., "owner_builder") [choices: licensed_contractor | owner_builder]
owner_builder_declaration_signed - boolean, whether the owner-builder declaration is signed (e.g., True) [present_if: applicant_type = owner_builder]
contractor_license_status - enum, licence board status (e.g., "active") [choices: active | expired] [present_if: applicant_type = licensed_contractor]
</Existing_fields>
<Field_to_be_obtained>
intake_decision - enum, outcome (e.g., "approve") [choices: approve | refer] [decision]
</Field_to_be_obtained>
</schema>""")
SPEC = {"name": "verifyResponsibleParty", "description": "Checks the responsible party.",
        "inputSchema": {"json": {"type": "object", "required": ["application_id", "applicant_type"], "properties": {
            "application_id": {"type": "string", "description": "Application id."},
            "applicant_type": {"type": "string", "description": "Applicant type."},
            "owner_builder_declaration_signed": {"type": "boolean", "description": "Declaration signed."},
            "contractor_license_status": {"type": "string", "description": "Licence status."}}}}}


def test_the_package_stage_reads_the_schema_and_hands_its_conditional_fields_to_the_exporter():
    stage = next(s for s in family.STAGES if s.name == "package")
    assert "schema" in stage.parents
    assert package._conditional_columns(SCHEMA) == {
        "owner_builder_declaration_signed": "applicant_type = owner_builder",
        "contractor_license_status": "applicant_type = licensed_contractor"}
    assert package._conditional_columns(None) == {}


def test_a_tool_parameter_fed_by_a_shown_conditional_field_says_when_it_is_empty():
    conditional = package._conditional_columns(SCHEMA)
    shown = ["application_id", "applicant_type", "owner_builder_declaration_signed"]  # the licence stays hidden
    before = json.dumps(SPEC)
    spec = package._say_when_empty(SPEC, conditional, shown)
    props = spec["inputSchema"]["json"]["properties"]
    assert props["owner_builder_declaration_signed"]["description"] == (
        "Declaration signed. Has a value only when applicant_type = owner_builder; on other cases the case data "
        "shows it empty, so leave it out.")
    assert props["contractor_license_status"]["description"] == "Licence status."
    assert props["application_id"]["description"] == "Application id."
    assert json.dumps(SPEC) == before  # the accepted tools artifact is not changed
    assert package._say_when_empty(spec, conditional, shown) == spec  # said once, however often it is exported
