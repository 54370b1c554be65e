"""Catch-up and digests: gathering and summarizing a period (``gather``), its words
(``text``), citations, reading ``since`` (``since``, ``phrases``), who may see what
(``visibility``), the command, scheduled digests, and the feature built from the settings
(``wiring``).
"""
