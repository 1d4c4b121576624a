"""Project instructions (tinyharness only): AGENTS.md and CLAUDE.md, beside INSTRUCTIONS.md in the system
prompt the server receives; read through the harness's one door for its own files (tinyharness/filedoor.py):
capped, and never through a link or from a FIFO."""
import os

from tests.ladder import FINAL, run_stage
from tinyharness.filedoor import INSTRUCTIONS_CAP as INSTRUCTION_CAP
from tinyharness.testing import ScriptedServer


def system_sent(workspace, *args):
    with ScriptedServer(["Done."]) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, *args, "hi")
    assert done.returncode == 0, done.stderr
    return server.requests[0]["messages"][0]["content"], done.stderr


def test_agents_md_is_read_beside_instructions_md_and_before_claude_md(tmp_path):
    """Both tools' files are read when both are there (a user of both keeps both), AGENTS.md first."""
    (tmp_path / "INSTRUCTIONS.md").write_text("Answer in haiku.")
    (tmp_path / "AGENTS.md").write_text("Run `make test` before you finish.")
    (tmp_path / "CLAUDE.md").write_text("Claude's own notes.")
    system, _ = system_sent(tmp_path)
    assert "(INSTRUCTIONS.md):\nAnswer in haiku." in system
    assert "(AGENTS.md):\nRun `make test` before you finish." in system
    assert system.endswith("(CLAUDE.md):\nClaude's own notes.")


def test_claude_md_is_read_when_there_is_no_agents_md(tmp_path):
    (tmp_path / "CLAUDE.md").write_text("Use tabs.")
    system, _ = system_sent(tmp_path)
    assert system.endswith("(CLAUDE.md):\nUse tabs.")


def test_a_long_agents_md_is_cut_at_the_cap_and_the_prompt_says_so(tmp_path):
    (tmp_path / "AGENTS.md").write_text("a" * (INSTRUCTION_CAP + 10) + "SECRET-TAIL")
    system, _ = system_sent(tmp_path)
    assert "SECRET-TAIL" not in system and "a" * INSTRUCTION_CAP in system
    assert f"[AGENTS.md is {INSTRUCTION_CAP + 21:,} bytes; only its first {INSTRUCTION_CAP // 1024} KiB were read]" in system


def test_a_linked_or_special_agents_md_is_not_read_and_a_warning_says_why(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").symlink_to(outside / "id_rsa")
    os.mkfifo(workspace / "CLAUDE.md")  # would block a plain open for ever
    system, stderr = system_sent(workspace)
    assert "PRIVATE KEY" not in system and "Project instructions" not in system
    assert "warning: not read: AGENTS.md" in stderr and "warning: not read: CLAUDE.md" in stderr
