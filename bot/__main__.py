"""``python -m bot`` is the ``gistbot`` command."""

import sys

from bot.cli import main

sys.exit(main())
