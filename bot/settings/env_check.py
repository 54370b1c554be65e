"""Misspelt settings: ``MAX_HISTORY_MESSAGE=5`` in ``.env`` is otherwise silently ignored.

Settings ignore unknown variables (``.env`` files are shared with docker compose, and the
environment holds everything), so a typo leaves the default in force with no word. This
check names each unknown variable that is close to a known setting (``difflib``), once, at
start: every such variable of ``.env``, and of the process environment only those that
look like gistbot's (close enough to a setting that ``PATH`` or ``HOSTNAME`` never match).
``.env`` is read with python-dotenv, the parser pydantic-settings itself uses.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

from bot.settings import Settings, fields

__all__ = ["known_settings", "typo_warnings"]

# How alike a name must be to a setting's (difflib's ratio). "MAX_HISTORY_MESSAGE" vs
# "MAX_HISTORY_MESSAGES" is 0.97, "LOGLEVEL" vs "LOG_LEVEL" 0.94, "OPENAI_KEY" vs
# "OPENAI_API_KEY" 0.83; "HOSTNAME" vs "HOST" 0.67. ``.env`` is written for gistbot, so
# its bar is lower than the environment's, which holds every program's variables.
_CLOSE_IN_FILE = 0.8
_CLOSE_IN_ENVIRONMENT = 0.85

# Variables gistbot reads besides its settings (memory.tokens' offline encodings).
_OTHER_KNOWN = frozenset({"TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME"})


def known_settings() -> list[str]:
    """Every variable name the settings read, upper case."""
    return sorted(f.variable for f in fields(Settings))


def _suggest(name: str, known: list[str], cutoff: float) -> str | None:
    upper = name.upper()
    if upper in known or upper in _OTHER_KNOWN:
        return None
    close = difflib.get_close_matches(upper, known, n=1, cutoff=cutoff)
    return close[0] if close else None


def typo_warnings(
    env_file: str | Path | None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """One sentence per unknown variable close to a setting's name, ``.env`` first."""
    known = known_settings()
    out: list[str] = []
    seen: set[str] = set()
    if env_file is not None and Path(env_file).is_file():
        for name in dotenv_values(env_file):
            if (hint := _suggest(name, known, _CLOSE_IN_FILE)) and name not in seen:
                seen.add(name)
                out.append(f"unknown setting {name} in {env_file}; did you mean {hint}?")
    for name in (os.environ if environ is None else environ):
        if (hint := _suggest(name, known, _CLOSE_IN_ENVIRONMENT)) and name not in seen:
            seen.add(name)
            out.append(f"unknown setting {name} in the environment; did you mean {hint}?")
    return out
