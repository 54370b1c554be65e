"""Slack acknowledgement figures (issue 14): ack time under a 2,000-event burst, and the
full SIGKILL run (200 kills during a ~200 events/s burst, re-delivery of what got no 200).

Usage::

    python -m benchmarks.slack_ack                 # burst + 200 kills, HTTP and Socket Mode
    python -m benchmarks.slack_ack --kills 20 --modes http --out /tmp/ack.json

Each figure runs the real adapter in a child process (``tests/slack_crash_child.py``) on a
real SQLite file against the loopback Slack; see ``tests/harness/slack_crash.py``. Prints
one JSON object; writes it to ``--out`` when given (never into the tracked results).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.harness.slack_crash import burst_run, crash_run


async def measure(kills: int, events: int, modes: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for mode in modes:
        socket = mode == "socket"
        bursts = ((f"{mode}_burst_200_per_s", 200.0), (f"{mode}_burst_all_at_once", None))
        for name, rate in bursts if events > 0 else ():  # --events 0: the kills only
            with tempfile.TemporaryDirectory() as tmp:
                began = time.monotonic()
                burst = await burst_run(Path(tmp), events=events, rate=rate, socket_mode=socket)
                took = round(time.monotonic() - began, 1)
            out[name] = {**burst.summary(), "seconds": took}
            print(json.dumps({name: out[name]}), file=sys.stderr)
        if kills:
            with tempfile.TemporaryDirectory() as tmp:
                began = time.monotonic()
                crash = await crash_run(Path(tmp), kills=kills, socket_mode=socket)
                out[f"{mode}_sigkill"] = {
                    **crash.summary(), "seconds": round(time.monotonic() - began, 1)}
            print(json.dumps({f"{mode}_sigkill": out[f"{mode}_sigkill"]}), file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--modes", default="http,socket")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.kills, args.events, args.modes.split(",")))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    lost = 0
    for v in figures.values():
        assert isinstance(v, dict)
        lost += int(v.get("acknowledged_but_lost", 0)) + int(v.get("duplicates", 0))
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
