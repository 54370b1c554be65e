"""``python -m benchmarks.longmem [--quick] [--budgets 1000,2000,4000] [--out DIR] [--dump F]``.

Runs scenario 6 alone (the default memory budget is always added), prints the table and,
with ``--out``, writes ``results.md`` / ``results.json`` there like ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import run_recall_scenario
from benchmarks.longmem.scenario import DEFAULT_METHODS, METHODS, run


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.longmem",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 conversations, 30 questions")
    p.add_argument("--budgets", help="comma-separated memory budgets (default 1000,2000,4000)")
    p.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                   help=f"comma-separated, of: {', '.join(METHODS)} (gistbot+semantic needs "
                   "pip install -e '.[bench-embed]')")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, help="write results.md and results.json here")
    p.add_argument("--dump", type=Path, help="only write the generated data (JSONL) here")
    a = p.parse_args(argv)
    if a.dump:
        import json

        from benchmarks.longmem.generate import generate, to_json

        with open(a.dump, "w", encoding="utf-8") as f:
            for conv in generate("quick" if a.quick else "full", a.seed):
                f.write(json.dumps(to_json(conv), ensure_ascii=False) + "\n")
        print(f"wrote {a.dump}")
        return
    run_recall_scenario(p, a, 6, METHODS, run, argv)


if __name__ == "__main__":
    main()
