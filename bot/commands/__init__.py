"""Every command, declared once for every platform, with one parser per command that
answers a usage sentence for what it can't read.

``bot.arguments`` holds the layer (``CommandSpec.parse(text) -> args | Usage``, which never
raises; a feature's own grammar lives in its package, ``bot.catchup.since`` say); the modules
here declare commands (``declare.Command``: parser, description, arguments,
permission, who sees the answer, the work), each exporting ``COMMANDS``;
``registry.COMMANDS`` collects them, so a new command is one new module here.
Every platform's entry point parses before any other work and answers a ``Usage``
privately.
"""
