"""Platform adapters: translate platform events into ``ChatService`` calls, send back what
it returns. Each is built with a ``ChatService``, its own options and the narrow objects it
needs (``claims.DeliveryClaims``); none holds the whole application.

- ``console_adapter``: the terminal chat.
- ``discord/`` and ``slack/``: packages whose files name their parts; importing them does
  not import the platform library (an extra), their ``run_*`` functions do.
- ``replies``: the user's sentence for an error and the pace of streamed replies (all).
- ``chunking``: platform-sized chunks with balanced code fences.
"""
