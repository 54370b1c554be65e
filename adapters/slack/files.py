"""Slack's side of attachments: its file host (``files.slack.com``, or the API's host —
the loopback fake in tests) with the bot token (the ``files:read`` scope), and the
``Attachment`` values of a message event's ``files``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.platform import Attachment, FileSource

__all__ = ["FILE_HOST", "attachments_of", "file_source"]

FILE_HOST = "https://files.slack.com"


def file_source(client: AsyncWebClient) -> FileSource:
    """Slack's file host; ``url_private`` needs the bot token, sent only there."""
    auth = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    return FileSource.of("slack", [FILE_HOST, client.base_url], auth)


def file_name(f: Mapping[str, Any]) -> str:
    """A shared file's name as its ``[file: name]`` note shows it."""
    return str(f.get("name") or f.get("title") or "")


def attachments_of(event: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """The files of a message event that can be downloaded (not deleted, not external)."""
    out: list[Attachment] = []
    for f in event.get("files") or ():
        name, url = file_name(f), str(f.get("url_private") or "")
        if not name or not url or f.get("mode") in ("tombstone", "external", "hidden_by_limit"):
            continue
        size = f.get("size")
        out.append(Attachment(name, url, size if isinstance(size, int) else None,
                              str(f.get("mimetype") or ""), f"[file: {name}]"))
    return tuple(out)
