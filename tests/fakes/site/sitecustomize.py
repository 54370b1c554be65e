"""Put this folder first on ``PYTHONPATH`` (with the repository after it) and every Python
process started from there, ``.venv/bin/gistbot`` included, talks to the loopback fakes the
environment names (``tests.fakes.redirect``): how the README's commands run as written."""

from tests.fakes.redirect import redirect_platforms

redirect_platforms()
