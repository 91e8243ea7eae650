"""The artifacts of the PROBE stages after the action space: plans, document sets, samples, the export.

Each set carries its funnel (``sopforge.funnel``) and the drops with their reasons, like the
sop_tools hardening stages, so every verification a document passed or failed is counted.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from sopforge.families.probe.models.bottlenecks import Action, Bottleneck
from sopforge.families.probe.models.documents import Document
from sopforge.families.probe.models.verdicts import ConveysVerdict, EvidenceReview, IdentificationVerdict
from sopforge.families.probe.models.world import WorldModel
from sopforge.funnel import DroppedItem, FunnelRow

__all__ = ["AttackResult", "Checklist", "DocumentSet", "EvidencePlanEntry", "EvidenceSet", "HardeningRound", "PlanSet",
           "ProbeManifest", "Sample", "SampleSet", "SamplePlan", "Sufficiency", "TwoSampleTest"]


class SearchStep(BaseModel):
    description: str
    specific_queries: list[str] = Field(min_length=1)
    expected_sources: list[str] = Field(min_length=1)


class IdentificationStep(BaseModel):
    description: str
    key_findings: list[str] = Field(min_length=1)
    root_cause: str = Field(min_length=5)


class TaskSelectionStep(BaseModel):
    action_id: str = Field(description="The chosen action's id (T7 says action_type; ours names the action).")
    description: str
    parameters: dict[str, Any] = Field(description="One value per required parameter of the action: the expected "
                                                   "parameters T25 compares an agent's with.")


class Checklist(BaseModel):
    """T7's three-step checklist (L1134-1225)."""

    search_step: SearchStep
    identification_step: IdentificationStep
    task_selection_step: TaskSelectionStep


class EvidencePlanEntry(BaseModel):
    """One entry of T8's evidence_distribution (L1249-1310)."""

    document_type: str = Field(pattern=r"^(email|calendar|document)$")
    evidence_role: str = Field(min_length=5)
    key_information: str = Field(min_length=5)
    sender_or_creator: str = Field(min_length=3)
    discoverability: str = Field(min_length=3)
    source_system: str = Field("", description="For a document: the T12 system it is a record exported from, if any.")


class EvidencePlan(BaseModel):
    evidence_distribution: list[EvidencePlanEntry] = Field(min_length=1)


class SamplePlan(BaseModel):
    sample_id: str
    persona_id: str
    bottleneck_index: int
    checklist: Checklist
    plan: list[EvidencePlanEntry]


class PlanSet(BaseModel):
    """The probe_plans artifact: a checklist and an evidence plan per sample."""

    samples: list[SamplePlan]

    def of(self, sample_id: str) -> SamplePlan:
        return next(s for s in self.samples if s.sample_id == sample_id)


class JudgedDocument(BaseModel):
    document: Document
    conveys: ConveysVerdict | None = None
    review: EvidenceReview | None = None


class Sufficiency(BaseModel):
    """A reader who sees only the true positives restates the bottleneck; T24 judges the restatement."""

    reader_bottleneck: str
    verdict: IdentificationVerdict
    score: float


class DocumentSet(BaseModel):
    """Documents kept by a stage (distractors, hard negatives), with their verdicts and funnel."""

    documents: list[JudgedDocument] = Field(default_factory=list)
    funnel: list[FunnelRow] = Field(default_factory=list)
    drops: list[DroppedItem] = Field(default_factory=list)

    def kept(self, *, persona_id: str | None = None, sample_id: str | None = None) -> list[Document]:
        return [j.document for j in self.documents
                if (persona_id is None or j.document.persona_id == persona_id)
                and (sample_id is None or j.document.sample_id == sample_id)]


class EvidenceSet(DocumentSet):
    """The probe_evidence artifact: true positives, each reviewed and judged; sufficiency per sample."""

    sufficiency: dict[str, Sufficiency] = Field(default_factory=dict)
    samples: list[str] = Field(default_factory=list, description="Samples whose evidence is complete and sufficient.")


class TwoSampleTest(BaseModel):
    feature: str
    statistic: float
    p_value: float
    separable: bool
    true_positives: float = Field(description="Mean of the feature over true positives (share for types).")
    distractors: float = Field(description="Mean of the feature over distractors and hard negatives.")


class AttackResult(BaseModel):
    """One shortcut attack on one sample, beside random guessing (verify/attacks.py)."""

    name: str = Field(description="bm25_task, tfidf_per_action, recency, near_duplicate, cross_sample, "
                                  "title_adversary, persona_adversary, action_overlap...")
    kind: Literal["search", "action"] = Field(description="search: it returns |T| documents; action: one action.")
    picked: list[str] = Field(description="Document ids it returned (search) or the action it chose (action).")
    hits: int = Field(description="True positives among the picked documents, or 1 when the action is the solver.")
    f1: float | None = Field(None, description="Search F1 of the picked documents (search attacks).")
    random: float = Field(description="Random guessing's expected search F1 (|T|/|D|) or chance of the right "
                                      "action (1/|A|).")
    p_value: float = Field(description="Probability that random guessing does at least as well on this sample.")
    solved: bool = Field(description="p_value below probe.attack_alpha: the attack beats chance on this sample.")
    set_level: bool = Field(False, description="The attack beats chance over the whole set and scored on this sample, "
                                               "so the sample is revised too.")
    detail: str = Field("", description="Why it picked what it did (an adversary's reasoning, the matched words).")


class HardeningRound(BaseModel):
    """One round of a sample in the hardening loop: what solved it and what was revised."""

    round: int = Field(description="0 for the first assembly, then 1, 2, ... after each revision.")
    solved_by: list[str] = Field(default_factory=list, description="Attacks that solved the sample in this round.")
    revised: list[str] = Field(default_factory=list, description="What the revision after this round changed.")


class Sample(BaseModel):
    """One PROBE instance S = (T, K, A, P, b) (L44-52) with what the agent sees and the ground truth."""

    sample_id: str
    persona_id: str
    difficulty: str
    world_model: WorldModel
    actions: list[Action] = Field(description="Every action of the persona (solvers of its other bottlenecks stay "
                                              "as plausible distractor actions).")
    datastore: list[str] = Field(description="Document ids in the order the agent receives them.")
    bottleneck: Bottleneck
    solver_id: str
    expected_parameters: dict[str, Any]
    checklist: Checklist
    true_positives: list[str]
    hard_negatives: list[str]
    tokens: int
    attacks: list[AttackResult] = Field(description="Every shortcut attack on the final datastore.")
    rounds: list[HardeningRound] = Field(default_factory=list, description="The hardening loop's history.")


class SampleSet(BaseModel):
    """The probe_assembly artifact: the datastores and the shortcut gate's figures."""

    samples: list[Sample]
    documents: dict[str, Document] = Field(description="Every document any datastore holds, by id.")
    attack_table: list[dict[str, Any]] = Field(default_factory=list, description="Per attack over the kept samples: "
                                                                                "mean F1 or hit rate beside random's, "
                                                                                "their ratio and the set's p-value.")
    two_sample_tests: list[TwoSampleTest] = Field(default_factory=list)
    funnel: list[FunnelRow] = Field(default_factory=list)
    drops: list[DroppedItem] = Field(default_factory=list)


class ProbeManifest(BaseModel):
    """The probe_package artifact: where the export went and the Table 1 statistics."""

    export_dir: str
    sample_files: list[str]
    samples_jsonl: str
    samples_parquet: str
    metadata_json: str
    stats: dict[str, Any]
