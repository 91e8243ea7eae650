"""A scripted fake model for the PROBE prompts: valid, meaningless answers at any scale.

It reads each rendered prompt (and the call key's item) and writes an answer every check accepts:
documents of the asked kind and length with the world's own people and addresses, dated in the
asked window, stating the values they are asked to state; judges that answer by the item's role
(a true positive of sample ``p1-b2`` is evidence of bottleneck 2, everything else of none); an
adversary that guesses at random. Its words are drawn at random from a fixed vocabulary, so the
shortcut attacks meet noise. It tests the pipeline's mechanics (calls, fan-out, funnels, the
hardening loop) and measures its cost at the paper's scale (``benchmarks/probe_scale.py``); it says
nothing about the quality of a real model's answers. Tests override single items to inject failures.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from datetime import date, timedelta

from sopforge.llm.types import LLMRequest

__all__ = ["SyntheticProbe", "synthetic_chain"]

_WORDS = ("schedule review inventory shelf count delivery order invoice batch label counter staff shift training "
          "policy update report meeting agenda notes follow summary budget vendor contract audit quality process "
          "checklist station system portal queue volume week month quarter plan draft figures clinic team store "
          "customer call message reminder supply stock pickup route handover coverage roster overview metric").split()
_FIRST = "Avery Blake Casey Devon Emery Finley Harper Jordan Kendall Logan Morgan Parker Quinn Reese Rowan Sawyer".split()
_LAST = ("Abbott Barlow Castillo Draper Ellison Fairbanks Galloway Hartley Iverson Jennings Kowalski Lindqvist "
         "Mercer Nakamura Okafor Pruitt Quintero Radcliffe Sorensen Thackeray Underwood Vasquez Whitlock Yardley").split()
_KIND = re.compile(r"(?:Item type: |items of type |Write one natural |Enhance the following |Revise the following )"
                   r"(email|calendar|document)\b")
_TYPES = ("delay", "missing_info", "conflict", "approval", "resource", "coordination")


def _rng(key: str) -> random.Random:
    return random.Random(hashlib.sha256(key.encode()).hexdigest())


def _block(prompt: str, tag: str) -> str:
    found = re.findall(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.S)
    return found[0] if found else ""


def _sentences(rng: random.Random, n: int) -> str:
    """``n`` words in sentences of eight to fourteen, with a comma now and then (prose, not a word list)."""
    out, left = [], max(n, 1)
    while left > 0:
        length = min(left, rng.randint(8, 14))
        words = [rng.choice(_WORDS) for _ in range(length)]
        if length > 9:
            words[4] += ","
        out.append(" ".join(words).capitalize() + ".")
        left -= length
    return " ".join(out)


def _own_case(prompt: str) -> str:
    """The case of the bottleneck an evidence prompt (or an evidence revision) is about; "" for other items."""
    if "Item type: " in prompt:
        return re.search(r"BOTTLENECK:\n.*?(CASE-\d+)", prompt, re.S).group(1)
    if "It is evidence of bottleneck" in prompt:
        found = re.search(r"CASE-\d+", _block(prompt, "document"))
        return found.group(0) if found else ""
    return ""


class _World:
    """The parts of a rendered world model the answers need."""

    def __init__(self, text: str):
        self.as_of = date.fromisoformat(re.search(r"As of: (\d{4}-\d{2}-\d{2})", text).group(1))
        persona = re.search(r"Persona: (.+?) \(.*?e-mail (\S+)", text)
        self.persona, self.persona_email = persona.group(1), persona.group(2)
        self.company = re.search(r"Company: (.+?) \(", text).group(1)
        self.people = [(m.group(1), m.group(2)) for m in
                       re.finditer(r"^- (.+?), .*?; ([^;()\s]+@[^;()\s]+)\): ", text, re.M)]


class SyntheticProbe:
    """``respond(request) -> text`` for every PROBE template; ``overrides`` maps an item to a fixed answer."""

    def __init__(self, overrides: dict[str, str | Callable[[str], str]] | None = None, context_answer: str = ""):
        self.overrides = overrides if overrides is not None else {}
        self.context_answer = context_answer
        self.answers: dict[str, str] = {}  # item -> the answer given (the last attempt's)

    def __call__(self, request: LLMRequest) -> str:
        return self.answer(request.messages[0].content, request.call_key)

    def wire(self, body: dict, protocol: str) -> str:
        """The same answers for the fake two-protocol server (``FakeLLMServer(responder=...)``): no call key on
        the wire, so answers are seeded by the prompt, and the business context gets ``context_answer``."""
        first = next(m for m in body["messages"] if m["role"] == "user")["content"]
        prompt = first if isinstance(first, str) else "".join(part.get("text", "") for part in first)
        if "<business_theme>" in prompt and self.context_answer:
            return self.context_answer
        return self.answer(prompt, hashlib.sha256(prompt.encode()).hexdigest())

    def answer(self, prompt: str, key: str) -> str:
        """The answer to ``prompt``; ``key`` (a call key, or the prompt's hash) seeds it and names the item."""
        item = key.split("/")[2] if key.count("/") >= 3 else key
        if item in self.overrides:
            fixed = self.overrides[item]
            answer = fixed(prompt) if callable(fixed) else fixed
        else:
            rng = _rng(key)
            route = next((answer for marker, answer in self._routes() if marker in prompt), None)
            if route is None:
                raise AssertionError(f"the synthetic model does not know the prompt of {key}: {prompt[:120]!r}")
            answer = route(prompt, item, rng)
        self.answers[item] = answer
        return answer

    def documents_of(self, prefix: str) -> list[str]:
        """The text of every document answered for items starting with ``prefix`` (first block of each)."""
        return [re.search(r"<document>\n(.*?)\n</document>", a, re.S).group(1).strip()
                for item, a in self.answers.items() if item.startswith(prefix) and "<document>" in a]

    def _routes(self):
        return (
            ("<personas>", self.personas), ("<org_structure>", self.org), ("<personal_context>", self.personal),
            ("<relationships>\n{\"relationships\"", self.relationships), ('{"bottlenecks": [', self.bottlenecks),
            ('"solves_bottleneck": null}]}', self.actions), ('"also_resolving"', self.solver),
            ("Guess that action WITHOUT", self.persona_adversary), ("Datastore (id | type", self.title_adversary),
            ("<sources>\n{\"sources\"", self.sources), ("<checklist>", self.checklist), ("<evidence_plan>", self.plan), ('"quality_score"', self.review),
            ('"evidence_of"', self.conveys), ("state that bottleneck in two or three sentences", self.reader),
            ("who_blocked", self.identification), ("critical_parameters_met", self.parameters),
            ("<datastore>", self.agent), ("<changed>", self.hard_negative), ("<document>", self.documents),
        )

    # --- the world ---------------------------------------------------------------------------------------------
    def personas(self, prompt: str, item: str, rng: random.Random) -> str:
        roles = prompt.split("The roles that exist in this business:\n", 1)[1].split("\n\nIts sub-businesses:")[0]
        role = next(line for line in roles.splitlines() if line.strip()).strip("-*0123456789. ").split(":")[0]
        role = " ".join(re.sub(r"[*_`]", "", role).split()[:3])
        subs = re.findall(r"^- (.+?): ", prompt.split("Its sub-businesses:\n", 1)[1], re.M)
        n = int(re.search(r"Write (\d+) personas", prompt).group(1))
        people = [{"name": f"{_FIRST[i]} {_LAST[-1 - i]}", "occupation": "Operations lead", "location": "Tacoma, WA",
                   "about": "Leads daily operations and keeps the team's routine work on schedule and documented.",
                   "role": role, "sub_business": subs[i % len(subs)]} for i in range(n)]
        return f"<personas>{json.dumps({'personas': people})}</personas>"

    def org(self, prompt: str, item: str, rng: random.Random) -> str:
        return "<org_structure>" + json.dumps({
            "company_name": "Northwind Services", "company_type": "regional chain", "department": "Operations",
            "team_size": 12, "direct_reports": 4, "reporting_to": "Director of Operations",
            "key_processes": ["Weekly inventory count", "Vendor invoice reconciliation", "Shift roster planning"],
            "typical_meetings": ["Monday huddle", "Vendor review"], "email_domain": "northwind.example.com"}) \
            + "</org_structure>"

    def personal(self, prompt: str, item: str, rng: random.Random) -> str:
        return "<personal_context>" + json.dumps({
            "work_style": "Checklists and short written updates.",
            "current_goals": ["Cut invoice turnaround to two days", "Train two new staff", "Tidy the stock room"],
            "constraints": ["Two people short on weekends"], "communication_preferences": "E-mail first.",
            "tools_used": ["Inventory portal", "Shared calendar"], "peak_productivity_time": "Early morning",
            "biggest_challenges": ["Late vendor paperwork"]}) + "</personal_context>"

    def relationships(self, prompt: str, item: str, rng: random.Random) -> str:
        low = int(re.search(r"Write (\d+)-(\d+)", prompt).group(1))
        domain = re.search(r"e-mail domain: (\S+?)\)?$", prompt, re.M).group(1)
        offset = 3 if "p2" in item else 0
        people = [{"name": f"{_FIRST[(i + offset) % 16]} {_LAST[i + offset]}", "role": "Coordinator",
                   "type": "manager" if i == 0 else "colleague", "interaction": "Works with the persona every week.",
                   "status": "good", "frequency": "weekly", "department": "Operations",
                   "email": f"{_FIRST[(i + offset) % 16].lower()}.{_LAST[i + offset].lower()}@{domain}"}
                  for i in range(low)]
        return f"<relationships>{json.dumps({'relationships': people})}</relationships>"

    # --- bottlenecks and actions ---------------------------------------------------------------------------------
    def bottlenecks(self, prompt: str, item: str, rng: random.Random) -> str:
        world = _World(_block(prompt, "world_model"))
        n = int(re.search(r"You are creating (\d+) highly", prompt).group(1))
        deadline = (world.as_of + timedelta(days=7)).isoformat()
        found = [{"description": f"{world.people[i % len(world.people)][0]} has not returned form CASE-{4100 + i + 1}, "
                                 f"so the weekly batch for {world.persona} cannot close before {deadline}.",
                  "primary_person": world.people[i % len(world.people)][0], "urgency": "high",
                  "type": _TYPES[i % len(_TYPES)]} for i in range(n)]
        return f"<bottlenecks>{json.dumps({'bottlenecks': found})}</bottlenecks>"

    def actions(self, prompt: str, item: str, rng: random.Random) -> str:
        n = int(re.search(r"Write exactly (\d+) actions", prompt).group(1))
        k = len(re.findall(r"^\d+\. ", prompt.split("BOTTLENECKS TO ADDRESS:\n", 1)[1].split("\n\n")[0], re.M))
        found = [{"id": f"routine_step_{i + 1}", "type": "create_task",
                  "description": f"Handle routine work item {i + 1} of the team's weekly cycle.",
                  "constraints": [], "params_schema": {"required": ["owner", "due_date", "reference"]},
                  "solves_bottleneck": i + 1 if i < k else None} for i in range(n)]
        return f"<actions>{json.dumps({'actions': found})}</actions>"

    def solver(self, prompt: str, item: str, rng: random.Random) -> str:
        index = int(re.search(r"CASE-41(\d\d)", _block(prompt, "bottleneck")).group(1))
        return f'<verdict>{{"resolving_action": "routine_step_{index}", "also_resolving": [], "reason": "fits"}}</verdict>'

    def sources(self, prompt: str, item: str, rng: random.Random) -> str:
        systems = [{"system": name, "evidence": "records of the week's work", "access": "search", "relevance": "it"}
                   for name in ("Inventory portal", "Shared drive", "Team chat")]
        return "<sources>" + json.dumps({"sources": systems}) + "</sources>"

    def persona_adversary(self, prompt: str, item: str, rng: random.Random) -> str:
        # The last action: never a solver here (they come first), so tests do not meet chance hits of this attack.
        ids = re.findall(r"^- (\w+) \(", _block(prompt, "actions"), re.M)
        return f'<verdict>{{"action": "{ids[-1]}", "reasoning": "a guess"}}</verdict>'

    def title_adversary(self, prompt: str, item: str, rng: random.Random) -> str:
        docs = re.findall(r"^- (d[0-9a-f]{8}) \|", prompt, re.M)
        actions = re.findall(r"^- (\w+) \(", prompt.split("Actions (id and type only):\n", 1)[1], re.M)
        k = int(re.search(r"Exactly (\d+) of these documents", prompt).group(1))
        return "<verdict>" + json.dumps({"documents": rng.sample(docs, k), "action": rng.choice(actions),
                                          "reasoning": "no pattern helped; a guess"}) + "</verdict>"

    # --- plans ---------------------------------------------------------------------------------------------------
    def checklist(self, prompt: str, item: str, rng: random.Random) -> str:
        solver = re.search(r"The action that resolves it:\n- (\w+) \(", prompt).group(1)
        world = _World(_block(prompt, "world_model"))
        case = re.search(r"CASE-\d+", _block(prompt, "bottleneck")).group(0)
        params = {"owner": world.people[0][0], "due_date": (world.as_of + timedelta(days=7)).isoformat(),
                  "reference": case}
        return "<checklist>" + json.dumps({
            "search_step": {"description": "find it", "specific_queries": [case], "expected_sources": ["email"]},
            "identification_step": {"description": "see it", "key_findings": ["the form is missing"],
                                    "root_cause": "the form was not returned"},
            "task_selection_step": {"action_id": solver, "description": "act", "parameters": params}}) + "</checklist>"

    def plan(self, prompt: str, item: str, rng: random.Random) -> str:
        world = _World(_block(prompt, "world_model"))
        n = int(re.search(r"over (\d+) documents", prompt).group(1))
        values = re.findall(r"^- (.+?) \((?:date|id|amount),", prompt.split("VALUES THE EVIDENCE MUST CARRY", 1)[1], re.M)
        kinds = ["email", "document", "calendar"]
        entries = [{"document_type": kinds[i % 3], "evidence_role": f"aspect {i + 1} of the problem",
                    "key_information": "details " + (" ".join(values) if i == 0 else f"part {i + 1}"),
                    "sender_or_creator": world.people[i % len(world.people)][0], "discoverability": "search"}
                   for i in range(n)]
        return "<evidence_plan>" + json.dumps({"evidence_distribution": entries}) + "</evidence_plan>"

    # --- judges --------------------------------------------------------------------------------------------------
    def review(self, prompt: str, item: str, rng: random.Random) -> str:
        return '<review>{"quality_score": 8, "strengths": ["clear"], "issues": [], "improvements": [], ' \
               '"search_queries": ["form"], "mentions_other_bottlenecks": false}</review>'

    def conveys(self, prompt: str, item: str, rng: random.Random) -> str:
        # Evidence names its bottleneck's case (CASE-4101 for bottleneck 1); nothing else does.
        own = re.search(r"CASE-41(\d\d)", _block(prompt, "item"))
        return f'<verdict>{{"evidence_of": [{int(own.group(1)) if own else ""}], "reason": "by its case"}}</verdict>'

    def reader(self, prompt: str, item: str, rng: random.Random) -> str:
        return "<bottleneck>The form was not returned, so the batch cannot close.</bottleneck>"

    def identification(self, prompt: str, item: str, rng: random.Random) -> str:
        return '<verdict>{"judgment": "CORRECT", "essential_details_analysis": {"who_blocked": "correct", ' \
               '"who_blocker": "correct", "what_task": "correct", "why_root_cause": "correct"}, ' \
               '"non_essential_details_analysis": {"when_deadline": "correct", "where_system": "n/a", ' \
               '"how_mechanism": "n/a", "impact_scope": "n/a"}, "reasoning": "matches"}</verdict>'

    def parameters(self, prompt: str, item: str, rng: random.Random) -> str:
        return '<verdict>{"judgment": "CORRECT", "reasoning": "all there", "parameter_analysis": ' \
               '{"critical_parameters_met": true, "would_resolve_bottleneck": "yes"}, "confidence": 0.9}</verdict>'

    def agent(self, prompt: str, item: str, rng: random.Random) -> str:
        """An evaluated agent that guesses: two documents and an action at random, a vague bottleneck."""
        docs = re.findall(r'<item id="(d[0-9a-f]{8})"', prompt)
        actions = re.findall(r"^- (\w+) \(", _block(prompt, "available_actions"), re.M)
        return "<answer>" + json.dumps({"retrieved_documents": rng.sample(docs, 2), "bottleneck": "Something is late.",
                                        "action": {"function_name": rng.choice(actions),
                                                   "parameters": {"owner": "someone"}}}) + "</answer>"

    # --- documents -----------------------------------------------------------------------------------------------
    def documents(self, prompt: str, item: str, rng: random.Random) -> str:
        kind = _KIND.search(prompt).group(1)
        count = int(m.group(1)) if (m := re.search(r"Write (\d+) realistic workplace items", prompt)) else 1
        return "\n".join(f"<document>\n{self._document(prompt, kind, rng)}\n</document>" for _ in range(count))

    def hard_negative(self, prompt: str, item: str, rng: random.Random) -> str:
        kind = re.search(r"This (email|calendar|document) is real evidence", prompt).group(1)
        details = prompt.split("Manipulation: ", 1)[1]
        swap = re.search(r"goes to (.+?) \(", details)
        period = re.search(r"between (\d{4}-\d{2}-\d{2}) and (\d{4}-\d{2}-\d{2})", details)
        extra = "What if we had chosen the other vendor? It would have changed the schedule." \
            if details.startswith("counterfactual") else ""
        text = self._document(prompt, kind, rng, person=swap.group(1) if swap else None,
                              day=period.group(1) if period and details.startswith("time_shift") else None, extra=extra)
        return f"<document>\n{text}\n</document>\n<changed>\ncontent: the original -> a new one\n</changed>"

    def _document(self, prompt: str, kind: str, rng: random.Random, person: str | None = None,
                  day: str | None = None, extra: str = "") -> str:
        world = _World(_block(prompt, "world_model"))
        low, high = (int(x) for x in re.search(r"(\d+)-(\d+) words", prompt).groups()) if re.search(
            r"(\d+)-(\d+) words", prompt) else (60, int(re.search(r"at most (\d+) words", prompt).group(1)))
        window = re.search(r"between (\d{4}-\d{2}-\d{2}) and (\d{4}-\d{2}-\d{2})", prompt)
        first = date.fromisoformat(window.group(1)) if window else world.as_of - timedelta(days=10)
        last = date.fromisoformat(window.group(2)) if window else world.as_of - timedelta(days=1)
        last = min(last, world.as_of) if kind != "calendar" else last
        when = day or (first + timedelta(days=rng.randint(0, max(0, (last - first).days)))).isoformat()
        values = re.search(r"exactly as written: (.+?)\.(?:\s|$)", prompt)
        # Every item carries one reference line of the same shape, so length and digits tell nothing.
        stated = f" Reference values: {values.group(1)}." if values and values.group(1) != "none" else \
            f" Reference values: {when}, REF-{rng.randint(1000, 9999)}."
        name, email = next(((n, e) for n, e in world.people if n == person), rng.choice(world.people))
        case = _own_case(prompt)
        about = f" This concerns {case}." if case and case not in stated else ""
        body = f"Hello team, {_sentences(rng, (low + high) // 2 - len(stated.split()) - 11)}{stated}{about} {extra} " \
               f"Thanks, {name}"
        title = " ".join(rng.choice(_WORDS) for _ in range(4)).capitalize()
        if kind == "email":
            return (f"From: {name} <{email}>\nTo: {world.persona} <{world.persona_email}>\nCC:\nSubject: {title}\n"
                    f"Date: {when} 09:30\n\n{body}")
        if kind == "calendar":
            return (f"Title: {title}\nDate: {when}\nTime: 10:00-10:30\nDuration: 30 minutes\nLocation: Room 2\n"
                    f"Organizer: {name} <{email}>\nAttendees: {world.persona} (required)\nDescription:\n{body}")
        return f"Title: {title}\nAuthor: {name}\nDate: {when}\nType: report\nRecipients: Operations team\n\n{body}"


def synthetic_chain(context, options, settings, overrides: dict | None = None, until: str = "probe_assembly",
                    synthetic: SyntheticProbe | None = None, slug: str = "pharmacy_refills"):
    """Every PROBE stage up to ``until`` run on the synthetic model (tests/unit/families/probe/synthetic.py), a new
    one with ``overrides`` unless ``synthetic`` is given."""
    from sopforge.families.probe.stages import assembly, bottlenecks, distractors, evidence, hard_negatives, plans
    from sopforge.families.probe.stages import personas as personas_stage
    from sopforge.families.probe.stages import world as world_stage

    from sopforge.llm.gateway import Gateway
    from sopforge.llm.providers.scripted import ScriptedProvider

    provider = ScriptedProvider(synthetic or SyntheticProbe(overrides))
    llm = Gateway(provider, ledger=None, settings=settings, sleep=lambda _s: None)
    common = {"llm": llm, "settings": settings, "model": "m", "temperature": 0}
    out: dict = {}
    difficulties = [options.difficulty_of(i) for i in range(options.personas)]
    as_of = options.reference_date.isoformat()
    steps = [
        ("probe_personas", lambda: personas_stage.run(personas_stage.PersonasInputs(
            theme_slug=slug, context=context, difficulties=difficulties, as_of=as_of), **common)),
        ("probe_world", lambda: world_stage.run(world_stage.WorldInputs(
            theme_slug=slug, context=context, personas=out["probe_personas"], today=as_of), **common)),
        ("probe_bottlenecks", lambda: bottlenecks.run(bottlenecks.BottlenecksInputs(
            theme_slug=slug, worlds=out["probe_world"], options=options), **common)),
        ("probe_plans", lambda: plans.run(plans.PlansInputs(
            theme_slug=slug, worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"], options=options), **common)),
        ("probe_distractors", lambda: distractors.run(distractors.DistractorsInputs(
            theme_slug=slug, worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"], options=options), **common)),
        ("probe_evidence", lambda: evidence.run(evidence.EvidenceInputs(
            theme_slug=slug, worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"], plans=out["probe_plans"],
            options=options), **common)),
        ("probe_hard_negatives", lambda: hard_negatives.run(hard_negatives.HardNegativesInputs(
            theme_slug=slug, worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"],
            evidence=out["probe_evidence"], options=options), **common)),
        ("probe_assembly", lambda: assembly.run(assembly.AssemblyInputs(
            theme_slug=slug, worlds=out["probe_world"], bottlenecks=out["probe_bottlenecks"], plans=out["probe_plans"],
            evidence=out["probe_evidence"], distractors=out["probe_distractors"],
            hard_negatives=out["probe_hard_negatives"], options=options), **common)),
    ]
    for name, step in steps:
        result = step()
        out[name], out[f"{name}:checks"] = result.artifact, result.checks
        if name == until:
            break
    return out, provider
