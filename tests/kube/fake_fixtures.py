"""pytest fixtures that start the strict fake kube-apiserver (fake_apiserver.py) for a test.

`fake` is a running fake in the test's temporary directory, stopped afterwards; `api` is a
requests.Session carrying its CA and bearer token, with `api.base` the server URL. A test file
elsewhere uses them by importing them into its own namespace:

    sys.path.insert(0, str(ROOT / "tests" / "kube"))
    from fake_fixtures import fake, api  # noqa: F401  (pytest finds fixtures by name)
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
