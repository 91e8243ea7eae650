"""Shortcut attacks against random: each finds the shortcut it is built for, and stays at chance on noise.

The datastores here are hand-built test data: the shortcuts the demo export had (issue 24) are planted
on purpose, and each attack must beat random on them; on documents that differ only by chance it must not.
"""

from __future__ import annotations

import random

import pytest
from scipy import stats

from sopforge.families.probe.models.bottlenecks import Action
from sopforge.families.probe.models.documents import Document, document_id, parse_document
from sopforge.families.probe.verify.attacks import action_attacks, search_attacks, search_result, set_p_value
from conftest import pharmacy_world

WORDS = ("shelf count delivery invoice batch label counter staff shift training policy report agenda notes summary "
         "budget vendor contract audit quality checklist station portal queue volume week plan draft figures store "
         "customer message reminder supply stock pickup route handover coverage roster overview metric").split()


def email(sid: str, body: str, day: str = "2026-02-20", subject: str = "Weekly note", role: str = "distractor") -> Document:
    text = (f"From: Omar Haddad <omar.haddad@cascaderx.com>\nTo: Dana Whitfield <dana.whitfield@cascaderx.com>\n"
            f"Subject: {subject}\nDate: {day} 09:00\n\n{body}")
    parsed = parse_document(text, "email")
    return Document(**parsed.model_dump(), id=document_id(text, sid), role=role, persona_id="p1", sample_id=sid,
                    origin="test")


# A larger vocabulary for noise: ordinary words joined in pairs, so two noise documents share what two unrelated
# e-mails of one office share, not nearly every word.
VOCABULARY = [f"{a}{b}" for a in WORDS for b in WORDS[:8]]


def noise(sid: str, n: int, seed: int, vocabulary: list[str] = VOCABULARY) -> list[Document]:
    rng = random.Random(seed)
    return [email(sid, " ".join(rng.choice(vocabulary) for _ in range(80)), day=f"2026-02-{rng.randint(10, 27):02d}",
                  subject=" ".join(rng.sample(WORDS, 3))) for _ in range(n)]


ACTIONS = [Action(id=f"task_{i}", type="create_task", description=f"Handle the {w} work for the week.",
                  params_schema={"required": ["owner"]}, solves_bottleneck=1 if i == 0 else None)
           for i, w in enumerate(["authorization", "roster", "invoice", "stock"])]


def result(name: str, docs: list[Document], truth: list[Document], siblings: list[Document] = ()):
    rankings = search_attacks(pharmacy_world(), ACTIONS, docs, list(siblings))
    return search_result(name, rankings[name], [d.id for d in truth], len(docs), 0.05)


def test_random_guessing_is_the_yardstick():
    three_of_79 = [search_result("x", ["t1", "a", "b"], ["t1", "t2", "t3"], 79, 0.05),
                   search_result("x", ["t1", "t2", "b"], ["t1", "t2", "t3"], 79, 0.05)]
    assert [r.solved for r in three_of_79] == [False, True], "one hit in 79 is chance (p=0.11), two are not"
    assert three_of_79[0].p_value == pytest.approx(1 - stats.hypergeom.pmf(0, 79, 3, 3), abs=1e-6)
    assert three_of_79[0].random == round(3 / 79, 4) and three_of_79[1].f1 == pytest.approx(0.6667, abs=1e-4)
    both = search_result("x", ["t1", "t2"], ["t1", "t2"], 10, 0.05)
    assert both.solved and both.p_value == pytest.approx(1 / 45, abs=1e-6)


def test_a_set_of_chance_hits_is_chance_and_a_set_of_steady_hits_is_not():
    one_hit = search_result("x", ["t1", "a", "b"], ["t1", "t2", "t3"], 79, 0.05)
    no_hit = search_result("x", ["a", "b", "c"], ["t1", "t2", "t3"], 79, 0.05)
    sizes = [(79, 3, 25)] * 10
    assert set_p_value([one_hit] + [no_hit] * 9, sizes) > 0.5, "1 of 10 samples with a hit: what random does"
    assert set_p_value([one_hit] * 6 + [no_hit] * 4, sizes) < 0.001, "6 of 10: random would almost never"
    assert set_p_value([no_hit] * 10, sizes) == 1.0


def test_bm25_and_tfidf_with_the_actions_find_evidence_written_in_the_solvers_words():
    truth = [email("s", "The prior authorization handle work week is late: authorization form authorization again, "
                        f"please handle the authorization today, item {i}. " * 2, role="true_positive") for i in range(2)]
    docs = noise("s", 18, 1) + truth
    for name in ("bm25_actions", "tfidf_actions", "bm25_per_action", "tfidf_per_action"):
        assert result(name, docs, truth).solved, name
    assert not result("bm25_actions", noise("s", 18, 2) + noise("s", 2, 3), noise("s", 2, 3)).solved


def test_recency_finds_evidence_that_is_the_newest_mail():
    truth = [email("s", " ".join(WORDS[:80]) + f" item {i}", day="2026-03-01", role="true_positive") for i in range(2)]
    docs = noise("s", 18, 4) + truth
    assert result("recency", docs, truth).solved
    spread = [email("s", d.body, day="2026-02-14", role="true_positive") for d in truth]
    assert not result("recency", noise("s", 18, 4) + spread, spread).solved


def test_near_duplicate_finds_evidence_whose_hard_negative_is_a_near_copy():
    """A near-copy hard negative makes the most similar pair half evidence: one hit per sample is chance on its
    own (p=0.19 at 2 of 21), but in every sample of a set it is not."""
    outcomes = []
    for n in range(5):
        rng = random.Random(n)
        truth = [email(f"s{n}", " ".join(rng.sample(VOCABULARY, 60)), role="true_positive") for _ in range(2)]
        copy = email(f"s{n}", truth[0].body.replace(truth[0].body.split()[0], "changed"), role="hard_negative")
        docs = noise(f"s{n}", 18, 20 + n) + truth + [copy]
        outcomes.append(result("near_duplicate", docs, truth))
    assert [o.hits for o in outcomes] == [1] * 5 and not any(o.solved for o in outcomes)
    assert set_p_value(outcomes, [(21, 2, 25)] * 5) < 0.001


def test_cross_sample_finds_the_documents_a_sibling_sample_lacks():
    """The demo shared 7 of 10 documents between two samples of a persona: keeping what the sibling lacks found
    the evidence. Each sample now has its own distractors, half of them in work areas no sibling is given, so the
    evidence is one of many documents unlike the sibling's."""
    shared = noise("s1", 16, 6)
    truth = [email("s1", "Completely separate topic about " + " ".join(random.Random(i).sample(VOCABULARY, 60)),
                   role="true_positive") for i in range(2)]
    sibling = [email("s2", d.body, day=d.date, subject=d.title) for d in shared] + noise("s2", 4, 7)
    assert result("cross_sample", shared + truth, truth, sibling).solved
    half = len(VOCABULARY) // 2
    common, own_areas, their_areas = VOCABULARY[:half // 2], VOCABULARY[half // 2:half], VOCABULARY[half:]
    own = noise("s1", 8, 8, common) + noise("s1", 8, 9, own_areas)
    theirs = noise("s2", 8, 10, common) + noise("s2", 8, 11, their_areas)
    assert not result("cross_sample", own + truth, truth, theirs).solved


def test_the_action_the_datastore_talks_about_most_is_picked():
    docs = noise("s", 10, 10) + [email("s", "roster roster shift roster coverage roster week " * 5)]
    assert action_attacks(ACTIONS, docs)["action_overlap"][0] == "task_1"


def test_an_attack_that_scores_documents_alike_is_a_coin_toss_not_a_shortcut():
    """Ties at the cut are broken by id: the same coin for every attack. Before this, five attacks that scored
    nothing "solved" a synthetic sample at once because the evidence had the lowest ids."""
    flat = {f"d{i}": 0.0 for i in range(10)}
    tied = search_result("x", flat, ["d0", "d1"], 10, 0.05)
    assert tied.hits == 2 and tied.f1 == 1.0 and tied.p_value == 1.0 and not tied.solved
    one_sure = search_result("x", {**flat, "d0": 3.0}, ["d0", "d1"], 10, 0.05)
    assert one_sure.p_value == pytest.approx(float(stats.hypergeom.sf(0, 10, 2, 1)), abs=1e-6)  # 0.2: d1 was a toss
    both_sure = search_result("x", {**flat, "d0": 3.0, "d1": 2.0}, ["d0", "d1"], 10, 0.05)
    assert both_sure.solved and both_sure.p_value == pytest.approx(1 / 45, abs=1e-6)
