"""TELLER Stage 1 in ``sopforge eval``: reconstruct the API dependency graph from the business context
and every API signature (distractors included), scored by node and edge precision, recall and F1
against the run's API graph (research/teller.md §5). Stage 2 (execution) is scored from the
SOP-Bench suites' trajectories in the report (the invoked API set, exact final decisions, errors).

Baselines, scored by the same code: ``empty`` (no node, no edge), ``all_tools`` (every API of the
registry, no edge: node recall 1 at the price of precision) and ``registry_chain`` (every API, each
one depending on the one listed before it).
"""

from __future__ import annotations

import re
from typing import Any

from sopforge.context.model import BusinessContext
from sopforge.errors import ResponsePending
from sopforge.evaluation.protocol import EvalContext, EvalItem, ItemResult
from sopforge.families.sop_tools.evaluation.common import environment, first_message, last_tag, prf, request_factory
from sopforge.families.sop_tools.models.api_graph import APIGraph
from sopforge.llm.types import LLMClient

__all__ = ["BASELINES", "SUITE", "gold_graph", "parse_graph", "plan", "run", "score_graph"]

SUITE = "teller_graph"
TEMPLATE = "teller/graph_reconstruction"
BASELINES = ("empty", "all_tools", "registry_chain")
ITEM = "graph"
_EDGE = re.compile(r"^\s*[-*]?\s*`?([A-Za-z_]\w*)`?\s*(?:->|→)\s*`?([A-Za-z_]\w*)`?\s*$")


def gold_graph(ctx: EvalContext) -> tuple[set[str], set[tuple[str, str]]]:
    """(nodes, edges) of the run's API graph; an edge (a, b) means b depends on a.

    Raises:
        LookupError: The run has no API graph artifact.
    """
    content = ctx.stage_content("api_graph")
    if content is None:
        raise LookupError("the run has no api_graph artifact: nothing to score the reconstruction against")
    graph = APIGraph.model_validate(content)
    g = graph.to_networkx()
    return set(g.nodes), set(g.edges)


def plan(ctx: EvalContext) -> list[EvalItem]:
    return [EvalItem(suite=SUITE, agent=agent, item_id=ITEM) for agent in (ctx.options.agent, *BASELINES)]


def parse_graph(text: str) -> tuple[set[str], set[tuple[str, str]]] | None:
    """Nodes and edges from ``<nodes>`` and ``<edges>``; None when a block is missing."""
    nodes_text, edges_text = last_tag(text, "nodes"), last_tag(text, "edges")
    if nodes_text is None or edges_text is None:
        return None
    nodes = {n.strip().strip("`") for n in re.split(r"[,\n]", nodes_text) if n.strip()}
    edges = set()
    for line in edges_text.splitlines():
        match = _EDGE.match(line)
        if match:
            edges.add((match.group(1), match.group(2)))
    return nodes, edges


def score_graph(nodes: set[str], edges: set[tuple[str, str]], gold: tuple[set[str], set[tuple[str, str]]]) -> dict[str, Any]:
    return {"nodes": prf(nodes, gold[0]), "edges": prf(edges, gold[1]), "predicted_nodes": len(nodes),
            "predicted_edges": len(edges), "gold_nodes": len(gold[0]), "gold_edges": len(gold[1])}


def run(item: EvalItem, ctx: EvalContext, llm: LLMClient) -> ItemResult:
    """Reconstruct (or, for a baseline, construct) the graph and score it."""
    try:
        gold = gold_graph(ctx)
    except LookupError as missing:
        return ItemResult(error=str(missing))
    tools = environment(ctx.export_dir).tools()
    names = [t.name for t in tools]
    if item.agent in BASELINES:
        nodes = set() if item.agent == "empty" else set(names)
        edges = set(zip(names, names[1:])) if item.agent == "registry_chain" else set()
        return ItemResult(output={"nodes": sorted(nodes), "edges": sorted(edges)}, score=score_graph(nodes, edges, gold))
    context = ctx.stage_content("context")
    business = BusinessContext.model_validate(context).to_prompt_text() if context else ""
    signatures = "\n\n".join(f"{t.name}\n  description: {t.description}\n  input schema: {t.input_schema}" for t in tools)
    request = request_factory(ctx, item, TEMPLATE)
    first = first_message(ctx, TEMPLATE, business_context=business, api_signatures=signatures)
    try:
        response = llm.complete(request(1, [first], None))
    except ResponsePending:
        raise
    except Exception as error:
        return ItemResult(error=f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")
    parsed = parse_graph(response.text)
    if parsed is None:
        return ItemResult(output={"text": response.text}, score=score_graph(set(), set(), gold),
                          error="unparseable answer: no <nodes> and <edges> blocks")
    nodes, edges = parsed
    return ItemResult(output={"text": response.text, "nodes": sorted(nodes), "edges": sorted(edges)},
                      score=score_graph(nodes, edges, gold))
