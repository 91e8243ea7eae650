"""Two-sample tests of surface features: are the true positives, as a group, separable from the rest?

The per-sample shortcut attacks live in :mod:`sopforge.families.probe.verify.attacks`. This module
tests the whole set over all unique documents: true positives against distractors and hard
negatives, by length (Mann-Whitney U), by type (a permutation test of total variation distance)
and by formatting (lines, paragraphs, bullet lines, digits, capitalised words and urgency words per
100 tokens). A p-value under ``alpha`` divided by the number of tests (Bonferroni) means the two
groups are separable by that feature alone; the assembly stage reports it as a warning.
"""

from __future__ import annotations

import re

from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.sets import TwoSampleTest
from sopforge.families.probe.verify.attacks import URGENCY_WORDS

__all__ = ["format_features", "two_sample_tests"]


def _urgency(doc: Document) -> float:
    text = doc.text.lower()
    return sum(text.count(w) for w in URGENCY_WORDS)


def format_features(doc: Document) -> dict[str, float]:
    """Surface features an agent could separate documents by without reading them."""
    lines = [line for line in doc.text.splitlines() if line.strip()]
    per = 100 / max(doc.tokens, 1)
    return {
        "tokens": float(doc.tokens),
        "lines_per_100_tokens": len(lines) * per,
        "paragraphs_per_100_tokens": len(re.split(r"\n\s*\n", doc.text.strip())) * per,
        "bullet_lines_per_100_tokens": sum(1 for line in lines if re.match(r"\s*([-*•]|\d+[.)])\s", line)) * per,
        "digits_per_100_tokens": len(re.findall(r"\d", doc.text)) * per,
        "capitalised_words_per_100_tokens": len(re.findall(r"\b[A-Z][a-z]+", doc.text)) * per,
        "urgency_words_per_100_tokens": _urgency(doc) * per,
    }


def _type_distance(a: list[str], b: list[str]) -> float:
    kinds = sorted(set(a) | set(b))
    return 0.5 * sum(abs(a.count(k) / len(a) - b.count(k) / len(b)) for k in kinds)


def two_sample_tests(true_positives: list[Document], others: list[Document], *, alpha: float,
                     seed: int = 0) -> list[TwoSampleTest]:
    """True positives against distractors and hard negatives, one test per surface feature.

    Args:
        true_positives, others: unique documents of each group (at least two each).
        alpha: family-wise level; each test is held to ``alpha / number of tests``.
        seed: seed of the type test's permutations.
    """
    if len(true_positives) < 2 or len(others) < 2:
        return []
    import numpy as np
    from scipy import stats  # here, not at the top: every CLI command that loads the family would pay ~1 s

    features = list(format_features(true_positives[0]))
    level = alpha / (len(features) + 1)
    tests = []
    for feature in features:
        tp = np.array([format_features(d)[feature] for d in true_positives])
        ot = np.array([format_features(d)[feature] for d in others])
        result = stats.mannwhitneyu(tp, ot, alternative="two-sided")
        tests.append(TwoSampleTest(feature=feature, statistic=float(result.statistic), p_value=float(result.pvalue),
                                   separable=bool(result.pvalue < level), true_positives=float(tp.mean()),
                                   distractors=float(ot.mean())))
    kinds_tp, kinds_ot = [d.kind for d in true_positives], [d.kind for d in others]
    codes = {k: i for i, k in enumerate(sorted(set(kinds_tp) | set(kinds_ot)))}
    labels = [codes[k] for k in kinds_tp + kinds_ot]
    observed = _type_distance(kinds_tp, kinds_ot)
    rng = np.random.default_rng(seed)
    n = len(kinds_tp)
    inverse = {i: k for k, i in codes.items()}
    extreme = 0
    rounds = 2000
    for _ in range(rounds):
        perm = rng.permutation(labels)
        if _type_distance([inverse[i] for i in perm[:n]], [inverse[i] for i in perm[n:]]) >= observed - 1e-12:
            extreme += 1
    p_value = (extreme + 1) / (rounds + 1)
    tests.append(TwoSampleTest(feature="document_type", statistic=observed, p_value=p_value,
                               separable=bool(p_value < level),
                               true_positives=kinds_tp.count("email") / n,
                               distractors=kinds_ot.count("email") / len(kinds_ot)))
    return tests
