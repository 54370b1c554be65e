"""``PostgresStore`` (``store``): its SQL (``queries`` for turns, the summary state and
leases; ``archive`` for episodes, long-term facts and search), how it reads asyncpg's
``errors``, and its ``schema``. Importing this package does not import asyncpg; its modules
do (the ``postgres`` extra)."""
