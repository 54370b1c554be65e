"""``gistbot doctor``: what is configured, what would start, and whether it works.

Secrets are masked: tokens and keys show their first 3 and last 2 characters at most, URLs
their user name and host but no password, in the user info or in a query parameter
(``bot.redact``). Exit status 0 when the database answered and the LLM endpoint serves the
configured models, 1 otherwise, with one line naming what failed.
"""

from __future__ import annotations

from typing import TextIO

from pydantic import SecretStr

from bot.app import make_llm, make_store
from bot.errors import ModelNotServed
from bot.llm import UsageMeter
from bot.logs import scrub
from bot.redact import mask_url
from bot.settings import Settings
from bot.wording import plural
from memory.tokens import TokenCounter

__all__ = ["doctor", "mask"]


def mask(secret: str) -> str:
    """Enough of a secret to recognise it, never enough to use it."""
    if len(secret) < 12:
        return "***"
    return f"{secret[:3]}…{secret[-2:]}"


def _describe(settings: Settings) -> list[tuple[str, str]]:
    rows = []
    for name, value in settings.model_dump().items():
        if isinstance(value, SecretStr):
            shown = mask(value.get_secret_value())
        elif name == "system_prompt":
            shown = (value[:60] + "…") if len(value) > 60 else value
        elif isinstance(value, str) and "://" in value:
            shown = mask_url(value)  # a password in the user info or the query string
        else:
            shown = "(not set)" if value is None or value == [] else str(value)
        rows.append((name.upper(), shown))
    return rows


async def doctor(settings: Settings, out: TextIO) -> int:
    """Print the report; return the exit status."""
    ok = True
    out.write("gistbot doctor\n\nConfiguration:\n")
    for name, shown in _describe(settings):
        out.write(f"  {name:<26} {shown}\n")
    adapters = settings.adapters or ["console (no platform tokens set)"]
    out.write(f"\nAdapters that would start: {', '.join(adapters)}\n")
    out.write(f"LLM provider: {settings.provider}\n")
    allowed = ", ".join(settings.model_allowlist)
    out.write(f"Models /config may choose (ALLOWED_MODELS): {allowed}\n")
    out.write("\nChecks:\n")

    store = make_store(settings)
    try:
        await store.open()
        channels = await store.channels()
        out.write(f"  database   ok: {plural(len(channels), 'channel')} stored\n")
    except Exception as e:
        ok = False
        out.write(f"  database   FAILED: {scrub(str(e), settings.secrets())}\n")
    finally:
        await store.close()

    llm = make_llm(settings, TokenCounter(settings.model_name), UsageMeter())
    try:
        described = await llm.probe()  # type: ignore[attr-defined]
        out.write(f"  llm        ok: {described}\n")
    except ModelNotServed as e:
        ok = False
        out.write(f"  llm        FAILED: {scrub(str(e), settings.secrets())}\n")
    except Exception as e:
        ok = False
        # Endpoints quote the rejected key in their 401 body; never print it.
        out.write(f"  llm        FAILED: {type(e).__name__}: {scrub(str(e), settings.secrets())}\n")
    finally:
        await llm.aclose()  # type: ignore[attr-defined]
    out.write("\nAll checks passed.\n" if ok else "\nSome checks failed; see above.\n")
    return 0 if ok else 1
