"""``gistbot run`` as a real process against the loopback fakes (``test_shutdown.py``,
``test_missed_mentions.py``).

Usage: ``python -m tests.bot_child [COMMAND]`` (default ``run``) with the settings in the
environment, plus ``GISTBOT_TEST_SLACK_API`` (the fake Slack's Web API URL) and/or
``GISTBOT_TEST_DISCORD_API`` and ``GISTBOT_TEST_DISCORD_GATEWAY`` (the fake Discord's REST
base and gateway URL). The only thing changed is where the platform libraries connect;
everything else — signal handling included — is ``bot.cli.main([COMMAND])``. It writes
``PID <pid>`` to stderr first, so a test can see it runs as PID 1 of a namespace.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    print(f"PID {os.getpid()}", file=sys.stderr, flush=True)
    from tests.fakes.redirect import redirect_platforms

    redirect_platforms()
    from bot.cli import main as gistbot

    return gistbot(["--env-file", os.devnull, *(sys.argv[1:] or ["run"])])


if __name__ == "__main__":
    sys.exit(main())
