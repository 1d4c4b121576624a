"""Against a real model, only when asked: `TINYHARNESS_BASE_URL=... python -m pytest -m live`.

Never in CI (pyproject's addopts deselect `live`). A real model may fail where the scripted one
cannot; that is what these runs are for.
"""
import os

import pytest

from tests.ladder import run_stage, stages_from

TASK = "Find the testing budget in my notes and save it to budget.md."


@pytest.mark.live
@pytest.mark.parametrize("stage", stages_from("m1"))
def test_notes_task_with_a_real_model(stage, notes_workspace):
    base_url = os.environ.get("TINYHARNESS_BASE_URL") or pytest.skip("set TINYHARNESS_BASE_URL to a real server")
    model = os.environ.get("TINYHARNESS_MODEL", "qwen3:8b")
    result = run_stage(stage, notes_workspace, "--base-url", base_url, "--model", model, TASK,
                       approve=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "300" in (notes_workspace / "budget.md").read_text(encoding="utf-8")
