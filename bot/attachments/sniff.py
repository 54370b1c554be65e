"""What a file's bytes are, whatever its name or declared type says: an image, a PDF, a
known binary format, or text (and in which encoding).

The bytes decide: a ``.txt`` that is a zip is a zip, a ``text/plain`` PNG is a PNG. The
declared content type only breaks a tie — text that is not UTF-8 is read as Windows-1252
when the host called it text.
"""

from __future__ import annotations

import codecs
from typing import Literal

__all__ = ["Kind", "decode_text", "sniff"]

Kind = Literal["png", "jpeg", "gif", "webp", "pdf", "binary", "text"]

_MAGIC: tuple[tuple[bytes, Kind], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"%PDF-", "pdf"),
)
_BINARY = (
    b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c",
    b"Rar!", b"MZ", b"\x7fELF", b"\xca\xfe\xba\xbe", b"\xcf\xfa\xed\xfe", b"(\xb5/\xfd",
    b"\x00\x00\x01\x00", b"II*\x00", b"MM\x00*", b"BM", b"OggS", b"fLaC", b"ID3",
    b"\x1aE\xdf\xa3", b"SQLite format 3",
)  # archives, compressed streams, executables, other images and media, databases
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b")


def sniff(data: bytes) -> Kind:
    """The kind of ``data`` from its first bytes (and, for text, its control characters)."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if any(data.startswith(m) for m in _BINARY) and not data.startswith(codecs.BOM_UTF16_LE):
        return "binary"
    if any(data.startswith(bom) for bom, _ in _BOMS):
        return "text"
    return "binary" if b"\x00" in data[:65536] else "text"


def _controls(text: str) -> int:
    return sum(1 for c in text if (c < " " or c == "\x7f") and c not in _ALLOWED_CONTROLS)


def decode_text(data: bytes, declared: str = "") -> str | None:
    """``data`` as text, or None when it is not text (too many control characters, or not
    UTF-8 and not declared as text)."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    if encoding is not None:
        text = data.decode(encoding, errors="replace")
    else:
        try:  # a download is whole (over the size limit it is refused, never cut)
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if declared.lower().startswith("text/"):
                text = data.decode("cp1252", errors="replace")
            else:
                return None
    sample = text[:65536]
    if sample and _controls(sample) > max(2, len(sample) // 100):
        return None
    return text
