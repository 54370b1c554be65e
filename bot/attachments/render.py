"""The lines that stand for each file in the stored turn, and putting them where the
message's text named the file.

A text file becomes ``[attachment: name #tag]``, its text, and ``[end of attachment: name
#tag]``. The tag is random and chosen so the file's text does not contain it, so no line in
a file can close its fence. Inside, a line that could be read as structure — a speaker
label (``alice:``, ``[Bob]:``), a file or image marker — gets a ``│ `` gutter (every kind
of line break is made a newline first, so a CR or a Unicode line separator cannot start a
line the check did not see), and the prompt's fence markers (``<<<``, ``>>>``) are
defused: a file's labels never become
speakers in a reply's prompt, a summary request or a catch-up. The characters of all of
one message's files are bounded together, and what is cut says how much was left out. An
image is ``[image: name, W×H]`` (with the model's description once it has one, or
``could not be read`` once the model endpoint refused it); a file not read is one line,
``[attachment: name, why]``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence

from bot.attachments.model import UNREADABLE_IMAGE, Reading
from bot.messages import Attachment
from memory.text import defuse

__all__ = ["GUTTER", "compose", "escape_file_text", "fence_tag", "image_line", "render_all"]

GUTTER = "│ "
# A line a reader (a model, or gistbot's own parsers) could take for structure: a speaker
# label ("alice: ", "[Bob]: ", '"Ann: ', "**Eve:** ", "Erin： "), or one of the markers files
# and images are shown by; behind any run of punctuation, spaces or invisible characters
# (a zero-width space, a byte order mark, a quote marker), which a reader looks past.
_STRUCTURE = re.compile(
    r"[^\w\n]{0,12}(?:[^\W\d][\w.' -]{0,40}[^\w\n]{0,4}[:\uff1a][*_~`'\"\u201d\u2019]*(?:\s|$)"
    r"|\[[^\]\n]*\][^\w\n]{0,4}[:\uff1a]"
    r"|\[[^\w\n]*(?:…|\.\.\.)?[^\w\n]*(?:attachment|end of attachment|image|file)\b)",
    re.IGNORECASE,
)
# Every line break a reader honours besides "\n" (``str.splitlines``'s): a file's lines are
# put on lines of their own before they are checked, so none starts where the check did
# not look.
_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _clean_name(name: str) -> str:
    return " ".join(name.replace("]", ")").replace("[", "(").split())[:200] or "file"


_TAG_KEY = secrets.token_bytes(16)  # per process: nobody can compute a file's tag ahead


def fence_tag(text: str) -> str:
    """A tag that ``text`` does not contain (so ``text`` cannot close its fence): keyed by a
    secret of this process, so rendering the same text again (an image's description
    arriving) gives the same tag, and no one can know it before the file is read."""
    tag = hmac.new(_TAG_KEY, text.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:8]
    while tag in text:
        tag = secrets.token_hex(4)
    return tag


def escape_file_text(text: str) -> str:
    """``text`` with its line breaks made ``\\n``, fence markers defused and a gutter
    before each line that could be read as a speaker label or a file marker."""
    return "\n".join(GUTTER + line if _STRUCTURE.match(line) else line
                     for line in _BREAKS.sub("\n", defuse(text)).split("\n"))


def image_line(name: str, width: int, height: int) -> str:
    """The start of an image's line, up to its size: ``[image: name, W×H``."""
    return f"[image: {_clean_name(name)}, {width}×{height}"


def render_all(files: Sequence[tuple[Attachment, Reading]], max_chars: int,
               tag: Callable[[str], str] = fence_tag) -> list[str]:
    """One block per file, in order; text files share ``max_chars`` characters. ``tag``
    picks each text file's fence tag from the block's content."""
    left = max_chars
    blocks: list[str] = []
    for att, r in files:
        name = _clean_name(att.name)
        if r.kind == "image":  # with the model's description, once it has one
            about = (f", {UNREADABLE_IMAGE}" if r.reason == UNREADABLE_IMAGE
                     else f": {r.text}" if r.text else "")
            blocks.append(f"{image_line(name, r.width, r.height)}{about}]")
        elif r.kind == "text":
            text = r.text.strip("\n")
            kept = text[: max(0, left)]
            left -= len(kept)
            body = escape_file_text(kept)
            if len(kept) < len(text):
                body += f"\n[…attachment cut: {len(text) - len(kept):,} more characters not kept]"
            t = tag(body + name)
            blocks.append(f"[attachment: {name} #{t}]\n{body}\n[end of attachment: {name} #{t}]")
        else:
            blocks.append(f"[attachment: {name}, {r.reason or 'unreadable'}]")
    return blocks


def compose(text: str, files: Sequence[Attachment], blocks: Sequence[str]) -> str:
    """``text`` with each file's placeholder replaced by its block, on lines of its own (in
    one pass, so a file's text that quotes another placeholder stays as it is); a block
    whose placeholder is not in the text (cut away, or none) is added at the end."""
    items: list[str] = []
    pos = 0
    tail: list[str] = []
    for att, block in zip(files, blocks, strict=True):
        at = text.find(att.placeholder, pos) if att.placeholder else -1
        if at < 0:
            tail.append(block)
            continue
        items += [text[pos:at].strip(" \t\n"), block]
        pos = at + len(att.placeholder)
    items.append(text[pos:].strip(" \t\n"))
    return "\n".join(item for item in [*items, *tail] if item)
