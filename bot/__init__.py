"""The application, grouped by feature.

- ``cli`` and ``plugins``: the ``gistbot`` command; the platforms it starts are found by
  name through the ``gistbot.platforms`` entry points, so nothing here imports ``adapters/``.
- ``app``: ``Runtime``, store → memory → LLM → service from ``Settings``.
- ``platform``: the adapters' port, what a platform adapter uses of ``bot``.
- Features: ``conversation`` (the ``ChatService`` pipeline and the reply flow),
  ``memory_commands``, ``catchup`` (and digests), ``channels`` (settings and quotas),
  ``missed`` (owed replies), ``attachments``; ``commands``, every command declared once.
- Beside them: ``llm`` (the gateway), ``settings``, ``admin`` (the admin server), ``ops``;
  ``messages``, ``errors`` and ``wording``, the values, errors and words all share.
"""
