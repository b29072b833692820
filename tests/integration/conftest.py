"""Shared fixtures for the end-to-end tests: they run the real gpusched binary.

The binary is taken from $GPUSCHED_BIN, else build/gpusched under the
repository root, so `pytest tests/integration` works after a normal build.
"""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gpusched_bin():
    path = pathlib.Path(os.environ.get("GPUSCHED_BIN", ROOT / "build" / "gpusched"))
    if not path.is_absolute():
        path = ROOT / path
    if not path.exists():
        pytest.fail(f"gpusched binary not found at {path}; build first or set GPUSCHED_BIN")
    return str(path)


@pytest.fixture
def run(gpusched_bin):
    """run(*args, input=None) -> CompletedProcess with text stdout/stderr."""

    def _run(*args, input=None, cwd=None):
        return subprocess.run([gpusched_bin, *args], input=input, capture_output=True, text=True,
                              timeout=60, cwd=cwd)

    return _run


@pytest.fixture
def examples_dir():
    return ROOT / "examples"
