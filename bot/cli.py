"""The ``gistbot`` command (also ``python -m bot``).

``run`` starts the adapters whose credentials are configured (none: the console chat);
``console``, ``channels``, ``summary``, ``export``, ``doctor`` and ``discord-invite`` are the
tools around it. Configuration errors print what to fix and exit with status 2; other
failures a person can meet print one line and exit with status 1; nothing prints a stack
trace at a user unless ``LOG_LEVEL=DEBUG``. Output into a closed pipe (``gistbot export |
head``) ends quietly with status 141, as for any Unix filter killed by SIGPIPE. The
platforms are loaded by name from the ``gistbot.platforms`` entry points (``bot.plugins``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, TextIO, TypeAlias

from bot.errors import ConfigError, GistbotError
from bot.extras import ADMIN, Extra, needed, require
from bot.ops.logs import LiveLine, setup_logging
from bot.plugins import Launch, configured_platforms, load_platform
from bot.settings import Settings, load_settings
from bot.settings.env_check import typo_warnings
from bot.stores.digests import DigestSchedule
from bot.wording import plural
from memory.errors import StoreError
from memory.models import ChannelKey
from memory.store import Store

if TYPE_CHECKING:
    from bot.app import Runtime

__all__ = ["channel_spec", "main", "parse_channel", "version"]

log = logging.getLogger("gistbot")
SNOWFLAKE = re.compile(r"[0-9]{17,20}")
SIGPIPE_STATUS = 128 + 13


class UnknownChannel(GistbotError):
    """``--channel`` names a channel the database has no memory of."""


def version() -> str:
    """The installed package's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gistbot")
    except PackageNotFoundError:
        return "0+unknown"


def channel_spec(key: ChannelKey) -> str:
    """How ``--channel`` names ``key``: by its name alone when that reads back as ``key`` (a
    console channel), any other in full."""
    name = key.channel
    if name.strip() and ":" not in name and parse_channel(name) == key:
        return name
    return f"{key.platform}:{key.workspace}:{key.channel}"


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


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _parser() -> argparse.ArgumentParser:
    """The command line: the global options, then the commands, which ``--help`` lists in
    this order: chatting, reading memory, operating."""
    p = argparse.ArgumentParser(
        prog="gistbot",
        description="Chat bot for Discord and Slack with summarizing memory. "
        "Configuration comes from environment variables and .env (see README).",
    )
    p.add_argument("--version", action="version", version=f"gistbot {version()}")
    p.add_argument("--env-file", help="settings file to read (default: .env, if there)")
    # Also after the command (``gistbot doctor --env-file prod.env``): SUPPRESS keeps a
    # subcommand that was not given it from resetting the value given before it.
    env_file = argparse.ArgumentParser(add_help=False)
    env_file.add_argument("--env-file", default=argparse.SUPPRESS,
                          help="settings file to read (default: .env, if there)")
    verbose = argparse.ArgumentParser(add_help=False, parents=[env_file])
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="console chat: show INFO log lines too (default: warnings only)")
    p.add_argument("-v", "--verbose", action="store_true", default=False,
                   help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _chat_commands(sub, verbose)
    _memory_commands(sub, env_file)
    _operating_commands(sub, env_file)
    return p


def _command(sub: _Commands, name: str, parent: argparse.ArgumentParser, about: str
             ) -> argparse.ArgumentParser:
    """One command. Its line of ``gistbot --help`` is also the description of ``gistbot
    NAME --help``, which otherwise shows only the options and never says what it does."""
    return sub.add_parser(name, parents=[parent], help=about,
                          description=f"{about[0].upper()}{about[1:]}.")


def _chat_commands(sub: _Commands, verbose: argparse.ArgumentParser) -> None:
    """``run`` (the configured platforms) and ``console``."""
    _command(sub, "run", verbose, "start the Discord/Slack adapters that are configured (none "
             "configured: the console chat in a terminal; with no terminal, exit 2 naming "
             "the tokens to set)")
    c = _command(sub, "console", verbose, "chat with gistbot in this terminal (or pipe text "
                 "in: one message per line, a message of several lines between two lines of "
                 '""", answers on stdout)')
    c.add_argument("--channel", default="general",
                   help="console channel to talk in (default: general)")
    c.add_argument("--json", action="store_true",
                   help="with stdin not a terminal: answers as JSON Lines "
                   '({"input": …, "output": …}) instead of one bare line each')


def _memory_commands(sub: _Commands, env_file: argparse.ArgumentParser) -> None:
    """``channels``, ``summary`` and ``export``: what the memory holds."""
    _command(sub, "channels", env_file, "list the channels in memory with their counts")
    s = _command(sub, "summary", env_file, "print a channel's summary and counts")
    s.add_argument("--channel", required=True,
                   help="console channel name, or platform:workspace:channel")
    e = _command(sub, "export", env_file, "write a channel's summary, facts, messages and "
                 "settings as JSON Lines")
    e.add_argument("--channel", required=True,
                   help="console channel name, or platform:workspace:channel")
    e.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")


def _operating_commands(sub: _Commands, env_file: argparse.ArgumentParser) -> None:
    """``doctor``, ``migrate``, ``copy-db`` and ``discord-invite``: setting up and moving."""
    _command(sub, "doctor", env_file, "show the configuration (secrets masked) and test the "
             "LLM endpoint and the database; exit 1 when a check fails")
    m = _command(sub, "migrate", env_file, "apply the database schema (DATABASE_URL, or --url)")
    m.add_argument("--url", help="database to migrate instead of DATABASE_URL")
    cp = _command(sub, "copy-db", env_file, "copy all memory between databases (SQLite ⇄ "
                  "PostgreSQL) and verify counts and checksums")
    cp.add_argument("--from", dest="src", required=True, help="source database URL")
    cp.add_argument("--to", dest="dst", required=True, help="target database URL")
    cp.add_argument("--resume", action="store_true",
                    help="continue an interrupted copy from the same source")
    cp.add_argument("--force", action="store_true",
                    help="replace channels in a non-empty target that differ from the source")
    d = _command(sub, "discord-invite", env_file, "print the OAuth2 URL that adds the bot to "
                 "a Discord server")
    d.add_argument("--application-id", required=True,
                   help="from the Developer Portal (General Information → Application ID)")


def _extras(names: Sequence[str]) -> dict[str, Extra]:
    """The optional part each named platform needs, by name (those always installed need
    none)."""
    found = {name: load_platform(name).extra for name in names}
    return {name: extra for name, extra in found.items() if extra is not None}


def _invite_url(application_id: str) -> str:
    invite = load_platform("discord").invite_url
    if invite is None:
        raise ConfigError("the installed Discord platform cannot make an invite URL")
    return invite(application_id)


def _application_id(value: str) -> str:
    value = value.strip()
    if not SNOWFLAKE.fullmatch(value):
        raise ConfigError(
            f"--application-id {value!r} is not a Discord application ID: copy the number "
            "(17 to 20 digits) from the Developer Portal, General Information → Application ID"
        )
    return value


async def _console(settings: Settings, channel: str, live: LiveLine,
                   stop: asyncio.Event | None = None, *, json_lines: bool = False) -> int:
    from bot.app import Runtime
    from bot.ops.shutdown import install_stop_signals

    console = load_platform("console")
    if stop is None:
        stop = asyncio.Event()
        install_stop_signals(stop)
    # The banner says the model is offline; no warning log line in the chat for it.
    async with Runtime.open(settings, warn_offline=False) as rt, _admin(rt):
        _started()
        model = (
            "offline model (set OPENAI_API_KEY or OPENAI_BASE_URL for real answers)"
            if rt.llm.is_offline else rt.llm.name
        )
        where = settings.database.database_url.partition("?")[0].partition("#")[0]
        if "@" in where:  # user:password@host: show the host only
            where = where.split("://", 1)[0] + "://…@" + where.rsplit("@", 1)[1]
        banner = f"gistbot console · channel {channel} · {where} · {model}"
        return await console.serve(Launch(rt.features, settings, rt.storage.history(), stop,
                                          live=live, channel=channel, json_lines=json_lines,
                                          banner=banner))


def _started() -> None:
    """Start-up is done and serving begins: tune the garbage collector as a long-running
    service does (``bot.ops.gc_tuning``)."""
    from bot.ops import gc_tuning

    setting = gc_tuning.tune()
    log.debug("garbage collector: %d start-up objects frozen, thresholds %s",
              setting.frozen, setting.thresholds)


async def _run(settings: Settings, live: LiveLine) -> int:
    from bot.app import Runtime
    from bot.ops.shutdown import install_stop_signals

    stop = asyncio.Event()  # SIGTERM/SIGINT: stop intake, finish replies in flight, exit 0
    install_stop_signals(stop)
    adapters = configured_platforms(settings)
    if not adapters:
        log.info("no DISCORD_TOKEN or Slack tokens configured: starting the console chat")
        return await _console(settings, "general", live, stop)
    platforms = [load_platform(name) for name in adapters]
    async with Runtime.open(settings) as rt, _admin(rt):
        _started()
        launch = Launch(rt.features, settings, rt.storage.history(), stop)
        await asyncio.gather(*(p.serve(launch) for p in platforms))
    if stop.is_set():
        log.info("stopped cleanly")
    return 0


async def _known(store: Store, key: ChannelKey, settings: Settings) -> None:
    """Raise ``UnknownChannel`` unless the store has a row for ``key``."""
    if key not in await store.channels():
        raise UnknownChannel(
            f"no channel {channel_spec(key)!r} in {_where(settings)}; "
            "`gistbot channels` lists the ones in memory"
        )


def _where(settings: Settings) -> str:
    """The database, for messages: the SQLite path, or the PostgreSQL host (no password)."""
    url = settings.database.database_url
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    return url.split("://", 1)[0] + "://" + url.rsplit("@", 1)[-1].split("/", 1)[0]


def _no_database(settings: Settings) -> str | None:
    """"no database at …" when ``DATABASE_URL`` is a SQLite file that does not exist: a
    command that only reads must not create it."""
    path = settings.database.sqlite_path
    if path is not None and not path.exists():
        return f"no database at {path} (DATABASE_URL); it is created when gistbot first runs"
    return None


async def _channels(settings: Settings, out: TextIO) -> int:
    from bot.storage import make_storage

    if (absent := _no_database(settings)) is not None:
        print(absent, file=sys.stderr)
        return 0
    storage = make_storage(settings)
    await storage.open()
    store = storage.memory
    try:
        keys = await store.channels()
        rows = []
        for key in keys:
            stats = await store.stats(key)
            facts = len(await store.list_facts(key, limit=1_000_000))
            rows.append((channel_spec(key), stats.turns, stats.folded, stats.facts, facts))
    finally:
        await storage.close()
    if not rows:
        print(f"No channels in memory yet ({_where(settings)}).", file=sys.stderr)
        return 0
    width = max(len("CHANNEL"), *(len(r[0]) for r in rows))
    out.write(f"{'CHANNEL':<{width}}  MESSAGES  SUMMARIZED  KEPT  LONG-TERM\n")
    for name, turns, folded, kept, facts in rows:
        out.write(f"{name:<{width}}  {turns:>8}  {folded:>10}  {kept:>4}  {facts:>9}\n")
    out.flush()
    print(f"{plural(len(rows), 'channel')} in {_where(settings)}", file=sys.stderr)
    return len(rows)


def _admin(rt: Runtime) -> contextlib.AbstractAsyncContextManager[object]:
    """The admin server when ``ADMIN_PORT`` is set (``bot.admin``), else nothing."""
    if rt.settings.admin.admin_port is None:
        return contextlib.nullcontext()
    require(ADMIN, configured=True)
    from bot.admin.server import admin_server

    return admin_server(rt)


async def _summary(settings: Settings, key: ChannelKey, out: TextIO) -> None:
    from bot.app import Runtime

    if (absent := _no_database(settings)) is not None:
        raise UnknownChannel(absent)
    async with Runtime.open(settings, start_background=False, warn_offline=False) as rt:
        await _known(rt.store, key, settings)
        result = await rt.features.memory_commands.summary(key)
        out.write(result.text + "\n")


async def _export(settings: Settings, key: ChannelKey, out: TextIO) -> int:
    from bot.ops.dbtools import export_rows
    from bot.storage import make_storage

    if (absent := _no_database(settings)) is not None:
        raise UnknownChannel(absent)
    storage = make_storage(settings)
    await storage.open()
    store = storage.memory
    try:
        await _known(store, key, settings)
        state = await store.state(key, facts_limit=1_000_000)
        header = {"type": "channel", **asdict(key), "summary": state.text,
                  "version": state.version, "folded_through": state.folded_through,
                  "last_compacted_at": state.last_compacted_at,
                  "facts": [asdict(f) for f in state.facts],
                  "summary_history": [
                      {k: v for k, v in asdict(h).items() if k != "key"}
                      for h in await store.summary_history_of(key, limit=1_000_000)],
                  "digest_schedule": _schedule_row(
                      await storage.digests.digest_schedule(key))}
        out.write(json.dumps(header, ensure_ascii=False) + "\n")
        count, after = 0, 0
        while batch := await store.turns(key, after_seq=after, limit=1000):
            for t in batch:
                row = {"type": "turn", **{k: v for k, v in asdict(t).items() if k != "key"},
                       "folded": t.seq <= state.folded_through}
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += len(batch)
            after = batch[-1].seq
        for extra in await export_rows(storage, key):  # /config settings, features' rows
            out.write(json.dumps(extra, ensure_ascii=False) + "\n")
        return count
    finally:
        await storage.close()


def _schedule_row(schedule: DigestSchedule | None) -> dict[str, object] | None:
    """The channel's digest schedule for the export header (its key is the header's)."""
    if schedule is None:
        return None
    return {k: v for k, v in asdict(schedule).items() if k != "key"}


async def _copy(src: str, dst: str, *, force: bool, resume: bool) -> None:
    from bot.ops.dbtools import copy_db
    from bot.storage import storage_for_url

    source, target = storage_for_url(src), storage_for_url(dst)
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
    print(f"copied {plural(report.copied_turns, 'message')} in "
          f"{plural(report.channels, 'channel')} ({report.skipped_channels} already there); "
          "counts and checksums verified")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    args = _parser().parse_args(argv)
    command = args.command or "run"
    try:
        args.env_file = _env_file(args.env_file)
        for warning in typo_warnings(args.env_file):  # once, before anything else is said
            print(f"warning: {warning}", file=sys.stderr)
        status = _dispatch(args, command)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except ConfigError as e:
        print(f"gistbot: {e}", file=sys.stderr)
        return 2
    except (GistbotError, StoreError) as e:
        log.debug("the command failed", exc_info=e)
        print(f"gistbot: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`gistbot export | head`): stop quietly, like a Unix filter.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return SIGPIPE_STATUS
    except KeyboardInterrupt:
        return 130


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or replaced by something without a fd
        return False


def _env_file(given: str | None) -> str:
    """``--env-file``, which must exist when given; ``.env`` (read if it is there) when not."""
    if given is None:
        return ".env"
    if not os.path.exists(given) or os.path.isdir(given):  # /dev/null: no settings
        raise ConfigError(f"--env-file {given}: no such file")
    return given


NO_PLATFORM = (
    "no platform configured and no terminal to chat in: set DISCORD_TOKEN for Discord, or "
    "SLACK_BOT_TOKEN with SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP mode) "
    "for Slack, in the environment or .env (`gistbot doctor` checks them); "
    "`gistbot console < FILE` answers a file"
)


def _dispatch(args: argparse.Namespace, command: str) -> int:
    settings = load_settings(env_file=args.env_file)
    # the platforms whose settings are present, asked of each (for the commands that start
    # or check them: loading a platform imports its package)
    configured = configured_platforms(settings) if command in ("run", "doctor") else []
    if command == "run" and not configured and not _isatty(sys.stdin):
        # A container or a service with no tokens would otherwise chat with an empty stdin,
        # exit 0 and be restarted, again and again, without a word.
        raise ConfigError(NO_PLATFORM)
    if command in ("run", "console"):  # every part it will start, before starting any
        platforms = _extras(configured) if command == "run" else {}
        require(*needed(settings, platforms), configured=True)
    chat = (command in ("run", "console") and not configured) or command == "console"
    live = setup_logging(settings.logs.log_level, settings.secrets(), console=chat,
                         verbose=args.verbose, fmt=settings.logs.log_format)
    if command == "run":
        return asyncio.run(_run(settings, live))
    if command == "console":
        return asyncio.run(_console(settings, args.channel, live, json_lines=args.json))
    if command == "channels":
        asyncio.run(_channels(settings, sys.stdout))
    elif command == "summary":
        asyncio.run(_summary(settings, parse_channel(args.channel), sys.stdout))
    elif command == "export":
        key = parse_channel(args.channel)
        if args.output == "-":
            n = asyncio.run(_export(settings, key, sys.stdout))
            sys.stdout.flush()
        else:
            with open(args.output, "w", encoding="utf-8") as fh:
                n = asyncio.run(_export(settings, key, fh))
        print(f"exported {plural(n, 'message')} of {channel_spec(key)}", file=sys.stderr)
    elif command == "doctor":
        from bot.doctor import doctor

        return asyncio.run(doctor(settings, sys.stdout, platforms=_extras(configured)))
    elif command == "migrate":
        from bot.ops.dbtools import migrate
        from bot.storage import storage_for_url

        url = args.url or settings.database.database_url
        n = asyncio.run(migrate(storage_for_url(url)))
        print(f"schema is up to date ({plural(n, 'channel')} stored)")
    elif command == "copy-db":
        asyncio.run(_copy(args.src, args.dst, force=args.force, resume=args.resume))
    elif command == "discord-invite":
        print(_invite_url(_application_id(args.application_id)))
    return 0
