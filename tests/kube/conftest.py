"""The fake kube-apiserver's fixtures (fake_fixtures.py) for the tests in this folder."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_fixtures import api, fake  # noqa: E402,F401
