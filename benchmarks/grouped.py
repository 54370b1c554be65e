"""Scenario 5, grouped identifiers: questions that several identifiers answer together.

Scenario 5's 36 planted identifiers answer one question each, so it cannot show what issue
32's reporter saw: of FOUR identifiers that answer one question, two did not fit among the
carried facts a prompt shows. Here 40 identifiers answer 10 questions, four each, stated
the way people state them: in one message ("the staging DB is db-stg-4471, replica
db-stg-4472, bucket `nw-falcon-dumps`, ticket OPS-2231"), or in adjacent messages by one
speaker. They are planted into the shipped conversation in memory (``plant``: the turns
at deterministic positions are replaced; the shipped files are not changed, so scenarios
1-6 keep their numbers), the conversation is replayed through gistbot alone at a memory
budget of 2,000 tokens (``CONTEXT_TOKENS`` 2688, as the reporter's run), a reply every
``reply_every``-th turn, and each question is then asked alone on a fresh copy of the end
state (``fresh_probe_prompts``). Scored: the identifiers in their question's prompt (the
target: all 40), and the questions whose prompt holds all four.

A speaker who gives the answers in a run of short messages names the subject once ("The
old furniture goes to storage unit B-214." / "gate code GATE-5521" / ...), and the
question about it names the subject only ("What do we need to get at the old furniture in
storage?"): word search finds the first message, and the others reach the prompt only as
carried identifiers stated with it. The other questions name each thing they ask for.
``python -m benchmarks.grouped [--quick]`` runs this part alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.common import Config, Target, progress
from benchmarks.conversation import Probe, Row, load_conversation, load_probes
from benchmarks.gistbot_memory import GistbotMemory
from benchmarks.prompt_cost import drive, fresh_probe_prompts, memory_budget
from benchmarks.responder import Responder
from memory.identifiers import contains_identifier, extract_identifiers

__all__ = ["CONTEXT_TOKENS", "GROUPS", "Group", "PlantedGroup", "plant", "run", "score"]

CONTEXT_TOKENS = 2688
"""The context that leaves gistbot a memory budget of 2,000 tokens (reply 512, the default
system prompt): the reporter's side-by-side run."""

QUICK_TURNS = 150
"""Turns replayed with ``--quick`` (CI checks that the part runs, not its numbers)."""
SUMMARY_LATENCY = 0.02
"""Seconds the fake takes per summary in this part (at most the run's own latency)."""

_ID = {"Dana": "U01", "Eli": "U02", "Priya": "U03", "Marco": "U04", "Sofia": "U05",
       "Kenji": "U06", "Hana": "U07", "Tom": "U08"}


@dataclass(frozen=True)
class Group:
    """Identifiers that answer one question, as one speaker states them: ``messages`` are
    consecutive turns; ``values`` the identifiers, all four needed for the answer."""

    speaker: str
    topic: str
    messages: tuple[str, ...]
    values: tuple[str, ...]
    question: str


GROUPS: tuple[Group, ...] = (
    Group("Eli", "incident",
          ("For the Falcon migration the staging DB is db-stg-4471, replica db-stg-4472, "
           "bucket `nw-falcon-dumps`, ticket OPS-2231.",),
          ("db-stg-4471", "db-stg-4472", "nw-falcon-dumps", "OPS-2231"),
          "For the Falcon migration, what are the staging DB, its replica, the bucket and "
          "the ticket?"),
    Group("Priya", "release",
          ("Hotfix train: branch `hotfix/2.14.4-cart`, build 48377, QA ticket QA-7719, "
           "changelog at https://wiki.northwind.dev/rel/hotfix-notes please read it.",),
          ("hotfix/2.14.4-cart", "48377", "QA-7719", "https://wiki.northwind.dev/rel/hotfix-notes"),
          "For the hotfix train, what are the branch, the build, the QA ticket and the "
          "changelog link?"),
    Group("Sofia", "customer",
          ("Globex onboarding: their tenant id is TEN-60218 and the contract is CTR-4410.",
           "billing contact is ap@globex.example, and the PO they sent is PO-2025-0107"),
          ("TEN-60218", "CTR-4410", "ap@globex.example", "PO-2025-0107"),
          "What did Sofia give us for the Globex onboarding?"),
    Group("Marco", "office",
          ("The old furniture goes to storage unit B-214.",
           "gate code GATE-5521",
           "access card AC-33018",
           "manager's cell +1-415-555-0199 if the gate is stuck"),
          ("B-214", "GATE-5521", "AC-33018", "+1-415-555-0199"),
          "What do we need to get at the old furniture in storage?"),
    Group("Kenji", "costs",
          ("Savings plan renewal: quote Q-88120. Commitment is $12,400 per month. Account "
           "4471-2290-1183. Finance contact is billing@northwind.dev.",),
          ("Q-88120", "$12,400", "4471-2290-1183", "billing@northwind.dev"),
          "For the savings plan renewal, what are the quote, the monthly commitment, the "
          "account and the finance contact?"),
    Group("Dana", "hiring",
          ("Hiring Lena: requisition REQ-5120, offer letter OFR-2207, start date 2025-02-10.",
           "And her laptop order is IT-88341."),
          ("REQ-5120", "OFR-2207", "2025-02-10", "IT-88341"),
          "Which numbers and dates do we have for hiring Lena?"),
    Group("Tom", "release",
          ("Perf env for the load test: host perf-07, dashboard "
           "https://grafana.northwind.dev/d/perf-77, seed dataset ds-2024-118, run id "
           "RUN-99812.",),
          ("perf-07", "https://grafana.northwind.dev/d/perf-77", "ds-2024-118", "RUN-99812"),
          "For the perf environment of the load test, what are the host, the dashboard, "
          "the seed dataset and the run id?"),
    Group("Hana", "office",
          ("New printer 프린터 for the 3rd floor: model HP-M479, asset AS-20981, IP "
           "10.20.4.17, repair ticket FAC-1402.",),
          ("HP-M479", "AS-20981", "10.20.4.17", "FAC-1402"),
          "For the new 3rd floor printer, what are the model, the asset, the IP and the "
          "repair ticket?"),
    Group("Eli", "incident",
          ("Cert expiry incident is INC-3390.",
           "serial CERT-77120",
           "vendor case VND-55821",
           "bridge +1-212-555-0187, join if you're on call"),
          ("INC-3390", "CERT-77120", "VND-55821", "+1-212-555-0187"),
          "What do I need to follow the cert expiry incident?"),
    Group("Priya", "release",
          ("Mobile app release: Android version code 70300.",
           "iOS build 7.3.0-1184, TestFlight group tf-beta-42, review ticket MOB-6618."),
          ("70300", "7.3.0-1184", "tf-beta-42", "MOB-6618"),
          "Which identifiers do we have for the mobile app release?"),
)


@dataclass(frozen=True)
class PlantedGroup:
    """A group where ``plant`` put it: the turns that state it."""

    group: Group
    turns: tuple[int, ...]

    def probe(self) -> Probe:
        """The question as scenario 5's probe (``value`` is the first identifier only;
        ``score`` checks all of them)."""
        return Probe(self.group.values[0], self.turns[0], self.group.speaker,
                     self.group.question)


def _positions(turns: int, reply_every: int, taken: set[int]) -> list[int]:
    """Where each group starts: spread over the conversation (none in the last 50 turns),
    right after a mention so none of a group's turns mentions the bot, clear of the
    shipped probes' turns."""
    step = max((turns - 100) // len(GROUPS), reply_every)
    out = []
    for k, group in enumerate(GROUPS):
        start = 40 + k * step
        start += (1 - start) % reply_every  # the turn after a mention
        span = len(group.messages)
        while any(t in taken for t in range(start, start + span)):
            start += reply_every
        out.append(start)
        taken |= set(range(start, start + span))
    return out


def plant(rows: Sequence[Row], reply_every: int, taken: set[int] = frozenset()  # type: ignore[assignment]
          ) -> tuple[list[Row], list[PlantedGroup]]:
    """``rows`` with the groups' messages in place of the turns at their positions
    (deterministic), and where each group went."""
    out = list(rows)
    planted = []
    for group, start in zip(GROUPS, _positions(len(rows), reply_every, set(taken)),
                            strict=True):
        stated = [i for text in group.messages for i in extract_identifiers(text)]
        if list(group.values) != stated:
            raise AssertionError(f"{group.values} are not the identifiers of {group.messages}")
        at = tuple(range(start, start + len(group.messages)))
        for i, text in zip(at, group.messages, strict=True):
            old = out[i - 1]
            out[i - 1] = dataclasses.replace(old, author=group.speaker,
                                             author_id=_ID[group.speaker],
                                             topic=group.topic, text=text)
        planted.append(PlantedGroup(group, at))
    return out, planted


def score(prompts: Sequence[str], planted: Sequence[PlantedGroup]
          ) -> tuple[int, int, list[str]]:
    """(questions whose prompt holds all their identifiers, identifiers in their question's
    prompt, the identifiers missing from it)."""
    whole, found, missing = 0, 0, []
    for text, p in zip(prompts, planted, strict=True):
        lacking = [v for v in p.group.values if not contains_identifier(text, v)]
        whole += not lacking
        found += len(p.group.values) - len(lacking)
        missing += lacking
    return whole, found, missing


async def run(cfg: Config, base_url: str, responder: Responder
              ) -> tuple[dict[str, Any], list[Target], list[str]]:
    """Replay the planted conversation through gistbot at a 2,000-token memory budget and
    ask each group's question on a fresh copy: a row, a target and notes for scenario 5."""
    small = dataclasses.replace(cfg, context_tokens=CONTEXT_TOKENS)
    turns = min(cfg.turns, QUICK_TURNS) if cfg.quick else cfg.turns
    rows, planted = plant(load_conversation(turns), cfg.reply_every,
                          {p.turn for p in load_probes(turns)})
    n = sum(len(p.group.values) for p in planted)
    progress(f"scenario 5, grouped: {len(planted)} questions, {n} identifiers, "
             f"memory budget {memory_budget(small)} (CONTEXT_TOKENS {CONTEXT_TOKENS})")
    model = "gpt-4o-bench-grouped"
    # At channel pace (each message after compaction is idle) what is remembered does not
    # depend on how long a summary takes: short summaries keep this part to minutes.
    responder.summary_latency_by_model[model] = min(cfg.summary_latency, SUMMARY_LATENCY)
    async with GistbotMemory.open(small, base_url=base_url, model=model) as mem:
        await drive(mem, rows, cfg.reply_every)
        await mem.settle()
        b = await mem.breakdown()
        remembered = await mem.remembered()
        prompts = await fresh_probe_prompts(mem, [p.probe() for p in planted])
    calls = responder.take(model)
    whole, found, missing = score(prompts, planted)
    kept = sum(contains_identifier(remembered, v) for p in planted for v in p.group.values)
    carried = b["facts"]
    row: dict[str, Any] = {
        "memory": f"gistbot, {len(planted)} questions × 4 identifiers, memory budget "
                  f"{memory_budget(small):,}",
        "planted": n,
        "remembered": kept,
        "fraction remembered": kept / max(n, 1),
        "in summary": sum(contains_identifier(b["summary"], v)
                          for p in planted for v in p.group.values),
        "in carried facts": sum(contains_identifier(carried, v)
                                for p in planted for v in p.group.values),
        "in archive": sum(contains_identifier(b["longterm"] + "\n" + b["episodes"], v)
                          for p in planted for v in p.group.values),
        "in the probe's prompt": None,
        "in the probe's prompt, one at a time": found,
    }
    target = Target("grouped identifiers", f"grouped identifiers in the probe's prompt "
                    f"{n}/{n}: all of a question's identifiers, asked one at a time on a "
                    "fresh copy, memory budget 2,000 (issue 32)",
                    f"{found}/{n}; {whole}/{len(planted)} questions whole",
                    round(found / max(n, 1), 3), found == n)
    where = ", ".join(f"{p.turns[0]}" + (f"-{p.turns[-1]}" if len(p.turns) > 1 else "")
                      for p in planted)
    notes = [
        f"grouped: {len(planted)} questions answered by 4 identifiers each (stated in one "
        "message, or in adjacent messages by one speaker), planted in memory into the "
        f"shipped conversation at turns {where} (benchmarks/grouped.py; the shipped files "
        f"unchanged); gistbot alone at CONTEXT_TOKENS {CONTEXT_TOKENS} (memory budget "
        f"{memory_budget(small):,}), a reply every {cfg.reply_every}th turn "
        f"({sum(c.kind == 'reply' for c in calls)} replies, "
        f"{sum(c.kind == 'summary' for c in calls)} summarizer calls of "
        f"{responder.summary_latency_by_model[model] * 1000:.0f} ms), each question alone "
        f"on a fresh copy; {b['facts_stored']} carried facts stored, "
        f"{b['facts_in_prompt']} fit a prompt.",
    ]
    if missing:
        notes.append(f"grouped: the probe prompts lacked {', '.join(missing)}.")
    return row, [target], notes


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m benchmarks.grouped [--quick] [--summary-latency S]``: this part alone."""
    import argparse
    import asyncio
    import tempfile
    from pathlib import Path

    from benchmarks.responder import fake_server
    from memory.tokens import ensure_offline_encodings

    p = argparse.ArgumentParser(prog="python -m benchmarks.grouped",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="250 turns, short latencies")
    p.add_argument("--summary-latency", type=float, help="fake summary latency, seconds")
    a = p.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="gistbot-grouped-"))
    over = {} if a.summary_latency is None else {"summary_latency": a.summary_latency}
    cfg = Config.quick_config(out, **over) if a.quick else Config(out=out, **over)
    ensure_offline_encodings()

    async def go() -> tuple[dict[str, Any], list[Target], list[str]]:
        async with fake_server(cfg) as (fake, responder):
            return await run(cfg, fake.base_url, responder)

    row, targets, notes = asyncio.run(go())
    for t in targets:
        print(f"{t.target}: {t.measured}")
    print(row)
    print("\n".join(notes))


if __name__ == "__main__":
    main()
