"""PROBE at the paper's scale: calls, tokens and time per sample, and Table 1 beside the paper's.

Runs every PROBE stage (personas ... assembly and its hardening loop) on the synthetic model of the
unit tests (``tests/unit/families/probe/synthetic.py``: valid, meaningless answers of the asked kind
and length) with the theme's default ``probe:`` options, which are the paper's scale, and prints:

- per sample: documents, tokens and actions beside Table 1 (seeds/004 L102-108);
- LLM calls per stage and per sample, and the approximate input and output tokens they carry
  (``sopforge.tokens``: a regex count, not tiktoken) on a first try, with no re-ask;
- the wall time of the deterministic work (checks, BM25/TF-IDF attacks, the two-sample tests).

The synthetic model answers instantly, so the time is sopforge's own; a real model adds its latency
per call, spread over the concurrent asks. Usage::

    .venv/bin/python benchmarks/probe_scale.py [--personas 1] [--difficulty hard]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "families" / "probe"))

from synthetic import SyntheticProbe, synthetic_chain  # noqa: E402

from sopforge.context.model import BusinessContext  # noqa: E402
from sopforge.families.probe.export.samples import PAPER_TABLE_1  # noqa: E402
from sopforge.families.probe.options import ProbeSpec  # noqa: E402
from sopforge.llm.providers._files import read_response  # noqa: E402
from sopforge.settings import Settings  # noqa: E402
from sopforge.tokens import approx_token_count  # noqa: E402

CONTEXT = ROOT / "examples" / "recordings" / "pharmacy_refills" / "pharmacy_refills__context__main__a1.response.md"


def _describe(values: list[float]) -> str:
    return (f"min {min(values):,.0f}  max {max(values):,.0f}  mean {statistics.fmean(values):,.1f}  "
            f"std {statistics.pstdev(values):,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--personas", type=int, default=1)
    parser.add_argument("--difficulty", choices=("easy", "medium", "hard"), default="hard")
    args = parser.parse_args()
    options = ProbeSpec(personas=args.personas, difficulties=[args.difficulty])
    context = BusinessContext.parse(read_response(CONTEXT)[1], theme="benchmark")
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), provider="scripted")
        started = time.perf_counter()
        out, provider = synthetic_chain(context, options, settings, synthetic=SyntheticProbe(), slug="bench")
        seconds = time.perf_counter() - started
    samples = out["probe_assembly"].samples
    n = len(samples)
    print(f"PROBE at the default (paper) scale: {args.personas} {args.difficulty} persona(s), {n} samples kept, "
          f"{seconds:.1f} s of sopforge's own work")
    print("\nper sample            ours                                                   paper (Table 1)")
    for key, values in (("documents", [len(s.datastore) for s in samples]), ("tokens", [s.tokens for s in samples]),
                        ("actions", [len(s.actions) for s in samples])):
        paper = PAPER_TABLE_1[key]
        print(f"  {key:<10} {_describe(values):<55} mean {paper['mean']:,}  ({paper['min']:,}-{paper['max']:,})")
    calls = Counter(r.call_key.split("/")[1] for r in provider.requests)
    tokens_in = Counter()
    tokens_out = Counter()
    for r in provider.requests:
        stage = r.call_key.split("/")[1]
        tokens_in[stage] += sum(approx_token_count(m.content) for m in r.messages)
    for call_key in {r.call_key for r in provider.requests}:
        stage, item = call_key.split("/")[1:3]
        tokens_out[stage] += approx_token_count(provider._responder.answers.get(item, ""))
    print("\nLLM calls on a first try (no re-ask), and approximate tokens they carry")
    print(f"  {'stage':<22}{'calls':>7}{'per sample':>12}{'input tok':>14}{'output tok':>13}")
    for stage in calls:
        print(f"  {stage:<22}{calls[stage]:>7}{calls[stage] / n:>12.1f}{tokens_in[stage]:>14,}{tokens_out[stage]:>13,}")
    total_in, total_out = sum(tokens_in.values()), sum(tokens_out.values())
    print(f"  {'total':<22}{sum(calls.values()):>7}{sum(calls.values()) / n:>12.1f}{total_in:>14,}{total_out:>13,}")
    rounds = Counter(len(s.rounds) - 1 for s in samples)
    print(f"\nhardening: samples by revision rounds {dict(sorted(rounds.items()))}; dropped "
          f"{len(out['probe_evidence'].samples) - n}")
    print("attacks against random over the kept samples (search: mean F1; action: right-action rate)")
    for row in out["probe_assembly"].attack_table:
        print(f"  {row['attack']:<24}{row['kind']:<8} {row['score']:>6.3f} vs {row['random']:.3f}  "
              f"ratio {row['ratio'] if row['ratio'] is not None else '-'}  set p {row['set_p_value']:.3f}")
    print(f"\nper sample: {sum(calls.values()) / n:.0f} calls, {total_in / n:,.0f} input and {total_out / n:,.0f} output "
          "tokens (input counts every call's whole prompt; a provider's prompt cache serves most of the world model)")


if __name__ == "__main__":
    main()
