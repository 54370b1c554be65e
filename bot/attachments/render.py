"""The lines that stand for each file in the stored turn, and putting them where the
message's text named the file.

A text file becomes ``[attachment: name]``, its text, and ``[end of attachment: name]``;
the characters of all of one message's files are bounded together, and what is cut says
how much was left out. An image is ``[image: name, W×H]``; a file not read is one line,
``[attachment: name, why]``.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.attachments.model import Attachment, Reading

__all__ = ["compose", "render_all"]


def _clean_name(name: str) -> str:
    return " ".join(name.replace("]", ")").replace("[", "(").split())[:200] or "file"


def render_all(files: Sequence[tuple[Attachment, Reading]], max_chars: int) -> list[str]:
    """One block per file, in order; text files share ``max_chars`` characters."""
    left = max_chars
    blocks: list[str] = []
    for att, r in files:
        name = _clean_name(att.name)
        if r.kind == "image":  # with the model's description, once it has one
            about = f": {r.text}" if r.text else ""
            blocks.append(f"[image: {name}, {r.width}×{r.height}{about}]")
        elif r.kind == "text":
            text = r.text.strip("\n")
            kept = text[: max(0, left)]
            left -= len(kept)
            if len(kept) < len(text):
                kept += f"\n[…attachment cut: {len(text) - len(kept):,} more characters not kept]"
            blocks.append(f"[attachment: {name}]\n{kept}\n[end of attachment: {name}]")
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
