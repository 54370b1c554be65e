"""``SqliteStore`` (``store``): its group-commit ``writer``, its SQL (``queries`` for turns,
the summary state and leases; ``archive`` for episodes, long-term facts and search) and its
``schema``."""
