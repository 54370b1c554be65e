"""The store backends, one package each, and what they share.

* ``common``: what both backends do the same way (mapping rows into ``memory.models``,
  the edit/delete outcome, copying an archive, TTL guards, search terms).
* ``sqlite``: ``SqliteStore``, the default (one file, group commit).
* ``postgres``: ``PostgresStore`` for replicas; needs the ``postgres`` extra (asyncpg),
  so nothing here imports it.

The protocols they implement are in ``memory.store``.
"""

from __future__ import annotations

__all__: list[str] = []
