"""The container's health check: ``python -m bot.admin.healthcheck [--ready]``.

With ``ADMIN_PORT`` set it asks the running bot's admin server — ``/healthz`` (the process
and its event loop are alive), or ``/readyz`` with ``--ready`` (store, platforms, model) —
and exits 0 only on HTTP 200, printing the JSON answer. Without the admin server it falls
back to what the image checked before: the settings load and the database opens (and is
migrated), which is what the bot needs at start. Standard library only: it must not pay
for importing the bot's dependencies every interval.
"""

from __future__ import annotations

import asyncio
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

__all__ = ["main"]

TIMEOUT = 5.0


def _probe(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
            print(r.read().decode("utf-8", "replace"))
            return 0 if r.status == 200 else 1
    except urllib.error.HTTPError as e:
        print(e.read().decode("utf-8", "replace"), file=sys.stderr)
    except OSError as e:
        print(f"admin server not reachable at {url}: {e}", file=sys.stderr)
    return 1


async def _open_store() -> None:
    from bot.settings import load_settings
    from bot.storage import make_storage

    storage = make_storage(load_settings())
    await storage.open()
    await storage.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 when healthy (or ready, with ``--ready``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    from bot.settings import load_settings

    settings = load_settings()
    if settings.admin.admin_port is None:
        asyncio.run(asyncio.wait_for(_open_store(), 10))
        return 0
    host = settings.admin.admin_host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    path = "/readyz" if "--ready" in args else "/healthz"
    return _probe(f"http://{host}:{settings.admin.admin_port}{path}")


if __name__ == "__main__":
    sys.exit(main())
