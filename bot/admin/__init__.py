"""The admin HTTP server: health, readiness, Prometheus metrics and the memory inspector.

``server`` builds the aiohttp application and runs it beside the adapters; ``metrics``
observes the service, the model meter and compaction; ``inspector`` and ``templates`` are
the memory inspector's pages; ``auth`` its login, session and CSRF checks.
"""
