"""How long are the answers of each stage, against the completion budget each stage asks for?

Reads exchange or replay folders (default: every folder under examples/recordings/) and prints, per
stage, the number of answers, the longest answer in characters and in approximate tokens (four
characters each), the stage's budget (sopforge.llm.output_limits.STAGE_TOKENS) and the ratio of the
longest answer to the budget. A ratio above 1.0 means a real model at that budget is cut off and
continued (sopforge.ask.complete_whole); the budgets are set so an ordinary answer fits in one call.

    .venv/bin/python benchmarks/answer_sizes.py [FOLDER ...]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from sopforge.llm.output_limits import DEFAULT_STAGE_TOKENS, STAGE_TOKENS
from sopforge.llm.providers._files import RESPONSE_SUFFIX, read_response

ROOT = Path(__file__).resolve().parents[1]


def stage_of(path: Path) -> str:
    """The stage field of a call key file name: ``<slug>__<stage>__<item>__a1.response.md``."""
    parts = path.name[: -len(RESPONSE_SUFFIX)].split("__")
    return parts[1] if len(parts) > 2 else "?"


def main(folders: list[Path]) -> None:
    sizes: dict[str, list[int]] = defaultdict(list)
    for folder in folders:
        for path in folder.glob(f"*{RESPONSE_SUFFIX}"):
            sizes[stage_of(path)].append(len(read_response(path)[1]))
    print(f"{'stage':<20} {'answers':>7} {'longest chars':>13} {'~tokens':>8} {'budget':>7} {'longest/budget':>14}")
    for stage in sorted(sizes, key=lambda s: -max(sizes[s])):
        longest = max(sizes[stage])
        budget = STAGE_TOKENS.get(stage, DEFAULT_STAGE_TOKENS)
        print(f"{stage:<20} {len(sizes[stage]):>7} {longest:>13,} {longest // 4:>8,} {budget:>7,} "
              f"{longest / 4 / budget:>14.2f}")


if __name__ == "__main__":
    given = [Path(a) for a in sys.argv[1:]]
    main(given or sorted(p for p in (ROOT / "examples" / "recordings").iterdir() if p.is_dir()))
