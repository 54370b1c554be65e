"""``python -m benchmarks.dialogue [--quick] [--budgets B,...] [--seed N] [--out DIR]``.

Runs scenario 7 alone (the default memory budget and the one at ``CONTEXT_TOKENS=4000``
are always measured), prints the table and, with ``--out``, writes ``results.md`` /
``results.json`` there like ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import run_recall_scenario
from benchmarks.dialogue.scenario import METHODS, run


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.dialogue",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 small conversation, 12 questions")
    p.add_argument("--budgets", help="comma-separated extra memory budgets")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"comma-separated, of: {', '.join(METHODS)}")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, help="write results.md and results.json here")
    a = p.parse_args(argv)
    run_recall_scenario(p, a, 7, METHODS, run, argv)


if __name__ == "__main__":
    main()
