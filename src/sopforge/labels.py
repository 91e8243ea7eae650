"""How SOP-Bench-style label cells are read: the tokens pandas and SOP-Bench treat as "no value",
and label normalisation. Shared by the dataset checks and ``sopforge audit`` (which knows no family).
"""

from __future__ import annotations

__all__ = ["NA_TOKENS", "normalize_label"]


# pandas.read_csv's default NA tokens (compared case-insensitively, so 'none' is refused too):
# a label spelled like one of these is read back as a missing value. 'unknown' is added because
# SOP-Bench's matcher treats it as a null-like prediction (sopbench_format.md §3.3).
NA_TOKENS: frozenset[str] = frozenset(t.lower() for t in (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null", "unknown",
))


def normalize_label(label: str) -> str:
    """Normalise a label the way SOP-Bench's matcher compares it (lower-case, ``_``/``-`` → space)."""
    return " ".join(label.lower().replace("_", " ").replace("-", " ").split())
