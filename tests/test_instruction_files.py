"""Instruction files as Claude Code and Codex users write them (tinyharness/instructions.py): CLAUDE.md's
`@path` imports, the chain from the git root down to the folder the run starts in, AGENTS.override.md, the
user's own ~/.codex/AGENTS.md and ~/.claude/CLAUDE.md, CLAUDE.local.md, both AGENTS.md and CLAUDE.md, one
line on stderr saying what was read and skipped - each checked in the system prompt the server received."""
import os

from tests.ladder import FINAL, run_stage
from tinyharness.filedoor import INSTRUCTIONS_CAP
from tinyharness.testing import ScriptedServer


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def system_sent(workspace, home, *args, env=None):
    """(the system prompt the server received, stderr) of `tinyharness run` started in WORKSPACE."""
    with ScriptedServer(["Done."]) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, *args, "hi",
                         env={"HOME": str(home), **(env or {})})
    assert done.returncode == 0, done.stderr
    return server.requests[0]["messages"][0]["content"], done.stderr


def summary(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("[instructions] ")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_claude_md_imports_are_read_relative_to_the_file_and_never_inside_code(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    write(ws / "CLAUDE.md", "Style: see @docs/style.md.\nNot `@docs/span.md`, nor a mail to a@docs/mail.md\n"
                            "```\n@docs/fenced.md\n```\n")
    write(ws / "docs" / "style.md", "STYLE-RULES; more in @../rules/deep.md\n")
    write(ws / "rules" / "deep.md", "DEEP-RULES\n")
    for name in ("span", "fenced", "mail"):
        write(ws / "docs" / f"{name}.md", f"NOT-{name.upper()}\n")
    write(home / ".claude" / "CLAUDE.md", "Mine: @~/notes/mine.md\n")
    write(home / "notes" / "mine.md", "MY-NOTES\n")
    system, stderr = system_sent(ws, home)
    assert "@docs/style.md" in system  # the import stays in the text, as in Claude Code
    assert "Imported by CLAUDE.md (docs/style.md):\nSTYLE-RULES" in system
    assert "Imported by docs/style.md (rules/deep.md):\nDEEP-RULES" in system
    assert "Imported by ~/.claude/CLAUDE.md (~/notes/mine.md):\nMY-NOTES" in system
    assert "NOT-" not in system
    assert system.index("MY-NOTES") < system.index("STYLE-RULES") < system.index("DEEP-RULES")
    assert "docs/style.md (imported by CLAUDE.md)" in summary(stderr)


def test_imports_stop_five_deep_and_a_file_is_read_once(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    write(ws / "CLAUDE.md", "Start @1.md\n")
    for n in range(1, 7):
        write(ws / f"{n}.md", f"LEVEL-{n} @{n + 1}.md @CLAUDE.md\n")
    system, stderr = system_sent(ws, home)
    assert "LEVEL-5" in system and "LEVEL-6" not in system
    assert system.count("Start @1.md") == 1  # the import back to CLAUDE.md is not read again
    line = summary(stderr)
    assert "@6.md in 5.md (deeper than 5 imports)" in line and "@CLAUDE.md in 1.md (the same as CLAUDE.md)" in line


def test_an_import_reaches_nothing_outside_the_project_nor_a_private_place_nor_a_denied_file(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    write(tmp_path / "outside" / "secret.md", "OUTSIDE-SECRET\n")
    write(home / ".ssh" / "id_rsa", "PRIVATE-KEY\n")
    write(home / "notes" / "n.md", "HOME-NOTE\n")
    write(ws / "docs" / "private.md", "DENIED-TEXT\n")
    (ws / "link.md").symlink_to(tmp_path / "outside" / "secret.md")
    write(ws / "CLAUDE.md", "@../outside/secret.md @~/.ssh/id_rsa @~/notes/n.md @link.md @docs/private.md\n")
    write(home / ".claude" / "CLAUDE.md", "@~/.ssh/id_rsa\n")  # the user's own file: the home, but no key
    system, stderr = system_sent(ws, home, "--deny", "Read(docs/private.md)")
    for text in ("OUTSIDE-SECRET", "PRIVATE-KEY", "HOME-NOTE", "DENIED-TEXT"):
        assert text not in system, text
    line = summary(stderr)
    assert "@../outside/secret.md in CLAUDE.md (outside the project" in line
    assert "@~/.ssh/id_rsa in ~/.claude/CLAUDE.md (a private place of the home folder)" in line
    assert "@link.md in CLAUDE.md (refused by the file door)" in line and "link.md leads out of the workspace" in stderr
    assert "docs/private.md is denied by the rule Read(docs/private.md)" in stderr


def test_from_a_subfolder_the_chain_runs_from_the_git_root_down_and_an_override_wins(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    write(tmp_path / "AGENTS.md", "ABOVE-THE-ROOT\n")
    (repo / ".git").mkdir(parents=True)
    write(repo / "AGENTS.md", "ROOT-AGENTS\n")
    write(repo / "CLAUDE.local.md", "ROOT-LOCAL\n")
    write(repo / "pkg" / "AGENTS.md", "PKG-AGENTS\n")
    write(repo / "pkg" / "AGENTS.override.md", "PKG-OVERRIDE\n")
    write(repo / "pkg" / "sub" / ".claude" / "CLAUDE.md", "SUB-CLAUDE\n")
    system, stderr = system_sent(repo / "pkg" / "sub", home)
    assert "ABOVE-THE-ROOT" not in system and "PKG-AGENTS" not in system
    order = [system.index(text) for text in ("ROOT-AGENTS", "ROOT-LOCAL", "PKG-OVERRIDE", "SUB-CLAUDE")]
    assert order == sorted(order), system
    assert "Project instructions (../../AGENTS.md):\nROOT-AGENTS" in system
    assert "Project instructions (.claude/CLAUDE.md):\nSUB-CLAUDE" in system
    assert "../AGENTS.override.md" in summary(stderr)


def test_the_users_own_files_come_first_and_codex_home_is_honoured(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    write(home / ".codex" / "AGENTS.md", "CODEX-GLOBAL\n")
    write(home / ".claude" / "CLAUDE.md", "CLAUDE-GLOBAL\n")
    write(ws / "AGENTS.md", "PROJECT\n")
    system, _ = system_sent(ws, home)
    assert system.index("CODEX-GLOBAL") < system.index("CLAUDE-GLOBAL") < system.index("PROJECT")
    assert "Your own instructions (~/.codex/AGENTS.md):\nCODEX-GLOBAL" in system
    elsewhere = write(tmp_path / "codex-home" / "AGENTS.override.md", "CODEX-HOME-OVERRIDE\n")
    write(elsewhere.parent / "AGENTS.md", "NOT-THIS-ONE\n")
    system, _ = system_sent(ws, home, env={"CODEX_HOME": str(elsewhere.parent)})
    assert "CODEX-HOME-OVERRIDE" in system and "CODEX-GLOBAL" not in system and "NOT-THIS-ONE" not in system


def test_agents_md_and_claude_md_are_both_read_and_one_line_says_what_was_read(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    write(ws / "AGENTS.md", "SHARED-RULES\n")
    write(ws / "CLAUDE.md", "CLAUDE-ONLY\n")
    write(ws / "CLAUDE.local.md", "")
    system, stderr = system_sent(ws, home)
    assert system.index("SHARED-RULES") < system.index("CLAUDE-ONLY")
    line = summary(stderr)
    assert line.startswith("[instructions] read AGENTS.md, CLAUDE.md: 25 of 65,536 bytes"), line
    assert line.endswith("skipped CLAUDE.local.md (empty)"), line
    os.remove(ws / "CLAUDE.md")
    (ws / "CLAUDE.md").symlink_to("AGENTS.md")  # one file for both tools: read once
    system, stderr = system_sent(ws, home)
    assert system.count("SHARED-RULES") == 1 and "CLAUDE.md (the same as AGENTS.md)" in summary(stderr)


def test_the_cap_is_for_all_files_together(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    half = INSTRUCTIONS_CAP // 2 + 1000
    write(ws / "AGENTS.md", "a" * half)
    write(ws / "CLAUDE.md", "b" * half + "CLAUDE-TAIL")
    write(ws / "CLAUDE.local.md", "LOCAL")
    system, stderr = system_sent(ws, home)
    assert "CLAUDE-TAIL" not in system and "LOCAL" not in system
    assert f"[CLAUDE.md is {half + 11:,} bytes; only its first {INSTRUCTIONS_CAP - half:,} bytes were read]" in system
    line = summary(stderr)
    assert f"{INSTRUCTIONS_CAP:,} of {INSTRUCTIONS_CAP:,} bytes" in line and "CLAUDE.local.md (the 64 KiB cap is spent)" in line
