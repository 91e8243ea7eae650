"""``declared_stage``: a stored artifact's stage as its own family declares it, without loading the others."""

from __future__ import annotations

import subprocess
import sys

from sopforge.families import declared_stage, shared_stages

# A fresh interpreter: this one may have loaded every family already.
ONLY_ITS_FAMILY = """
import sys
from sopforge.families import declared_stage
spec = declared_stage("sop", "sop_tools")
assert spec is not None and spec.name == "sop" and spec.render is not None
print(sorted(m for m in sys.modules if m.endswith(".family")))
"""


def test_only_the_artifacts_family_loads():
    proc = subprocess.run([sys.executable, "-c", ONLY_ITS_FAMILY], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['sopforge.families.sop_tools.family']"


def test_a_shared_stage_has_no_family():
    assert declared_stage("context", None) is next(s for s in shared_stages() if s.name == "context")


def test_a_family_this_version_does_not_know_falls_back_to_every_declaration():
    assert declared_stage("maze_hrs", "renamed_family").name == "maze_hrs"
    assert declared_stage("sop", None).name == "sop"  # a store written before stages named their family
    assert declared_stage("no_such_stage", "sop_tools") is None
