"""Approximate LLM token counts, for statistics and budgets every family reports.

**Why a regex.** tiktoken cannot download its vocabularies here, and the papers' tokenizers are
unknown anyway, so tokens are *approximated*: one per run of word characters (``\\w+``) and one
per other non-space character (``[^\\w\\s]``). Digits, punctuation and step numbers such as
``5.3.1`` (5 tokens) count the way BPE vocabularies split them; long rare words are undercounted.
It was not calibrated against a real BPE tokenizer (none is available offline), so
``TOKEN_METHOD`` is stored with every figure and the numbers must be read as approximations,
comparable between our own exports only.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["TOKEN_METHOD", "approx_token_count", "label_distribution"]

TOKEN_METHOD = r"regex \w+|[^\w\s] (approximation; tiktoken unavailable offline)"
_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def approx_token_count(text: str) -> int:
    """Approximate LLM tokens of ``text``: word runs plus non-space symbols (see module docstring)."""
    return sum(1 for _ in _TOKEN_RE.finditer(text))


def label_distribution(labels: list[str]) -> tuple[dict[str, int], float]:
    """Label -> count (most common first, ties by label) and the majority share (always-majority score)."""
    counts = Counter(labels)
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    share = max(counts.values()) / len(labels) if labels else 0.0
    return ordered, round(share, 4)
