"""Downloading one attachment: only from its platform's own file hosts, with the size
checked before (the platform's declared size, ``Content-Length``) and during the download,
a timeout on the whole, no redirects (a redirect could lead the bot token elsewhere) and
no transfer compression (a gzip bomb cannot expand past the cap it was counted under)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # a worker process imports this package: it must stay light
    from bot.messages import Attachment
    from bot.settings.sections import AttachmentSettings

__all__ = ["DownloadFailed", "FileSource", "Refused", "fetch", "origin", "size_text"]


class DownloadFailed(Exception):
    """The connection or the HTTP exchange failed (the cause is chained)."""


class Refused(Exception):
    """The file was not fetched; the message says why, in a few words."""


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased ("" when it has none)."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not host or parts.scheme not in ("http", "https"):
        return ""
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def size_text(n: int) -> str:
    """Bytes as people read them (``8 MiB``, ``300 KiB``)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True, slots=True)
class FileSource:
    """Where one platform's files may come from and how to ask for them: the origins of
    its file hosts (Discord's CDN; Slack's ``files.slack.com``), and the headers sent to
    them (Slack: the bot token; never shown in a repr or a log)."""

    platform: str
    origins: frozenset[str]
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, platform: str, urls: Iterable[str],
           headers: Mapping[str, str] | None = None) -> FileSource:
        """A source allowing the origins of ``urls``."""
        return cls(platform, frozenset(o for o in map(origin, urls) if o), dict(headers or {}))

    def allows(self, url: str) -> bool:
        """Whether ``url`` is on one of this platform's file hosts."""
        return origin(url) in self.origins


async def fetch(source: FileSource, att: Attachment,
                limits: AttachmentSettings) -> tuple[bytes, str]:
    """The file's bytes and the content type its host declared; ``Refused`` when it is not
    on the platform's host, too large (declared or actual), or the host says no."""
    cap = limits.attachment_max_bytes
    if att.size is not None and att.size > cap:
        raise Refused(f"larger than the {size_text(cap)} limit")
    if not source.allows(att.url):
        raise Refused(f"not on {source.platform}'s file host")
    import aiohttp  # here, not at import: the missing-library check names the extra first

    try:
        return await _download(aiohttp, source, att, limits)
    except aiohttp.ClientError as e:
        raise DownloadFailed(type(e).__name__) from e


async def _download(aiohttp: Any, source: FileSource, att: Attachment,
                    limits: AttachmentSettings) -> tuple[bytes, str]:
    """The capped download itself (``fetch`` checked the host and the declared size)."""
    cap = limits.attachment_max_bytes
    timeout = aiohttp.ClientTimeout(total=limits.attachment_timeout)
    headers = {**source.headers, "Accept-Encoding": "identity"}
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        async with session.get(att.url, headers=headers, allow_redirects=False) as resp:
            if resp.status != 200:
                raise Refused(f"the file host answered {resp.status}")
            if resp.headers.get("Content-Encoding", "identity").lower() != "identity":
                raise Refused("sent compressed")
            if resp.content_length is not None and resp.content_length > cap:
                raise Refused(f"larger than the {size_text(cap)} limit")
            data = bytearray()
            async for chunk in resp.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > cap:
                    raise Refused(f"larger than the {size_text(cap)} limit (while downloading)")
            return bytes(data), resp.headers.get("Content-Type", "")
