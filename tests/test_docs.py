"""The documentation stays true: the README is short and names only commands that exist,
every relative link in it and in ``docs/`` leads somewhere, the configuration reference and
``.env.example`` are what the settings class renders, and user documentation tells no
issue history (the decision records may)."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from pydantic import Field

import bot.settings.doc as settings_doc
from bot.settings import Settings, fields
from bot.settings.sections import LLMSettings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
DECISIONS = ROOT / "docs" / "decisions"
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def prose(path: Path) -> str:
    """A Markdown file without its fenced blocks and inline code (no links live there)."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown file (repeated headings get ``-1``, ``-2``…)."""
    seen: dict[str, int] = {}
    out = set()
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.MULTILINE):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """``target`` for each relative link of ``path`` whose file or heading does not exist
    (or lies outside ``root``)."""
    bad = []
    for target in re.findall(r"\]\(<?([^)\s>]+)>?(?: \"[^\"]*\")?\)", prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file if file else path).resolve()
        if not dest.exists() or root.resolve() not in (dest, *dest.parents):
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(target)
    return bad


def test_readme_is_at_most_350_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 350, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert not broken_links(path), f"{path.relative_to(ROOT)}: {broken_links(path)}"


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "memory.md").write_text("# How memory works\n\n## The window\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    probe = tmp_path / "docs" / "probe.md"
    probe.write_text("[a](memory.md#no-such-heading) [b](../ELSE.md) [c](memory.md#the-window)\n"
                     "`[d](nowhere.md)` [e](https://example.org/x.md) [f](#here)\n\n# Here\n"
                     "```\n[g](in-a-block.md)\n```\n")
    assert broken_links(probe, tmp_path) == ["memory.md#no-such-heading", "../ELSE.md"]
    assert broken_links(probe, tmp_path / "docs") == broken_links(probe, tmp_path)
    assert broken_links(tmp_path / "docs" / "memory.md", tmp_path) == []
    (tmp_path / "docs" / "up.md").write_text("[o](../outside.md)\n")
    assert broken_links(tmp_path / "docs" / "up.md", tmp_path / "docs") == ["../outside.md"]


def test_user_docs_name_no_issue_numbers_and_no_files_outside_the_repository() -> None:
    for path in [README, *DOCS]:
        if DECISIONS in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT)
        assert not re.search(r"(?i)\bissues?[ -]?#?\d+", text), f"{name} names an issue"
        assert not re.search(r"\b(DESIGN|STYLE)\.md", text), f"{name} cites a file not here"


def test_configuration_reference_and_env_example_are_up_to_date() -> None:
    stale = [str(p.relative_to(ROOT)) for p in settings_doc.check()]
    assert not stale, f"{stale} out of date: run python -m bot.settings.doc"
    reference = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    variables = [f.variable for f in fields(Settings)]
    assert len(variables) >= 60
    for name in variables:
        assert f"| `{name}` |" in reference, name


def test_a_change_to_the_settings_makes_the_files_stale(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_doc.write(tmp_path) == [tmp_path / "docs" / "configuration.md",
                                            tmp_path / ".env.example"]
    assert settings_doc.check(tmp_path) == []

    class WiderLLM(LLMSettings):
        new_knob: int = Field(default=7, ge=1, description="A knob added later.")

    class Wider(Settings):
        llm: WiderLLM = WiderLLM()

    monkeypatch.setattr(settings_doc, "Settings", Wider)
    assert len(settings_doc.check(tmp_path)) == 2
    settings_doc.write(tmp_path)
    assert "# A knob added later.\n# NEW_KNOB=7\n" in (tmp_path / ".env.example").read_text()
    assert "| `NEW_KNOB` | `7` | integer ≥ 1 | A knob added later. | `llm.new_knob` |" in (
        tmp_path / "docs" / "configuration.md").read_text()


def test_a_setting_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class WiderLLM(LLMSettings):
        undocumented_knob: bool = False

    class Wider(Settings):
        llm: WiderLLM = WiderLLM()

    monkeypatch.setattr(settings_doc, "Settings", Wider)
    with pytest.raises(ValueError, match="UNDOCUMENTED_KNOB has no description"):
        settings_doc.settings()
    assert settings_doc.main(["--check"]) == 2


HELP_OF = """
import contextlib, io, sys
from bot.cli import main
for args in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(out):
        main([*args.split(), "--help"])
    print(out.getvalue(), end="\\0")
"""


def gistbot_help(*commands: str) -> list[str]:
    """What ``gistbot [COMMAND] --help`` prints for each command ("" for the top level)."""
    done = subprocess.run([sys.executable, "-c", HELP_OF, *commands], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[: len(commands)]


@pytest.mark.slow
def test_readme_names_only_gistbot_commands_and_options_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    code = "\n".join(re.findall(r"`([^`\n]+)`", FENCE.sub("", text)) + blocks)
    uses = re.findall(r"\bgistbot ([a-z][a-z-]+)([^\n&;<>]*)", code)
    flags = {(sub, flag) for sub, rest in uses for flag in re.findall(r"--[a-z-]+", rest)}
    with_flags = sorted({sub for sub, _ in flags})
    top, *helps = gistbot_help("", *with_flags)
    listed = set(re.findall(r"^ {4}([a-z][a-z-]+) ", top, re.MULTILINE))
    assert {"run", "console", "doctor"} <= listed
    named = {sub for sub, _ in uses}
    assert named - {"console", "run"}, "the README names no gistbot subcommands"
    assert named <= listed, f"not gistbot subcommands: {sorted(named - listed)}"
    assert ("copy-db", "--resume") in flags
    for sub, options in zip(with_flags, helps, strict=True):
        missing = sorted(f for s, f in flags if s == sub and f not in options)
        assert not missing, f"gistbot {sub} has no {missing}"


def test_readme_keeps_the_two_set_up_commands_and_ci_runs_its_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/gistbot" in text
    assert "bash .ci/run" in text
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # CI installs into a venv of its own, so the developer's .venv is left as it is; its
    # last step is the README's test command run from that venv.
    [venv] = re.findall(r"^VENV=(\S+)$", ci, re.MULTILINE)
    assert venv != ".venv" and f"`{venv}`" in text
    steps = "\n".join(ln for ln in ci.splitlines() if not ln.lstrip().startswith("#"))
    assert ".venv/bin" not in steps and not re.search(r"venv [\"']?\.venv\b", steps)
    last = ci.rstrip().splitlines()[-1].strip()
    assert last.startswith("$VENV/bin/")
    test_command = last.replace("$VENV", ".venv", 1)
    assert test_command == ".venv/bin/pytest" and f"`{test_command}`" in text


def test_readme_names_every_bot_scope_of_the_slack_manifest() -> None:
    # People compare the app they created with the README's list; a scope missing there
    # (the read check's channels:read and others) looks like one they may leave out.
    manifest = yaml.safe_load((ROOT / "slack_manifest.yaml").read_text(encoding="utf-8"))
    scopes = manifest["oauth_config"]["scopes"]["bot"]
    text = README.read_text(encoding="utf-8")
    slack = text[text.index("### Slack"):text.index("### Docker compose")]
    assert scopes and not [s for s in scopes if f"`{s}`" not in slack]
