"""An image's format and size with Pillow, without decoding its pixels: the header says
the size; ``verify`` checks the file's structure. A size over Pillow's decompression-bomb
limit, a truncated or corrupt file, or a format other than PNG, JPEG, GIF and WebP is not
an image the bot shows anyone."""

from __future__ import annotations

import io
import warnings

from PIL import Image

__all__ = ["FORMATS", "image_size"]

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """(MIME type, width, height) of the image ``data``; None when it is broken, a
    decompression bomb or not one of ``FORMATS``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(FORMATS)) as img:
                fmt, (width, height) = str(img.format), img.size
                img.verify()
    except (Exception, Image.DecompressionBombWarning):
        return None
    if fmt not in FORMATS or width <= 0 or height <= 0:
        return None
    return FORMATS[fmt], width, height
