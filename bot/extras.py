"""Optional parts and the libraries they need, checked once, before anything starts.

A part of gistbot that only some installations use — a platform adapter, PostgreSQL, the
admin server — names its pyproject extra and the module it starts from (``Extra``).
:func:`missing` imports that module, so it checks exactly what the part imports, directly or
not, and a library that is not there becomes one line naming the install command
(:class:`MissingExtra`, a ``ConfigError``: exit status 2). ``gistbot run`` checks every part
the configuration asks for before starting any (:func:`needed`), ``gistbot doctor`` reports
the same check, and each part's own entry point checks itself too (``copy-db``,
``discord-invite``). An import error inside gistbot's own modules is a bug, not a missing
extra, and is raised as it is.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bot.errors import ConfigError
from bot.settings import Settings

__all__ = ["ADMIN", "POSTGRES", "Extra", "MissingExtra", "install_command", "missing",
           "needed", "require"]

_OWN = frozenset({"bot", "adapters", "memory"})


@dataclass(frozen=True, slots=True)
class Extra:
    """An optional part: its extra (``pip install 'gistbot[name]'``), what it is called in
    a sentence, the module it starts from, and the setting that asks for it."""

    name: str
    label: str
    entry: str
    setting: str = ""


@dataclass(frozen=True, slots=True)
class Absent:
    """An extra whose entry module could not be imported: ``library`` is not installed."""

    extra: Extra
    library: str


POSTGRES = Extra("postgres", "PostgreSQL support", "memory.stores.postgres.store",
                 "DATABASE_URL=postgresql://…")
ADMIN = Extra("admin", "The admin server", "bot.admin.server", "ADMIN_PORT")


class MissingExtra(ConfigError):
    """Parts the configuration (or the command) needs are not installed; one line."""

    def __init__(self, absent: Sequence[Absent], *, configured: bool = True) -> None:
        self.absent = list(absent)
        super().__init__(describe(self.absent, configured=configured))


def describe(absent: Sequence[Absent], *, configured: bool = True) -> str:
    """One sentence for the missing parts: what is missing and the command that adds it
    (and, when settings asked for them, which settings to unset instead)."""
    labels = [a.extra.label for a in absent]
    what = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    verb = "is" if len(labels) == 1 else "are"
    libraries = ", ".join(dict.fromkeys(a.library for a in absent))
    line = (f"{what} {verb} not installed (no module {libraries}): "
            f"{install_command([a.extra.name for a in absent])}")
    settings = [a.extra.setting for a in absent if a.extra.setting]
    if configured and settings:
        line += f" (or unset {' and '.join(s.split('=')[0] for s in settings)})"
    return line


def _import_failure(extra: Extra) -> Absent | None:
    try:
        importlib.import_module(extra.entry)
    except ImportError as e:
        library = (e.name or "").split(".")[0]
        if not library or library in _OWN:
            raise
        return Absent(extra, library)
    return None


def missing(extras: Sequence[Extra]) -> list[Absent]:
    """The extras among ``extras`` whose entry module cannot be imported, with the library
    that is not installed."""
    return [a for e in dict.fromkeys(extras) if (a := _import_failure(e)) is not None]


def require(*extras: Extra, configured: bool = False) -> None:
    """Raise ``MissingExtra`` (one line) unless every part in ``extras`` can be imported;
    ``configured``: settings asked for them, so the line says which to unset instead."""
    absent = missing(extras)
    if absent:
        raise MissingExtra(absent, configured=configured)


def needed(settings: Settings, platforms: Mapping[str, Extra]) -> list[Extra]:
    """Every optional part ``settings`` asks for: the parts of the configured platforms
    (``platforms``, by name), PostgreSQL for a ``postgresql://`` URL, the admin server for
    ``ADMIN_PORT``."""
    out = list(platforms.values())
    if settings.database.sqlite_path is None:
        out.append(POSTGRES)
    if settings.admin.admin_port is not None:
        out.append(ADMIN)
    return out


def install_command(names: Sequence[str]) -> str:
    """The pip command that adds the extras ``names`` to this installation: ``-e`` with
    the source folder for an editable install (``.`` when it is the current folder)."""
    spec = ",".join(names)
    source = _editable_source()
    if source is None:
        return f"pip install 'gistbot[{spec}]'"
    where = "." if source == Path.cwd().resolve() else str(source)
    return f"pip install -e '{where}[{spec}]'"


def _editable_source() -> Path | None:
    """The source folder of an editable install (PEP 610's ``direct_url.json``), or the
    checkout gistbot runs from uninstalled; None for an installed wheel."""
    try:
        text = distribution("gistbot").read_text("direct_url.json")
    except PackageNotFoundError:
        return Path(__file__).resolve().parents[2]  # run from a source tree (python -m bot)
    try:
        info = json.loads(text or "{}")
    except ValueError:
        return None
    if not info.get("dir_info", {}).get("editable"):
        return None
    url = urlsplit(str(info.get("url", "")))
    return Path(unquote(url.path)).resolve() if url.scheme == "file" else None
