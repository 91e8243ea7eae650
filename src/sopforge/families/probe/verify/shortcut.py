"""The shortcut gate: PROBE's adversarial artifact filtering (L100, L112), made systematic and deterministic.

The paper let a GPT-5 adversary look for exploitable patterns in a few samples per round until
none could be solved from artifacts alone. Here every sample is measured against baselines that
use no understanding at all, and the whole set is tested for surface differences:

- **lexical retrieval**: BM25 (the maintained ``bm25s`` package) queried with the world model and
  the action descriptions, the information an agent gets before reading anything, returns |T|
  documents; its F1 against the true positives must not exceed ``probe.max_bm25_f1``;
- **other baselines** (reported, not gated): the |T| longest documents, the |T| with most urgency
  words, the |T| naming most people of the world model, and the action sharing most words with the
  datastore; random retrieval's expected F1 is |T|/|D|;
- **two-sample tests** over all unique documents: true positives against distractors and hard
  negatives, by length (Mann-Whitney U), by type (a permutation test of total variation distance)
  and by formatting (lines, paragraphs, bullet lines, digits, capitalised words per 100 tokens).
  A p-value under ``alpha`` divided by the number of tests (Bonferroni) means the two groups are
  separable by that feature alone.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from sopforge.families.probe.models.bottlenecks import Action
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.sets import TwoSampleTest
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.bottleneck_checks import content_words
from sopforge.families.probe.verify.scoring import search_scores

__all__ = ["URGENCY_WORDS", "bm25_ranking", "format_features", "random_f1", "shortcut_baselines", "two_sample_tests"]

URGENCY_WORDS = ("urgent", "asap", "immediately", "deadline", "overdue", "blocked", "blocking", "critical", "escalat",
                 "priority", "delay", "pending", "waiting", "risk", "today", "tomorrow", "eod", "action needed")


def bm25_ranking(query: str, documents: list[Document]) -> list[str]:
    """Document ids from best to worst BM25 match of ``query`` (English stop words removed)."""
    import bm25s  # imported here: only the assembly stage needs it, and the family is imported by every CLI call

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d.text for d in documents], stopwords="en", show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
    if not tokens[0]:
        return [d.id for d in documents]
    order, _scores = retriever.retrieve(tokens, k=len(documents), show_progress=False)
    return [documents[int(i)].id for i in order[0]]


def random_f1(n_true: int, n_docs: int) -> float:
    """Expected F1 of retrieving |T| documents uniformly at random: precision = recall = |T|/|D|."""
    return round(n_true / n_docs, 4) if n_docs else 0.0


def _top(documents: list[Document], key, k: int) -> list[str]:
    return [d.id for d in sorted(documents, key=lambda d: (-key(d), d.id))[:k]]


def _urgency(doc: Document) -> float:
    text = doc.text.lower()
    return sum(text.count(w) for w in URGENCY_WORDS)


def shortcut_baselines(world: WorldModel, actions: list[Action], documents: list[Document], true_ids: list[str],
                       solver_id: str) -> dict[str, float | bool]:
    """Every deterministic baseline's result on one sample (F1 against ``true_ids``)."""
    k = len(true_ids)
    query = world.to_prompt_text() + "\n" + "\n".join(f"{a.id.replace('_', ' ')} {a.description}" for a in actions)
    people = [p.split()[-1].lower() for p in world.people()]
    figures: dict[str, float | bool] = {
        "bm25_f1": search_scores(bm25_ranking(query, documents)[:k], true_ids)["f1"],
        "random_f1": random_f1(k, len(documents)),
        "longest_f1": search_scores(_top(documents, lambda d: d.tokens, k), true_ids)["f1"],
        "urgency_f1": search_scores(_top(documents, _urgency, k), true_ids)["f1"],
        "names_f1": search_scores(_top(documents, lambda d: sum(d.text.lower().count(p) for p in people), k),
                                  true_ids)["f1"],
    }
    store_words = Counter(w for d in documents for w in content_words(d.text))
    overlap = {a.id: sum(store_words[w] for w in content_words(a.description)) for a in actions}
    figures["action_overlap_hit"] = max(sorted(overlap), key=lambda i: overlap[i]) == solver_id
    return figures


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
