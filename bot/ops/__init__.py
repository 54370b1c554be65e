"""Running gistbot: logging and JSON logs, secret redaction, graceful shutdown,
``migrate``/``copy-db``, ``doctor``, the observer hooks and the optional parts'
install check (``extras``).
"""
