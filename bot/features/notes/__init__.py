"""Personal notes: ``/aboutme remember <text>`` keeps a note about the person who wrote it, used
in the prompt of that person's own requests anywhere on the same server or workspace and
shown only to them (``/aboutme`` lists, ``/aboutme forget <number|all>`` removes). Never in another
person's prompt, a summary, a digest or a catch-up; nothing kept until a person asks; off
per server with ``/config set server personal_notes off``; in ``export`` and ``copy-db``.

The whole feature is this folder: ``store`` (its storage role, both backends), ``feature``
(the work and the prompt hook), ``commands`` (``/aboutme``), ``wording``, and ``FEATURE`` below,
the manifest ``bot.features.registry`` lists.
"""

from __future__ import annotations

from bot.channels.config import Key
from bot.features.manifest import Feature, Needs
from bot.features.notes.commands import COMMANDS
from bot.features.notes.feature import SETTING, Notes
from bot.features.notes.store import LADDER, PostgresNotes, SqliteNotes, copy_notes, export_notes
from bot.stores.roles import Role

__all__ = ["FEATURE", "Notes"]


def _build(needs: Needs) -> Notes:
    return Notes(needs.store, needs.tokenizer, needs.setting)


FEATURE = Feature(
    name="notes",
    commands=COMMANDS,
    order=15,  # after the channel's memory commands
    role=Role("notes", LADDER, SqliteNotes, PostgresNotes, copy=copy_notes, export=export_notes),
    config_keys=(Key(SETTING, "on: people may keep personal notes (/aboutme) used in their own "
                 "replies; off: none kept or used here", ("on", "off"), server_only=True,
                 default="on"),),
    build=_build,
)
