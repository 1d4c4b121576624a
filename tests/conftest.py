import shutil

import pytest

from tests.ladder import ROOT


@pytest.fixture
def notes_workspace(tmp_path):
    """A fresh copy of examples/notes, the course's demo workspace."""
    workspace = tmp_path / "notes"
    shutil.copytree(ROOT / "examples" / "notes", workspace)
    return workspace


@pytest.fixture
def workspace(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def pytest_configure(config):
    config.addinivalue_line("markers", "live: needs a real model server at TINYHARNESS_BASE_URL (never in CI)")
