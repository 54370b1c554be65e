"""Scenario 5: are the planted identifiers still remembered at the end of the conversation?

Offline, with the fake model of scenario 1 (which drops about one identifier in five from
its summaries on purpose), two measures per memory:

* **remembered**: the identifier appears verbatim in what the memory keeps for later
  prompts. gistbot: the rolling summary, the carried facts, the archive (long-term facts
  and episodes) and the unsummarized turns; LangChain: its moving summary and buffer.
* **in the probe's prompt**: after the conversation each memory is asked one probe
  question per planted fact ("Which order is the Brightline escalation about?"); we check
  whether the prompt sent to the model for that question contains the identifier. This is
  what a real model could answer from, whatever the model: for gistbot it exercises the
  summary, the carried facts that fit ``FACTS_TOKENS`` and the archive recall.

A second part (``benchmarks.grouped``, issue 32) asks questions that four identifiers
answer together, at a 2,000-token memory budget: its row and target join this section.

With ``--endpoint URL --model NAME`` the same conversation runs through gistbot and
LangChain's buffer on that real model, each is asked the probe questions, and an answer
scores when it contains the identifier exactly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from benchmarks.common import Config, Section, Target, progress
from benchmarks.conversation import Probe, load_conversation, load_probes, retained
from benchmarks.gistbot_memory import GistbotMemory
from benchmarks.prompt_cost import MemoryRun, ask_probes, drive, open_memories
from memory.identifiers import contains_identifier

__all__ = ["from_runs", "in_probe_prompts", "run_real"]


def in_probe_prompts(run: MemoryRun, probes: Sequence[Probe], *, fresh: bool = False
                     ) -> int | None:
    """How many probe questions were asked with their identifier in the prompt: asked in
    a row on the evolving state, or (``fresh``) one at a time on a fresh copy of it."""
    prompts = run.fresh_probe_prompts if fresh else run.probe_prompts
    if len(prompts) != len(probes):
        return None
    pairs = zip(prompts, probes, strict=True)
    return sum(contains_identifier(text, p.value) for text, p in pairs)


def _row(run: MemoryRun, probes: Sequence[Probe]) -> dict[str, object]:
    kept = retained(run.remembered, list(probes))
    row: dict[str, object] = {
        "memory": run.name,
        "planted": len(probes),
        "remembered": len(kept),
        "fraction remembered": len(kept) / max(len(probes), 1),
        "in summary": None, "in carried facts": None, "in archive": None,
        "in the probe's prompt": in_probe_prompts(run, probes),
        "in the probe's prompt, one at a time": in_probe_prompts(run, probes, fresh=True),
    }
    b = run.breakdown
    if b:
        row |= {"in summary": len(retained(b["summary"], list(probes))),
                "in carried facts": len(retained(b["facts"], list(probes))),
                "in archive": len(retained(b["longterm"] + "\n" + b["episodes"], list(probes)))}
    return row


def from_runs(cfg: Config, runs: Sequence[MemoryRun]) -> Section:
    """Scenario 5 from scenario 1's final memories and probe prompts."""
    probes = load_probes(cfg.turns)
    progress(f"scenario 5: {len(probes)} planted identifiers")
    rows = [_row(r, probes) for r in runs]
    g_row = next(r for r in rows if r["memory"] == "gistbot")
    g_run = next(r for r in runs if r.name == "gistbot")
    frac = float(g_row["fraction remembered"])  # type: ignore[arg-type]
    asked = g_row["in the probe's prompt"]
    lost = [p.value for p in probes if p not in retained(g_run.remembered, probes)]
    unseen = [p.value for p, text in zip(probes, g_run.probe_prompts, strict=False)
              if not contains_identifier(text, p.value)]
    fresh_unseen = [p.value for p, text in zip(probes, g_run.fresh_probe_prompts, strict=False)
                    if not contains_identifier(text, p.value)]
    alone = g_row["in the probe's prompt, one at a time"]
    b = g_run.breakdown
    notes = [
        "remembered = verbatim in what the memory keeps (gistbot: summary, carried facts, "
        "archive of long-term facts and episodes, unsummarized turns; LangChain: summary + "
        "buffer). The columns after it split gistbot's copies (one fact may be in several).",
        "in the probe's prompt = after the conversation, each memory is asked one question "
        "per planted fact; counted when the prompt sent to the model contains the "
        "identifier (what any model could answer from). The questions are asked in a row, "
        "each answered and recorded, so later ones see the earlier ones.",
        "one at a time = issue 13's measure: each question alone on a fresh copy of the "
        "state after the conversation (gistbot: a copy of its SQLite file per question, the "
        "reply's view and prompt built there, offline, no model call; baselines: their "
        "history or buffer plus the question, unchanged).",
        f"gistbot: {b.get('facts_stored', '?')} carried facts stored, "
        f"{b.get('facts_in_prompt', '?')} fit a prompt (FACTS_TOKENS 300).",
        "The fake summarizer drops ~1 in 5 identifiers on purpose and restores ~half when "
        "gistbot asks again; old items leave its bounded summary first.",
    ]
    if lost:
        notes.append(f"gistbot lost: {', '.join(lost)}.")
    if unseen:
        notes.append(f"gistbot's probe prompts lacked: {', '.join(unseen)}.")
    if fresh_unseen:
        notes.append(f"gistbot's one-at-a-time probe prompts lacked: {', '.join(fresh_unseen)}.")
    targets = [Target("retention", "100% of planted identifiers retained (gistbot)",
                      f"{frac:.0%} remembered ({g_row['remembered']}/{len(probes)}); "
                      f"{asked}/{len(probes)} in the probe's prompt", round(frac, 3),
                      frac >= 1.0)]
    if alone is not None:
        n = int(alone)  # type: ignore[call-overload]
        targets.append(Target("probe one at a time", f"planted identifiers in the probe's "
                              f"prompts {len(probes)}/{len(probes)}, asked one at a time on a "
                              "fresh copy (issue 13)", f"{n}/{len(probes)}",
                              round(n / max(len(probes), 1), 3), n == len(probes)))
    return Section("5", "Fact retention", rows, targets, notes)


async def run_real(cfg: Config) -> Section:
    """Scenario 5 against a real model: what is remembered, and exact probe answers."""
    assert cfg.endpoint and cfg.model
    rows_in = load_conversation(cfg.turns)
    probes = load_probes(cfg.turns)
    key = os.environ.get("OPENAI_API_KEY")
    progress(f"scenario 5 (real model {cfg.model} at {cfg.endpoint}): {len(rows_in)} turns, "
             f"{len(probes)} probes")
    rows: list[dict[str, object]] = []
    which = ("gistbot", "LangChain summary buffer")
    async with open_memories(cfg, cfg.endpoint, api_key=key, model=cfg.model,
                             which=which) as mems:
        for mem in mems:
            progress(f"  {mem.name}: replaying the conversation")
            await drive(mem, rows_in, cfg.reply_every)
            run = MemoryRun(mem.name, mem.model)
            if isinstance(mem, GistbotMemory):
                await mem.settle()
                run.breakdown = await mem.breakdown()
            run.remembered = await mem.remembered()
            progress(f"  {mem.name}: asking {len(probes)} probe questions")
            answers = await ask_probes(mem, probes)
            hits = sum(contains_identifier(a, p.value)
                       for a, p in zip(answers, probes, strict=True))
            rows.append(_row(run, probes) | {"probe answers exact": hits,
                                             "probe accuracy": hits / max(len(probes), 1)})
    acc = float(rows[0]["probe accuracy"])  # type: ignore[arg-type]
    targets = [Target("retention (real model)", "100% of probes answered exactly (gistbot)",
                      f"{acc:.0%}", round(acc, 3), acc >= 1.0)]
    notes = [f"Model {cfg.model} at {cfg.endpoint}; exact match = the answer contains the "
             "identifier verbatim. Not run in CI."]
    return Section("5", "Fact retention against a real model", rows, targets, notes)
