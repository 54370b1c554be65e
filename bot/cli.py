"""The ``gistbot`` command (also ``python -m bot``).

``run`` starts the adapters whose credentials are configured (none: the console chat);
``console``, ``summary``, ``export``, ``doctor`` and ``discord-invite`` are the tools around
it. Configuration errors print what to fix and exit with status 2; nothing prints a stack
trace at a user unless ``LOG_LEVEL=DEBUG``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TextIO, cast

from adapters.claims import DeliveryClaims
from adapters.console_adapter import ConsoleChat
from adapters.discord import invite_url, run_discord
from adapters.slack import run_slack
from bot.errors import ConfigError, GistbotError
from bot.logs import setup_logging
from bot.settings import Settings, load_settings
from memory.catchup_store import DigestSchedule
from memory.errors import StoreError
from memory.models import ChannelKey

__all__ = ["main", "parse_channel"]

log = logging.getLogger("gistbot")


def parse_channel(spec: str) -> ChannelKey:
    """``NAME`` is a console channel; ``platform:workspace:channel`` names any channel."""
    parts = spec.split(":")
    if len(parts) == 3 and all(parts):
        return ChannelKey(*parts)
    if ":" in spec or not spec.strip():
        raise ConfigError(
            f"--channel {spec!r}: use a console channel name, or platform:workspace:channel "
            "(e.g. discord:123456789:987654321 or slack:T0123:C0456)"
        )
    return ChannelKey("console", "local", spec.strip())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gistbot",
        description="Chat bot for Discord and Slack with summarizing memory. "
        "Configuration comes from environment variables and .env (see README).",
    )
    p.add_argument("--env-file", default=".env", help="settings file to read (default: .env)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="start the Discord/Slack adapters that are configured "
                   "(none configured: the console chat)")
    c = sub.add_parser("console", help="chat with gistbot in this terminal (or pipe text in)")
    c.add_argument("--channel", default="general", help="console channel to talk in")
    s = sub.add_parser("summary", help="print a channel's summary and counts")
    s.add_argument("--channel", required=True,
                   help="console channel name, or platform:workspace:channel")
    e = sub.add_parser("export", help="write a channel's turns and summary as JSON Lines")
    e.add_argument("--channel", required=True,
                   help="console channel name, or platform:workspace:channel")
    e.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    sub.add_parser("doctor", help="show the configuration (secrets masked) and test the "
                   "LLM endpoint and the database")
    m = sub.add_parser("migrate", help="apply the database schema (DATABASE_URL, or --url)")
    m.add_argument("--url", help="database to migrate instead of DATABASE_URL")
    cp = sub.add_parser("copy-db", help="copy all memory between databases (SQLite ⇄ PostgreSQL) "
                        "and verify counts and checksums")
    cp.add_argument("--from", dest="src", required=True, help="source database URL")
    cp.add_argument("--to", dest="dst", required=True, help="target database URL")
    cp.add_argument("--resume", action="store_true",
                    help="continue an interrupted copy from the same source")
    cp.add_argument("--force", action="store_true",
                    help="replace channels in a non-empty target that differ from the source")
    d = sub.add_parser("discord-invite", help="print the OAuth2 URL that adds the bot to a server")
    d.add_argument("--application-id", required=True, help="from the Developer Portal")
    return p


async def _console(settings: Settings, channel: str) -> None:
    from bot.app import Runtime

    async with Runtime.open(settings) as rt:
        model = "offline model (no LLM configured)" if rt.llm.is_offline else rt.llm.name
        banner = f"gistbot console · channel {channel} · {settings.database_url} · {model}"
        await ConsoleChat(rt.service, channel=channel).run(banner)


async def _run(settings: Settings) -> None:
    from bot.app import Runtime

    adapters = settings.adapters
    if not adapters:
        log.info("no DISCORD_TOKEN or Slack tokens configured: starting the console chat")
        await _console(settings, "general")
        return
    async with Runtime.open(settings) as rt:
        jobs = []
        if "discord" in adapters:
            jobs.append(run_discord(rt.service, settings))
        if "slack" in adapters:
            # Both stores implement the claims structurally (Store does not declare them).
            claims = cast(DeliveryClaims, rt.store)
            jobs.append(run_slack(rt.service, settings, claims))
        await asyncio.gather(*jobs)


async def _summary(settings: Settings, key: ChannelKey, out: TextIO) -> None:
    from bot.app import Runtime

    async with Runtime.open(settings, start_background=False) as rt:
        result = await rt.service.summary(key)
        out.write(result.text + "\n")


async def _export(settings: Settings, key: ChannelKey, out: TextIO) -> int:
    from bot.app import make_store

    store = make_store(settings)
    await store.open()
    try:
        state = await store.state(key, facts_limit=1_000_000)
        header = {"type": "channel", **asdict(key), "summary": state.text,
                  "version": state.version, "folded_through": state.folded_through,
                  "last_compacted_at": state.last_compacted_at,
                  "facts": [asdict(f) for f in state.facts],
                  "digest_schedule": _schedule_row(await store.digest_schedule(key))}
        out.write(json.dumps(header, ensure_ascii=False) + "\n")
        count, after = 0, 0
        while batch := await store.turns(key, after_seq=after, limit=1000):
            for t in batch:
                row = {"type": "turn", **{k: v for k, v in asdict(t).items() if k != "key"},
                       "folded": t.seq <= state.folded_through}
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += len(batch)
            after = batch[-1].seq
        return count
    finally:
        await store.close()


def _schedule_row(schedule: DigestSchedule | None) -> dict[str, object] | None:
    """The channel's digest schedule for the export header (its key is the header's)."""
    if schedule is None:
        return None
    return {k: v for k, v in asdict(schedule).items() if k != "key"}


async def _copy(src: str, dst: str, *, force: bool, resume: bool) -> None:
    from bot.app import store_for_url
    from bot.dbtools import copy_db

    source, target = store_for_url(src), store_for_url(dst)
    await source.open()
    try:
        await target.open()
        try:
            report = await copy_db(source, target, force=force, resume=resume,
                                   progress=lambda line: print(line, file=sys.stderr))
        finally:
            await target.close()
    finally:
        await source.close()
    print(f"copied {report.copied_turns} turns in {report.channels} channels "
          f"({report.skipped_channels} already there); counts and checksums verified")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = _parser().parse_args(argv)
    command = args.command or "run"
    try:
        settings = load_settings(env_file=args.env_file)
        setup_logging(settings.log_level, settings.secrets())
        if command == "run":
            asyncio.run(_run(settings))
        elif command == "console":
            asyncio.run(_console(settings, args.channel))
        elif command == "summary":
            asyncio.run(_summary(settings, parse_channel(args.channel), sys.stdout))
        elif command == "export":
            key = parse_channel(args.channel)
            if args.output == "-":
                n = asyncio.run(_export(settings, key, sys.stdout))
            else:
                with open(args.output, "w", encoding="utf-8") as fh:
                    n = asyncio.run(_export(settings, key, fh))
            print(f"exported {n} turns of {key}", file=sys.stderr)
        elif command == "doctor":
            from bot.doctor import doctor

            return asyncio.run(doctor(settings, sys.stdout))
        elif command == "migrate":
            from bot.app import store_for_url
            from bot.dbtools import migrate

            url = args.url or settings.database_url
            n = asyncio.run(migrate(store_for_url(url)))
            print(f"schema is up to date ({n} channels stored)")
        elif command == "copy-db":
            asyncio.run(_copy(args.src, args.dst, force=args.force, resume=args.resume))
        elif command == "discord-invite":
            print(invite_url(args.application_id))
    except ConfigError as e:
        print(f"gistbot: {e}", file=sys.stderr)
        return 2
    except (GistbotError, StoreError) as e:
        print(f"gistbot: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
