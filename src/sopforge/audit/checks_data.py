"""§9 items 1–4 and 7 (leakage by column roles): files, metadata, the test CSV, output labels.

Every function takes the :class:`FolderContents` and returns CheckResults; none runs code.
"""

from __future__ import annotations

import re
from collections import Counter

from sopforge.audit.loader import REQUIRED_FILES, TEST_FILES, FolderContents
from sopforge.audit.values import is_null_like, is_pandas_na, looks_structured, substring_pairs
from sopforge.checks import CheckResult, check

__all__ = ["check_csv", "check_files", "check_metadata", "check_outputs", "hidden_columns", "shown"]

NAME_RE = re.compile(r"^[a-z0-9_]+$")
MAX_LABEL = 100
_LEADING_ZERO = re.compile(r"^[+-]?0\d")
#: metadata.json key (written by sopforge's exporter): shown columns whose empty cell means "no such value",
#: each with its condition, e.g. {"owner_builder_declaration_signed": "applicant_type = owner_builder"}.
CONDITIONAL_KEY = "conditional_columns"


def shown(items, limit: int = 8) -> str:
    """Comma-joined, truncated with a count: 'a, b, c and 5 more'."""
    items = [str(i) for i in items]
    text = ", ".join(items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def hidden_columns(contents: FolderContents) -> list[str]:
    """CSV columns that are neither inputs nor outputs."""
    roles = set(contents.input_columns) | set(contents.output_columns)
    return [h for h in dict.fromkeys(contents.header) if h not in roles]


def check_files(c: FolderContents) -> list[CheckResult]:
    missing = [f for f in REQUIRED_FILES if f not in c.present]
    if not c.csv_name:
        missing.append("test_set_with_outputs.csv")
    out = [check("files.required", not missing,
                 f"missing required file(s): {', '.join(missing)}; the harness skips or cannot load the folder"
                 if missing else "all five required files are present", missing=missing)]
    if "sop.txt" in c.present:
        empty = c.sop_text is None or not c.sop_text.strip()
        out.append(check("files.sop_nonempty", not empty,
                         "sop.txt is empty or unreadable" + (f": {c.sop_error}" if c.sop_error else "")
                         if empty else f"sop.txt has {len(c.sop_text.split())} words"))
    if "data.csv" in c.present:
        out.append(check("files.data_csv_ignored", False, "data.csv is present but the harness never reads it; "
                         "tools must read test_set_with_outputs.csv", severity="warning"))
    if all(n in c.present for n in TEST_FILES):
        out.append(check("files.single_test_csv", False, "both test_set.csv and test_set_with_outputs.csv exist; "
                         "the harness uses test_set.csv", severity="warning"))
    return out


def check_metadata(c: FolderContents) -> list[CheckResult]:
    if "metadata.json" not in c.present:
        return []
    if c.metadata_error or not isinstance(c.metadata, dict):
        return [check("metadata.parses", False, c.metadata_error or "metadata.json must hold a JSON object")]
    md = c.metadata
    out = [check("metadata.parses", True, "metadata.json parses")]
    bad_lists = [k for k in ("input_columns", "output_columns")
                 if not isinstance(md.get(k), list) or not md[k] or not all(isinstance(x, str) for x in md[k])]
    out.append(check("metadata.columns_nonempty", not bad_lists,
                     f"{' and '.join(bad_lists)} must be non-empty lists of column names; otherwise the harness "
                     "shows every column, answers included, to the agent" if bad_lists
                     else "input_columns and output_columns are non-empty", keys=bad_lists))
    both = sorted(set(c.input_columns) & set(c.output_columns))
    out.append(check("metadata.columns_disjoint", not both,
                     f"columns listed as both input and output: {shown(both)}; the answer would be shown to the agent"
                     if both else "input and output columns are disjoint", columns=both))
    if c.header:
        headers = set(c.header)
        absent = [col for col in [*c.input_columns, *c.output_columns] if col not in headers]
        out.append(check("metadata.columns_in_csv", not absent,
                         f"metadata columns that are not CSV headers: {shown(absent)}; a missing output column "
                         "aborts loading" if absent else "every metadata column is a CSV header", columns=absent))
    name = md.get("name")
    if not isinstance(name, str) or not name:
        out.append(check("metadata.name_matches_folder", False, "metadata.json has no 'name'; the folder name "
                         f"{c.path.name!r} becomes the benchmark key", severity="warning"))
    else:
        out.append(check("metadata.name_matches_folder", name == c.path.name,
                         f"metadata name {name!r} differs from the folder name {c.path.name!r}"
                         if name != c.path.name else f"name {name!r} equals the folder name",
                         severity="warning"))
        out.append(check("metadata.name_format", bool(NAME_RE.match(name)),
                         f"name {name!r} should match [a-z0-9_]+ (it becomes part of a module and file names)"
                         if not NAME_RE.match(name) else "name matches [a-z0-9_]+", severity="warning"))
    wrong = []
    if isinstance(md.get("num_tasks"), int) and md["num_tasks"] and c.rows and md["num_tasks"] != len(c.rows):
        wrong.append(f"num_tasks {md['num_tasks']} but the CSV has {len(c.rows)} rows")
    if isinstance(md.get("num_tools"), int) and md["num_tools"] and c.specs and md["num_tools"] != len(c.specs):
        wrong.append(f"num_tools {md['num_tools']} but toolspecs.json has {len(c.specs)} tools")
    if wrong:
        out.append(check("metadata.counts", False, "; ".join(wrong), severity="warning"))
    return out


def check_csv(c: FolderContents) -> list[CheckResult]:
    if not c.csv_name:
        return []
    if c.csv_error or c.frame is None:
        return [check("csv.loads", False, c.csv_error or f"{c.csv_name} could not be read")]
    out = [check("csv.loads", True, f"{c.csv_name} loads with pandas ({len(c.frame)} rows, {len(c.header)} columns)")]
    out.append(check("csv.has_rows", len(c.frame) > 0 and len(c.rows) > 0,
                     f"{c.csv_name} has no data rows" if len(c.frame) == 0 else f"{len(c.frame)} rows"))
    dupes = [h for h, n in Counter(c.header).items() if n > 1]
    out.append(check("csv.headers_unique", not dupes,
                     f"duplicate headers: {shown(dupes)}; pandas renames them (x.1) and the metadata no longer "
                     "names them" if dupes else "headers are unique", headers=dupes))
    ragged = [i for i, row in enumerate(c.rows) if len(row) != len(c.header)]
    if ragged:
        out.append(check("csv.rows_rectangular", False,
                         f"rows whose field count differs from the header: task ids {shown(ragged)}", tasks=ragged))
    if c.rows and c.input_columns:
        unique = [col for col in c.input_columns if col in c.header
                  and len({r[col] for r in c.records}) == len(c.records)]
        out.append(check("csv.row_key", bool(unique),
                         "no input column has a unique value per row; tools need a row key to look records up"
                         if not unique else f"row key candidate(s): {shown(unique)}", severity="warning",
                         columns=unique))
    altered = []
    conditional = _conditional_columns(c)
    for col in dict.fromkeys(c.header):
        cells = [r[col] for r in c.records]
        zeros = [v for v in cells if _LEADING_ZERO.match(v.strip())]
        if zeros and col in c.frame.columns and str(c.frame[col].dtype) in ("int64", "float64"):
            altered.append(f"{col} ({zeros[0]!r} is read as a number)")
        if col in c.input_columns:
            if col in conditional:  # declared: the empty cell is the case's "no such value", a faithful NaN
                na = [i for i, v in enumerate(cells) if is_pandas_na(v) and v != ""]
                if na:
                    altered.append(f"{col} (task ids {shown(na, 5)} hold a value pandas reads as missing, "
                                   f"such as {cells[na[0]]!r}; only an empty cell means no value here)")
                continue
            na = [i for i, v in enumerate(cells) if is_pandas_na(v)]
            if na:
                altered.append(f"{col} (task ids {shown(na, 5)} are missing and reach the agent as 'nan'; "
                               f"if the case has no such value, list the column under metadata.json's "
                               f"{CONDITIONAL_KEY!r} with its condition)")
    out.append(check("csv.values_survive_pandas", not altered,
                     f"cells pandas reads back differently: {'; '.join(altered[:8])}" if altered
                     else "no cell is altered by pandas' type inference", severity="warning", columns=altered))
    return out


def _conditional_columns(c: FolderContents) -> set[str]:
    """Input columns the exporter declared conditional: an empty cell there means the case has no such value."""
    declared = c.metadata.get(CONDITIONAL_KEY) if isinstance(c.metadata, dict) else None
    return {k for k in declared if isinstance(k, str)} if isinstance(declared, dict) else set()


def check_outputs(c: FolderContents) -> list[CheckResult]:
    cols = [col for col in c.output_columns if col in c.header]
    if not cols or not c.rows:
        return []
    na, pairs, structured, long = {}, {}, {}, {}
    for col in cols:
        cells = [r[col] for r in c.records]
        if bad := [i for i, v in enumerate(cells) if is_null_like(v)]:
            na[col] = bad
        if found := substring_pairs([v.strip() for v in cells if not is_null_like(v)]):
            pairs[col] = [f"{a!r} inside {b!r}" for a, b in found]
        if bad := [i for i, v in enumerate(cells) if looks_structured(v)]:
            structured[col] = bad
        if bad := [i for i, v in enumerate(cells) if len(v) > MAX_LABEL]:
            long[col] = bad
    out = [check("outputs.no_na", not na,
                 "output cells that are empty or null-like ('None', 'NA', 'unknown', ...): "
                 + "; ".join(f"{col}: task ids {shown(ids)}" for col, ids in na.items())
                 + ". The harness counts any null-like answer as correct there, so the answer leaks; "
                   "write a real label such as not_applicable" if na else "no output cell is empty or null-like",
                 tasks={k: v for k, v in na.items()})]
    out.append(check("outputs.labels_distinct", not pairs,
                     "labels that contain another label (the matcher accepts one for the other): "
                     + "; ".join(f"{col}: {shown(p, 4)}" for col, p in pairs.items()) if pairs
                     else "no label contains another", severity="warning", pairs=pairs))
    out.append(check("outputs.scalar", not structured,
                     "output cells holding lists/objects: " + "; ".join(f"{col}: task ids {shown(ids)}"
                                                                         for col, ids in structured.items())
                     if structured else "output cells are scalar labels", severity="warning", tasks=structured))
    out.append(check("outputs.label_length", not long,
                     f"labels over {MAX_LABEL} characters (the parser drops plain-text answers that long): "
                     + "; ".join(f"{col}: task ids {shown(ids)}" for col, ids in long.items()) if long
                     else f"labels are under {MAX_LABEL} characters", severity="warning", tasks=long))
    return out
