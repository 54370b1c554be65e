"""Packaging conventions (issue 15): a LICENSE file for ``license = "MIT"``, a build backend
that can read that field, runtime dependencies capped below their next major, every one of
them used, pinned in ``constraints.txt`` (which CI installs with), and tiktoken's encodings
shipped in the wheel so token counting needs neither the network nor ``bpe-openai``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
RUNTIME_EXTRAS = ("discord", "slack", "postgres")
# distribution name -> the module it is imported as
MODULES = {"discord.py": "discord", "slack-bolt": "slack_bolt", "slack-sdk": "slack_sdk",
           "python-dotenv": "dotenv", "pydantic-settings": "pydantic_settings", "pillow": "PIL"}
# Data-only packages: never imported by name (the standard library reads them) and
# calendar-versioned (2026.6), so they have no API to break and no major version to cap.
DATA_PACKAGES = {"tzdata": "zoneinfo"}


def runtime_requirements() -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in RUNTIME_EXTRAS:
        reqs += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return reqs


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def test_license_file_matches_the_declared_license() -> None:
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_build_backend_reads_pep_639_license_fields() -> None:
    [setuptools] = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    assert setuptools.name == "setuptools"
    assert not setuptools.specifier.contains("68.0") and not setuptools.specifier.contains("76.9")
    assert setuptools.specifier.contains("77.0")


@pytest.mark.parametrize("req", runtime_requirements(), ids=str)
def test_runtime_dependency_has_a_floor_and_a_major_cap(req: Requirement) -> None:
    spec = req.specifier
    assert any(s.operator == ">=" for s in spec), f"{req}: no lower bound"
    if req.name in DATA_PACKAGES:
        return
    [cap] = [s for s in spec if s.operator == "<"]
    major = int(cap.version.split(".")[0])
    floor = next(s for s in spec if s.operator == ">=").version
    assert major == int(floor.split(".")[0]) + 1 and cap.version == str(major), (
        f"{req}: the cap should be the next major version"
    )


def _imported_modules() -> set[str]:
    found: set[str] = set()
    for folder in ("bot", "adapters", "memory"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported() -> None:
    imported = _imported_modules()
    unused = [str(r) for r in runtime_requirements()
              if MODULES.get(r.name, r.name.replace("-", "_")) not in imported
              and DATA_PACKAGES.get(r.name) not in imported]
    assert unused == []
    assert "bpe_openai" not in imported


def test_constraints_pin_every_runtime_dependency_within_its_range() -> None:
    pins = constraints()
    for req in runtime_requirements():
        version = pins.get(canonicalize_name(req.name))
        assert version, f"constraints.txt does not pin {req.name}"
        assert req.specifier.contains(version), f"{req.name}=={version} is outside {req}"
    assert "bpe-openai" not in pins
    assert not [v for v in pins.values() if "+" in v], "local versions are not on PyPI"


def test_ci_installs_with_the_constraints() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installs = [ln for ln in ci.splitlines() if "pip install" in ln and ".[dev]" in ln]
    assert installs and all("-c constraints.txt" in ln for ln in installs)


def test_ci_waits_for_another_apt_process_instead_of_failing() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    apt = [ln for ln in ci.splitlines() if re.search(r"\bapt-get\b", ln) and "#" not in ln]
    assert apt and all("-o DPkg::Lock::Timeout=" in ln for ln in apt), apt


@pytest.mark.slow
def test_offline_token_counting_uses_only_the_shipped_encodings(tmp_path: Path) -> None:
    """A fresh cache, no route to the internet and ``bpe_openai`` unimportable: counting
    still works, from ``memory/encodings/``."""
    code = (
        "import sys; sys.modules['bpe_openai'] = None\n"
        "from memory.tokens import TokenCounter\n"
        "print(TokenCounter('gpt-4o').count('안녕 hi'), TokenCounter('gpt-4').count('hi there'))"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "2"]
    assert len(list((tmp_path / "cache").iterdir())) == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_ships_license_and_encodings(tmp_path: Path) -> None:
    """Built as the Dockerfile builds it (no build isolation: the venv's setuptools>=77)."""
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
         "--wheel-dir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=280, check=False,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    # No warning from the backend (setuptools' BuildBackendWarning for a data folder left
    # out of the packages, its deprecations): newer pip prints them at every install.
    warned = re.findall(r"\w*Warning: .*", build.stdout + build.stderr)
    assert warned == [], warned[:3]
    [wheel] = tmp_path.glob("gistbot-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "memory/encodings/o200k_base.tiktoken.gz" in names
    assert "memory/encodings/cl100k_base.tiktoken.gz" in names
    assert any(re.search(r"\.dist-info/licenses/LICENSE$", n) for n in names)
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))
    ).decode()
    assert "License-Expression: MIT" in metadata
    requires = [ln for ln in metadata.splitlines() if ln.startswith("Requires-Dist:")]
    assert not [ln for ln in requires if "bpe-openai" in ln]
    assert any(re.fullmatch(r"Requires-Dist: openai(<4,>=3|>=3,<4)", ln) for ln in requires)

