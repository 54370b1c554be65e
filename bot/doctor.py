"""``gistbot doctor``: whether this configuration works, then what it is.

The verdict comes first, then one line per check — failing ones first, each with its fix —
then what would start and the configuration. Checks: the optional parts the configuration
asks for are installed (``bot.extras``, the check ``gistbot run`` makes before starting),
the database answers (a SQLite file that does not exist yet is not created: its folder must
be writable), and the LLM endpoint serves the configured models.

Secrets are masked: tokens and keys show their first 3 and last 2 characters at most, URLs
their user name and host but no password, in the user info or in a query parameter
(``bot.settings.redact``). Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

from pydantic import SecretStr

from bot.app import make_llm
from bot.channels.config import Defaults
from bot.errors import ModelNotServed
from bot.extras import POSTGRES, Extra, describe, missing, needed
from bot.llm.client import UsageMeter
from bot.llm.providers import ProviderRouter
from bot.ops.logs import scrub
from bot.plugins import configured_platforms
from bot.settings import Settings
from bot.settings.redact import mask_url
from bot.storage import make_storage
from bot.wording import plural
from memory.tokens import TokenCounter

__all__ = ["doctor", "mask"]

# The advice to run this very command, which error messages give everywhere else.
_RUN_DOCTOR = re.compile(r";? *`gistbot doctor` tests [^;.]*")


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report: ``name``, whether it passed, and what was found (with the
    fix, when it failed)."""

    name: str
    ok: bool
    text: str

    def line(self) -> str:
        return f"  {self.name:<10} {'ok' if self.ok else 'FAILED'}: {self.text}\n"


def mask(secret: str) -> str:
    """Enough of a secret to recognise it, never enough to use it."""
    if len(secret) < 12:
        return "***"
    return f"{secret[:3]}…{secret[-2:]}"


def _key(secret: SecretStr | None) -> str:
    return mask(secret.get_secret_value()) if secret is not None else "(none)"


def _describe(settings: Settings) -> list[tuple[str, str]]:
    rows = []
    for name, value in settings.flat().items():
        if isinstance(value, SecretStr):
            shown = mask(value.get_secret_value())
        elif name == "SYSTEM_PROMPT":
            shown = (value[:60] + "…") if len(value) > 60 else value
        elif name == "PROVIDERS" and value:  # keys masked, URLs without their secrets
            shown = "; ".join(f"{n}: {mask_url(p.base_url)} key {_key(p.api_key)} models "
                              f"{','.join(p.models)}" for n, p in value.items())
        elif isinstance(value, str) and "://" in value:
            shown = mask_url(value)  # a password in the user info or the query string
        else:
            shown = "(not set)" if value is None or value == [] else str(value)
        rows.append((name, shown))
    return rows


def _installed(settings: Settings, platforms: Mapping[str, Extra]) -> tuple[Check, bool]:
    """The optional parts check, and whether PostgreSQL support is there to test."""
    wanted = needed(settings, platforms)
    absent = missing(wanted)
    if absent:
        return Check("install", False, describe(absent)), all(a.extra != POSTGRES for a in absent)
    names = ", ".join(e.name for e in wanted) or "nothing optional needed"
    return Check("install", True, names), True


async def _database(settings: Settings) -> Check:
    path = settings.database.sqlite_path
    if path is not None and not path.exists():
        folder = path.parent if str(path.parent) else path.cwd()
        if os.access(folder if folder.exists() else folder.parent, os.W_OK):
            return Check("database", True, f"no database yet at {path}; the first run creates it")
        return Check("database", False, f"cannot create {path}: its folder is missing or not "
                     "writable; create it or point DATABASE_URL elsewhere")
    storage = make_storage(settings)
    try:
        await storage.open()
        channels = await storage.memory.channels()
        return Check("database", True, f"{plural(len(channels), 'channel')} stored")
    except Exception as e:
        text = scrub(str(e), settings.secrets())
        return Check("database", False, text if "DATABASE_URL" in text
                     else f"{text}; check DATABASE_URL")
    finally:
        await storage.close()


async def _llm(settings: Settings) -> list[Check]:
    """One check per model endpoint: the default one, and each of ``PROVIDERS``."""
    llm = make_llm(settings, TokenCounter(settings.llm.model_name), UsageMeter())
    try:
        if isinstance(llm, ProviderRouter):
            return [await _probe(settings, f"llm {name}", functools.partial(
                llm.probe_endpoint, name)) for name in llm.endpoints]
        return [await _probe(settings, "llm", llm.probe)]  # type: ignore[attr-defined]
    finally:
        await llm.aclose()  # type: ignore[attr-defined]


async def _probe(settings: Settings, name: str, probe: Callable[[], Awaitable[str]]) -> Check:
    try:
        return Check(name, True, await probe())
    except ModelNotServed as e:
        return Check(name, False, scrub(str(e), settings.secrets()))
    except Exception as e:
        # Endpoints quote the rejected key in their 401 body; never print it.
        text = _RUN_DOCTOR.sub("", scrub(str(e), settings.secrets()))
        return Check(name, False, f"{type(e).__name__}: {text}")


async def doctor(settings: Settings, out: TextIO,
                 platforms: Mapping[str, Extra] | None = None) -> int:
    """Run the checks, print the report; return the exit status. ``platforms``: the
    adapters ``gistbot run`` would start, by name (the CLI's table)."""
    installed, database_testable = _installed(settings, platforms or {})
    checks = [installed]
    if database_testable:
        checks.append(await _database(settings))
    checks += await _llm(settings)
    failed = [c for c in checks if not c.ok]
    verdict = "All checks passed." if not failed else f"{plural(len(failed), 'check')} failed:"
    out.write(f"gistbot doctor: {verdict}\n")
    for check in failed + [c for c in checks if c.ok]:
        out.write(check.line())

    # Without a token, what `gistbot run` does depends on its stdin, which the doctor's
    # is not (a container has no terminal): say both, not a console that would not start.
    adapters = configured_platforms(settings) or [
        "none: no platform token set (`gistbot run` chats in a terminal, and without one "
        "stops with status 2)"]
    out.write(f"\nAdapters that would start: {', '.join(adapters)}\n")
    out.write(f"LLM provider: {settings.model_provider}\n")
    allowed = ", ".join(Defaults.from_settings(settings).allowed_models)
    out.write(f"Models /config may choose (ALLOWED_MODELS): {allowed}\n")
    out.write("\nConfiguration:\n")
    for name, shown in _describe(settings):
        out.write(f"  {name:<26} {shown}\n")
    return 0 if not failed else 1
