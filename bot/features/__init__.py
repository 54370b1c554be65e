"""Features as units: each feature is one package under ``bot/features/`` with one manifest
(``manifest.Feature``: its commands, storage role, ``/config`` keys, hooks and how its object
is built), and ``registry.FEATURES`` lists them, one line each. The registry assembles the
command table, the storage roles (with what ``copy-db`` and ``export`` take of them) and the
``/config`` keys; ``runtime.RunningFeatures`` runs the features' hooks. ``notes`` (personal notes,
``/aboutme``) is the first; docs/adding-a-feature.md walks through it.
"""
