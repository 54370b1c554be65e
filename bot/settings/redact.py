"""Secrets inside URLs: ``postgresql://user:PASSWORD@host/db?sslpassword=…&password=…``.

A database or endpoint URL can carry a credential in two places: the user-info part and
the query string (libpq and asyncpg read ``?password=``; proxies take ``?api_key=``,
``?token=``, ``?sig=``). ``mask_url`` shows a URL with both hidden (``gistbot doctor``);
``url_secrets`` lists the values so ``Settings.secrets`` scrubs them from every log line
and error text like any token.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlsplit

__all__ = ["mask_url", "url_secrets"]

# Query parameters whose value is a credential. Matched anywhere in the name, so
# "sslpassword", "x-api-key" and "access_token" are caught.
_SECRET_PARAM = re.compile(
    r"pass|pwd|secret|token|key|auth|sig|credential|session|cookie", re.IGNORECASE
)
_HIDDEN = "***"


def url_secrets(url: str | None) -> list[str]:
    """The credentials in ``url``: the password of its user info and the values of
    secret-looking query parameters, both as written and decoded."""
    if not url or "://" not in url:
        return []
    parts = urlsplit(url)
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo and ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if value and _SECRET_PARAM.search(name):
            found += [value, quote(value, safe="")]
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def mask_url(url: str) -> str:
    """``url`` with the password and every secret-looking query value replaced by ``***``
    (the user name and host stay: they say which account and server, not how to log in)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{_HIDDEN}@{host}"
    query = "&".join(
        f"{name}={_HIDDEN}" if value and _SECRET_PARAM.search(unquote(name)) else piece
        for piece in parts.query.split("&") if piece
        for name, _, value in [piece.partition("=")]
    )
    # Rebuilt by hand: urlunsplit drops the empty host of "sqlite:///path".
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if parts.query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )
