"""Pure helpers for the Slack adapter: text and event translation; no network here.

- **Incoming**: :func:`readable` turns Slack markup (``<@U123>``, ``<#C1|name>``,
  ``<!here>``, ``<https://x|label>``, HTML escapes) into what a person reads, so memory
  never holds opaque ids; :func:`to_incoming` turns a message event into an
  ``IncomingMessage`` (None for bots, joins and other non-conversation).
- **Outgoing**: :func:`neutralise` disarms every broadcast and user mention with a WORD
  JOINER after the ``@`` (reads the same, notifies nobody); :func:`to_mrkdwn` converts
  Markdown and escapes ``&``, ``<``, ``>``; :func:`format_reply` does both and splits into
  messages of :data:`MESSAGE_LIMIT` (3,000: under Slack's recommended 4,000 and a Block Kit
  section's limit), code fences balanced across chunks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from adapters.chunking import split_message
from adapters.slack.files import attachments_of, file_name
from bot.platform import ChannelKey, IncomingMessage

__all__ = [
    "CONVERSATION_SUBTYPES",
    "MESSAGE_LIMIT",
    "WORD_JOINER",
    "format_reply",
    "is_conversation",
    "mentioned_users",
    "neutralise",
    "readable",
    "to_incoming",
    "to_mrkdwn",
    "with_files",
]

MESSAGE_LIMIT = 3000
WORD_JOINER = "\u2060"  # invisible, and breaks Slack's recognition of a mention

_CONTROL = re.compile(r"<([^<>\n]*)>")
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^<>\n]*))?>")

# --------------------------------------------------------------------------- incoming


def mentioned_users(text: str) -> list[str]:
    """User ids mentioned as ``<@U…>`` in Slack text, in order of first appearance."""
    seen: dict[str, None] = {}
    for m in _USER.finditer(text):
        seen.setdefault(m.group(1), None)
    return list(seen)


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _readable_control(inner: str, names: Mapping[str, str]) -> str:
    body, _, label = inner.partition("|")
    if body.startswith("@"):
        uid = body[1:]
        return "@" + (names.get(uid) or label or uid)
    if body.startswith("#"):
        return "#" + (label or body[1:])
    if body.startswith("!"):
        special = body[1:]
        if special.startswith("subteam^"):
            return label if label.startswith("@") else "@" + (label or "group")
        if special in ("here", "channel", "everyone"):
            return "@" + special
        return label or special  # <!date^…|fallback> and the like
    url = body.removeprefix("mailto:")
    if not label or label == url or url.split("://", 1)[-1].rstrip("/") == label.rstrip("/"):
        return label or url
    return f"{label} ({url})"


def readable(text: str, names: Mapping[str, str]) -> str:
    """Slack message text as a person reads it; ``names`` maps user ids to display names."""
    out = _CONTROL.sub(lambda m: _readable_control(m.group(1), names), text)
    return _unescape(out)


CONVERSATION_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})


def is_conversation(event: Mapping[str, Any], bot_user_id: str) -> bool:
    """Whether an event is a human message worth remembering (not a bot, not a join…)."""
    return (
        event.get("type") in ("message", "app_mention")
        and event.get("subtype") in CONVERSATION_SUBTYPES
        and not event.get("bot_id")
        and bool(event.get("user"))
        and event.get("user") != bot_user_id
        and bool(event.get("ts"))
    )


def with_files(text: str, event: Mapping[str, Any]) -> str:
    """``text`` with ``[file: name]`` for each file the message shares."""
    files = [file_name(f) for f in event.get("files") or ()]
    notes = " ".join(f"[file: {name}]" for name in files if name)
    return f"{text} {notes}".strip()


def to_incoming(
    team_id: str, event: Mapping[str, Any], *, bot_user_id: str, names: Mapping[str, str]
) -> IncomingMessage | None:
    """A Slack message event as the service's ``IncomingMessage`` (None: not conversation).

    ``names`` maps user ids to display names (the author's and the mentioned ones).
    """
    if not is_conversation(event, bot_user_id):
        return None
    raw = str(event.get("text") or "")
    text = with_files(readable(raw, names).strip(), event)
    if not text:
        return None
    user, channel, ts = str(event["user"]), str(event["channel"]), str(event["ts"])
    return IncomingMessage(
        key=ChannelKey("slack", team_id, channel),
        message_id=ts,
        author_id=user,
        author_name=names.get(user, user),
        text=text,
        sent_at=float(ts),
        mentions_bot=bot_user_id in mentioned_users(raw),
        is_direct=event.get("channel_type") == "im" or channel.startswith("D"),
        attachments=attachments_of(event),  # read by bot.attachments
    )


# --------------------------------------------------------------------------- outgoing

_BROADCAST = re.compile(r"<!(channel|here|everyone|group)(?:\|[^<>\n]*)?>", re.IGNORECASE)
_SUBTEAM = re.compile(r"<!subteam\^[A-Za-z0-9]+(?:\|@?([^<>\n]*))?>")
_BARE = re.compile(r"(?<![\w@])@(channel|here|everyone)\b", re.IGNORECASE)


def neutralise(text: str, names: Mapping[str, str] | None = None) -> str:
    """``text`` with every broadcast and user mention made inert but still readable.

    ``<@U123>`` becomes ``@⁠Alice`` when ``names`` knows U123 (else ``@⁠U123``);
    ``<!channel>`` and bare ``@channel`` become ``@⁠channel`` (⁠ = WORD JOINER).
    """
    names = names or {}
    text = _BROADCAST.sub(lambda m: f"@{WORD_JOINER}{m.group(1).lower()}", text)
    text = _SUBTEAM.sub(lambda m: f"@{WORD_JOINER}{m.group(1) or 'group'}", text)
    text = _USER.sub(
        lambda m: f"@{WORD_JOINER}{names.get(m.group(1)) or m.group(2) or m.group(1)}", text
    )
    return _BARE.sub(lambda m: f"@{WORD_JOINER}{m.group(1)}", text)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(`+)([^`\n]+?)\1")
# A link's target may hold balanced parentheses one level deep ("…/Foo_(bar)", as Wikipedia's
# do); its optional title is in double or single quotes; an empty label shows the URL.
_LINK = re.compile(
    r"!?\[([^\]\n]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s<>]*\))+)>?"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"
)
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*|(?<!\w)___(?=\S)(.+?)(?<=\S)___(?!\w)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_STRONG = "\x01"  # stands for mrkdwn's bold "*" until single-star italics are converted


def _emphasis(escaped: str) -> str:
    # ***both*** first, as bold around italic ("*_both_*"): read as bold then italic it
    # came out "*_both*_", which Slack shows with stray marks.
    text = _BOLD_ITALIC.sub(lambda m: f"{_STRONG}_{m.group(1) or m.group(2)}_{_STRONG}", escaped)
    text = _BOLD.sub(lambda m: f"{_STRONG}{m.group(1) or m.group(2)}{_STRONG}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    return text.replace(_STRONG, "*")


def _prose(segment: str) -> str:
    """Escape and convert a stretch of text that holds no code span."""
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(segment):
        out.append(_emphasis(_escape(segment[pos : m.start()])))
        label, url = m.group(1), m.group(2)
        if url.startswith(("http://", "https://", "mailto:")) and not label.strip():
            out.append(f"<{_escape(url)}>")
        elif url.startswith(("http://", "https://", "mailto:")):
            out.append(f"<{_escape(url)}|{_emphasis(_escape(label.replace('|', '/')))}>")
        elif not label.strip():
            out.append(_escape(url))
        else:
            out.append(_emphasis(_escape(f"{label} ({url})")))
        pos = m.end()
    out.append(_emphasis(_escape(segment[pos:])))
    return "".join(out)


def _inline(line: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(line):
        out.append(_prose(line[pos : m.start()]))
        out.append(f"`{_escape(m.group(2))}`")
        pos = m.end()
    out.append(_prose(line[pos:]))
    return "".join(out)


def _line(line: str) -> str:
    if m := _HEADING.match(line):
        title = _inline(m.group(1)).replace("*", "")
        return f"*{title}*" if title else ""
    if _RULE.match(line):
        return "──────────"
    if m := _BULLET.match(line):
        return f"{m.group(1)}• {_inline(m.group(2))}"
    if m := _QUOTE.match(line):
        return f"> {_inline(m.group(1))}"  # a raw ">" at line start is Slack's quote
    return _inline(line)


def to_mrkdwn(markdown: str) -> str:
    """Markdown (as models write it) converted to Slack mrkdwn, with ``&<>`` escaped.

    Bold, italics, strikethrough, links, headings (bold lines), bullets, quotes and code
    (inline and fenced; the language tag is dropped, contents only escaped) are converted;
    anything else passes through as text. An unclosed fence is closed.
    """
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("```")
            rest = line[m.end() :].strip()
            if rest and " " in rest:  # "```some code" on the fence line, not a language tag
                out.append(_escape(rest))
        elif fence and m and m.group(1).startswith(fence) and not line[m.end() :].strip():
            fence = None
            out.append("```")
        elif fence is not None:
            out.append(_escape(line))
        else:
            out.append(_line(line))
    if fence is not None:
        out.append("```")
    return "\n".join(out)


def format_reply(
    text: str, names: Mapping[str, str] | None = None, *, limit: int = MESSAGE_LIMIT
) -> list[str]:
    """Model output as Slack messages: mentions neutralised, mrkdwn, each ≤ ``limit`` chars."""
    mrkdwn = to_mrkdwn(neutralise(text.strip(), names)).strip()
    chunks = [c for c in split_message(mrkdwn, limit) if c.strip()]
    return chunks or ["…"]
