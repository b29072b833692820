"""Fixtures that start the strict fake kube-apiserver (fake_apiserver.py) for a test.

`fake` gives a running fake in the test's temporary directory and stops it afterwards; `api`
is a requests.Session already carrying its CA and bearer token. Other test folders can use
them with `pytest_plugins = ["tests.kube.conftest"]` when run from the repository root, or
import start_fake from tests/kube/fake_apiserver.py directly.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_apiserver import start_fake  # noqa: E402


@pytest.fixture
def fake(tmp_path):
    handle = start_fake(str(tmp_path / "fake"), "--bookmark-interval", "0.3", "--history", "200")
    yield handle
    handle.stop()


@pytest.fixture
def api(fake):
    s = fake.session()
    s.base = fake.url
    yield s
    s.close()
