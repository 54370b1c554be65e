"""Platform adapters: translate platform events into ``ChatService`` calls, send back what
it returns (a reply through ``bot.conversation.reply_flow`` and the platform's outlet). Each is
built with a ``ChatService``, its own options and the narrow objects it needs (the store's
history cursor for a backfill); none holds the whole application. Each names its
``PLATFORM`` under the ``gistbot.platforms`` entry points, which the command line starts.
What they use of the application they import from ``bot.platform``, their port.

- ``console_adapter``: the terminal chat.
- ``discord/`` and ``slack/``: packages whose files name their parts; importing them does
  not import the platform library (an extra), their ``run_*`` functions do.
- ``replies``: the user's sentence for an error (all).
- ``chunking``: platform-sized chunks with balanced code fences.
"""
