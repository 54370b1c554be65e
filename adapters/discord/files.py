"""Discord's side of attachments: where its files may be fetched from (its CDN, or the
host discord.py talks to — the loopback fake in tests) and the ``Attachment`` values of a
message's files, taken from the event (never from the message's text)."""

from __future__ import annotations

from collections.abc import Iterable

import discord

from bot.platform import Attachment, FileSource

__all__ = ["CDN", "attachments_of", "file_source"]

CDN = ("https://cdn.discordapp.com", "https://media.discordapp.net")


def file_source() -> FileSource:
    """Discord's file hosts; no credentials (CDN URLs carry their own signature)."""
    return FileSource.of("discord", [*CDN, discord.http.Route.BASE])


def attachments_of(files: Iterable[discord.Attachment]) -> tuple[Attachment, ...]:
    """The files of a message, each standing as ``[attachment: name]`` in its text."""
    return tuple(
        Attachment(a.filename, a.url, a.size, a.content_type or "", f"[attachment: {a.filename}]")
        for a in files
    )
