"""``python -m benchmarks.dialogue [--quick] [--budgets B,...] [--seed N] [--out DIR]``.

Runs scenario 7 alone (the default memory budget and the one at ``CONTEXT_TOKENS=4000``
are always measured), prints the table and, with ``--out``, writes ``results.md`` /
``results.json`` there like ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import Config, commit, machine_info, markdown, write_results
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
    budgets = [int(b) for b in a.budgets.split(",")] if a.budgets else None
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = set(methods) - set(METHODS)
    if unknown:
        p.error(f"unknown methods: {', '.join(sorted(unknown))}; choose from {', '.join(METHODS)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from memory.tokens import ensure_offline_encodings

    ensure_offline_encodings()
    started = time.monotonic()
    machine = machine_info()
    sec = asyncio.run(run(a.quick, budgets, seed=a.seed, methods=methods))
    print(markdown(sec.rows))
    print()
    for note in sec.notes:
        print(f"- {note}")
    for t in sec.targets:
        print(f"target: {t.target} — measured {t.measured} — {'met' if t.met else 'NOT met'}")
    if a.out:
        machine["commit_end"] = commit()
        cfg = Config(out=a.out, quick=a.quick, scenarios=(7,))
        command = "python -m benchmarks.dialogue " + shlex.join(
            sys.argv[1:] if argv is None else list(argv))
        path = write_results(cfg, machine, [sec], command, time.monotonic() - started)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
