"""The ``slash_commands`` of ``slack_manifest.yaml``, generated from the command registry,
so the app Slack is told about has exactly the commands the adapter listens to.

``python -m adapters.slack.manifest`` rewrites that section of the file in place (the rest,
comments included, is left as written); ``--check`` exits 1 when the file differs (a test
does the same).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.platform import COMMANDS, Registry

__all__ = ["MANIFEST", "render", "update"]

MANIFEST = Path(__file__).resolve().parents[2] / "slack_manifest.yaml"
_HEAD = "  slash_commands:\n"


def render(commands: Registry = COMMANDS) -> str:
    """The ``slash_commands:`` section (under ``features:``) for ``commands``."""
    lines = [_HEAD]
    for c in commands:
        lines.append(f"    - command: /{c.name}\n")
        lines.append(f"      description: {json.dumps(c.description, ensure_ascii=False)}\n")
        if c.spec.arguments:
            lines.append(f"      usage_hint: {json.dumps(c.spec.arguments, ensure_ascii=False)}\n")
        lines.append("      should_escape: false\n")
    return "".join(lines)


def update(text: str, commands: Registry = COMMANDS) -> str:
    """``text`` (a manifest) with its ``slash_commands`` section generated anew."""
    start = text.index(_HEAD)
    end = start + len(_HEAD)
    while end < len(text) and text.startswith("    ", end):
        end = text.index("\n", end) + 1 if "\n" in text[end:] else len(text)
    return text[:start] + render(commands) + text[end:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` only compare) the manifest's slash commands."""
    parser = argparse.ArgumentParser(prog="python -m adapters.slack.manifest",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    parser.add_argument("path", nargs="?", type=Path, default=MANIFEST)
    args = parser.parse_args(argv)
    text = args.path.read_text(encoding="utf-8")
    wanted = update(text)
    if wanted == text:
        return 0
    if args.check:
        print(f"{args.path}: slash_commands differ from the registry; run "
              "python -m adapters.slack.manifest", file=sys.stderr)
        return 1
    args.path.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
