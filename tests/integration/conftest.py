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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, so a fixture can tell at
    teardown whether its test failed (etcd_cluster prints its logs then)."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def etcd_cluster(tmp_path, request):
    """A three-member etcd cluster on free loopback ports (tests/integration/etcd.py),
    stopped after the test; its members' logs are printed when the test failed."""
    from etcd import EtcdCluster

    c = EtcdCluster(tmp_path, members=3)
    yield c
    c.stop()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n" + c.log_tail(20))
