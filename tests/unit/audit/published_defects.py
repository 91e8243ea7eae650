"""Folders written with the idioms of published SOP-Bench domains (helpers for tests/unit/audit).

The clean folder (tests/fixtures/published/package_inspection) reads its data through paths
kept on ``self`` and built from ``__file__`` and class constants, re-reads the CSV with pandas
on every call, imports logging, pathlib and dateutil, prints in its constructor and shuffles
its copy of the toolspecs, as the public domains do. Two of its tools take parameters the CSV
does not hold (one from another tool's result, one from enums). Each defect below is one edit;
every edit asserts its target is present exactly once, so a change to the clean fixture cannot
silently turn a defect test into a test of the clean folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "published"
CLEAN = FIXTURES / "package_inspection"

ASSESS = '''        row = self._shipment(po_number)
        if Path(package_image_path).stem != po_number:
            raise ValueError(f"Image {package_image_path} does not belong to PO {po_number}")
        return {"package_condition": row["package_condition"]}'''
# Published warehouse_package_inspection: "Use deterministic logic for testing (based on PO number)".
PARITY = '''        damage_detected = int(po_number[3:]) % 3 == 0
        return {"package_condition": "damaged" if damage_detected else "intact"}'''
REPORT_RETURN = '''        logging.info(f"Discrepancy report for PO {po_number}")'''
PROBLEM_COUNT = '''            "problem_count": len(problem_type),'''
VARIANCE_BODY = '''        if ordered_quantity <= 0 or received_quantity < 0:'''


def edit(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert text.count(old) == 1, f"fixture edit target not found exactly once in {file}: {old!r}"
    path.write_text(text.replace(old, new))


def copy_clean(dest: Path) -> Path:
    folder = dest / "package_inspection"
    shutil.copytree(CLEAN, folder)
    return folder


def stub_report(folder: Path) -> None:
    """generateDiscrepancyReport (problem_type and resolution_status are not CSV columns) is a stub."""
    edit(folder, "tools.py", REPORT_RETURN, "        return None  # placeholder, as in published stubs\n" + REPORT_RETURN)


def parity_condition(folder: Path) -> None:
    """assessPackageCondition decides from the PO number's parity, ignoring the image and the data."""
    edit(folder, "tools.py", ASSESS, PARITY)


def random_report_id(folder: Path) -> None:
    """generateDiscrepancyReport returns a uuid4 report id: a value that changes from run to run."""
    edit(folder, "tools.py", "import random\n", "import random\nimport uuid\n")
    edit(folder, "tools.py", PROBLEM_COUNT, PROBLEM_COUNT + '\n            "report_id": f"RPT-{uuid.uuid4().hex[:8]}",')


def shuffled_problems(folder: Path) -> None:
    """generateDiscrepancyReport lists the problems in a random order: order only, the same items."""
    edit(folder, "tools.py", PROBLEM_COUNT,
         PROBLEM_COUNT + '\n            "problems": random.sample(problem_type, len(problem_type)),')


def subprocess_in_one_tool(folder: Path, marker: Path) -> None:
    """calculateQuantityVariance starts a process: that tool fails the policy, the others must still run."""
    edit(folder, "tools.py", VARIANCE_BODY,
         f"        import subprocess\n        subprocess.run(['touch', '{marker}'])\n" + VARIANCE_BODY)


def reads_outside_in_one_tool(folder: Path) -> None:
    """generateDiscrepancyReport reads a host file at run time (the policy allows reads; the guard stops it)."""
    edit(folder, "tools.py", REPORT_RETURN, '        open("/etc/" + "hostname").read()\n' + REPORT_RETURN)
