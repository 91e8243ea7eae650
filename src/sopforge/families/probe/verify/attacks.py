"""Shortcut attacks on a sample, each held against its random baseline (PROBE's adversarial filtering, L100, L112).

The paper let a GPT-5 adversary hunt for exploitable artifacts until no sample was solvable from
them alone. Here every sample meets a fixed battery of attacks that read no meaning into the
documents, plus two LLM adversaries (``verify/judges.py``), and each result is compared with what
random guessing achieves on the same sample:

- **search attacks** score the datastore and keep the top |T| (documents tied at the cut are a coin
  toss and count for nothing): BM25 and TF-IDF queried with the
  task statement, the persona (the world model), all actions together, and each action alone (a
  document's best score over the actions); recency (newest first); near-duplicate (documents with
  the most similar other document first: a near-copy hard negative points at its evidence);
  cross-sample (documents least like any document of the persona's other samples first); and the
  longest, most urgent and most name-dropping documents. Random keeps |T| of |D| documents: its
  expected F1 is |T|/|D|, and the chance of ``h`` or more hits is hypergeometric.
- **action attacks** pick one action: the one whose description shares most weight with the
  datastore (BM25). Random picks the solver with probability 1/|A|.

A sample is **solved** by an attack when random guessing would do as well with probability below
``probe.attack_alpha``; for a search attack at |D| = 79 and |T| = 3 that is two hits or more, for
an action attack at 25 actions any right pick. Over the whole set, each attack's hits are tested
the same way against the sum of the samples' random distributions (:func:`set_p_value`), and its
mean F1 is reported beside random's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from sopforge.families.probe.models.bottlenecks import Action
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.sets import AttackResult
from sopforge.families.probe.models.world import WorldModel
from sopforge.families.probe.verify.bottleneck_checks import STOP_WORDS
from sopforge.families.probe.verify.scoring import search_scores

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TASK_STATEMENT", "URGENCY_WORDS", "action_attacks", "bm25_scores", "cosine_similarities", "distinctive_words",
           "search_attacks", "search_result", "set_p_value", "tfidf_scores"]

# The task as the agent is told it (prompts/probe/agent_task.j2 receives this very text): what an
# attacker knows before reading anything.
TASK_STATEMENT = (
    "Somewhere in this person's e-mails, calendar and documents there is one bottleneck: an issue that blocks "
    "their work, that matters to them, and that they can resolve by acting now. Find the documents that are "
    "evidence of it, say what the bottleneck is (who is blocked, who or what is blocking, what task, why, by when), "
    "and choose the one available action that resolves it, with its parameters.")
URGENCY_WORDS = ("urgent", "asap", "immediately", "deadline", "overdue", "blocked", "blocking", "critical", "escalat",
                 "priority", "delay", "pending", "waiting", "risk", "today", "tomorrow", "eod", "action needed")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'-]+")


def bm25_scores(queries: list[str], documents: list[Document]) -> np.ndarray:
    """BM25 score of every document (columns) for every query (rows), English stop words removed."""
    # numpy and bm25s load here, not at the top: only assembly needs them, and the family is loaded by every
    # command that reads a stage (numpy alone is 0.1 s of it); the other functions follow suit.
    import bm25s
    import numpy as np

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d.text for d in documents], stopwords="en", show_progress=False),
                    show_progress=False)
    rows = []
    for tokens in bm25s.tokenize(queries, stopwords="en", show_progress=False, return_ids=False):
        rows.append(retriever.get_scores(tokens) if tokens else np.zeros(len(documents)))
    return np.vstack(rows) if rows else np.zeros((0, len(documents)))


def _tfidf(texts: list[str], vocabulary: dict[str, int] | None = None,
           idf: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
    import numpy as np

    counts = [Counter(t for t in _TOKEN.findall(text.lower()) if len(t) > 2 and t not in STOP_WORDS) for text in texts]
    if vocabulary is None:
        vocabulary = {w: i for i, w in enumerate(sorted({w for c in counts for w in c}))}
        df = np.zeros(len(vocabulary))
        for c in counts:
            for w in c:
                df[vocabulary[w]] += 1
        idf = np.log((1 + len(texts)) / (1 + df)) + 1
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, c in enumerate(counts):
        for w, n in c.items():
            if w in vocabulary:
                matrix[row, vocabulary[w]] = 1 + math.log(n)
    matrix *= idf
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms), vocabulary, idf


def tfidf_scores(queries: list[str], documents: list[Document]) -> np.ndarray:
    """Cosine of TF-IDF vectors (sublinear tf, smoothed idf over the datastore): queries × documents."""
    docs, vocabulary, idf = _tfidf([d.text for d in documents])
    query_matrix, _, _ = _tfidf(queries, vocabulary, idf)
    return query_matrix @ docs.T


def distinctive_words(doc: Document, documents: list[Document], limit: int = 10) -> list[str]:
    """The words that set ``doc`` apart in ``documents`` (highest TF-IDF weight), best first."""
    import numpy as np

    matrix, vocabulary, _ = _tfidf([d.text for d in documents])
    row = matrix[next(i for i, d in enumerate(documents) if d.id == doc.id)]
    words = {i: w for w, i in vocabulary.items()}
    return [words[int(i)] for i in np.argsort(-row)[:limit] if row[int(i)] > 0 and not words[int(i)].isdigit()]


def cosine_similarities(left: list[Document], right: list[Document]) -> np.ndarray:
    """TF-IDF cosine between every document of ``left`` and every one of ``right`` (idf over both)."""
    matrix, _, _ = _tfidf([d.text for d in left + right])
    return matrix[:len(left)] @ matrix[len(left):].T


def search_attacks(world: WorldModel, actions: list[Action], documents: list[Document],
                   siblings: list[Document]) -> dict[str, dict[str, float]]:
    """Attack name -> its score of every document (higher: more likely evidence). ``siblings``: the documents of
    the persona's other samples (cross-sample attack; skipped when there are none)."""
    import numpy as np

    persona = world.to_prompt_text()
    every_action = "\n".join(f"{a.id.replace('_', ' ')} {a.description}" for a in actions)
    queries = [TASK_STATEMENT, persona, every_action] + [f"{a.id.replace('_', ' ')} {a.description}" for a in actions]
    ids = [d.id for d in documents]

    def scored(values) -> dict[str, float]:
        return {i: round(float(v), 9) for i, v in zip(ids, values)}

    attacks: dict[str, dict[str, float]] = {}
    for method, scores in (("bm25", bm25_scores(queries, documents)), ("tfidf", tfidf_scores(queries, documents))):
        for row, name in enumerate(("task", "persona", "actions")):
            attacks[f"{method}_{name}"] = scored(scores[row])
        attacks[f"{method}_per_action"] = scored(scores[3:].max(axis=0) if len(actions) else np.zeros(len(ids)))
    attacks["recency"] = scored(float(d.date.replace("-", "")) for d in documents)
    similar = cosine_similarities(documents, documents)
    np.fill_diagonal(similar, -1)
    attacks["near_duplicate"] = scored(similar.max(axis=1) if len(documents) > 1 else np.zeros(len(ids)))
    if siblings:
        attacks["cross_sample"] = scored(-cosine_similarities(documents, siblings).max(axis=1))
    people = [p.split()[-1].lower() for p in world.people()]
    attacks["longest"] = scored(d.tokens for d in documents)
    attacks["urgency"] = scored(sum(d.text.lower().count(w) for w in URGENCY_WORDS) for d in documents)
    attacks["names"] = scored(sum(d.text.lower().count(p) for p in people) for d in documents)
    return attacks


def action_attacks(actions: list[Action], documents: list[Document]) -> dict[str, tuple[str, str]]:
    """Attack name -> (the action it picks, why): the action whose description the datastore matches most."""
    import numpy as np

    if not actions or not documents:
        return {}
    scores = bm25_scores([f"{a.id.replace('_', ' ')} {a.description}" for a in actions], documents)
    weight = np.sort(scores, axis=1)[:, -3:].sum(axis=1)  # its three best-matching documents
    best = max(range(len(actions)), key=lambda i: (float(weight[i]), actions[i].id))
    return {"action_overlap": (actions[best].id, f"{actions[best].id}'s description matches the datastore most "
                                                 f"(BM25 weight {weight[best]:.1f} over its three best documents)")}


def search_result(name: str, picked: list[str] | dict[str, float], true_ids: list[str], n_docs: int, alpha: float,
                  detail: str = "") -> AttackResult:
    """How an attack's |T| documents compare with |T| documents drawn at random.

    ``picked`` is either the documents an adversary chose, or an attack's score of every document: it then
    keeps the |T| best, and documents tied with the last one kept are a coin toss, not information. Only
    the hits among documents scored strictly above that tie count towards the p-value (an attack that
    scores every document alike never beats chance), while F1 is that of the |T| documents it returns
    (ties broken by id, which is as good as random).
    """
    k = len(true_ids)
    if isinstance(picked, dict):
        order = sorted(picked, key=lambda i: (-picked[i], i))
        chosen = order[:k]
        boundary = picked[chosen[-1]] if chosen else 0.0
        certain = [i for i in chosen if picked[i] > boundary] if len(order) > k and picked[order[k]] == boundary \
            else chosen
    else:
        chosen = certain = list(dict.fromkeys(picked))[:k]
    hits = len(set(chosen) & set(true_ids))
    sure = len(set(certain) & set(true_ids))
    from scipy import stats  # here, not at the top: every CLI command that loads the family would pay for it

    p_value = float(stats.hypergeom.sf(sure - 1, n_docs, k, len(certain))) if sure else 1.0
    return AttackResult(name=name, kind="search", picked=chosen, hits=hits,
                        f1=search_scores(chosen, true_ids)["f1"], random=round(k / n_docs, 4) if n_docs else 0.0,
                        p_value=round(p_value, 6), solved=p_value < alpha, detail=detail)


def set_p_value(results: list[AttackResult], sizes: list[tuple[int, int, int]]) -> float:
    """P(random guessing scores at least these results' total hits over the set).

    Args:
        results: One attack's result per sample.
        sizes: Per sample (|D|, |T|, |A|): the random distribution of its hits (hypergeometric for a search
            attack, Bernoulli(1/|A|) for an action attack), summed by convolution.
    """
    import numpy as np
    from scipy import stats  # lazily, as in search_result

    total = sum(r.hits for r in results)
    if total == 0:
        return 1.0
    distribution = np.array([1.0])
    for result, (n_docs, k, n_actions) in zip(results, sizes):
        if result.kind == "search":
            own = stats.hypergeom.pmf(np.arange(k + 1), n_docs, k, k)
        else:
            own = np.array([1 - 1 / n_actions, 1 / n_actions])
        distribution = np.convolve(distribution, own)
    return float(min(1.0, distribution[total:].sum()))
