"""What a user reaches for next (issue 39, 9): `tinyharness models` and chat's `/model` list the server's
models (`/v1/models`, or Ollama's `/api/tags`), the current one marked, and say in one line why not when they
cannot; chat's `/cost`, `/status`, `/permissions` and `/mcp` answer from the chat's own state. Each case runs
the real command (`python -m tinyharness ...`) against the scripted servers, in a home folder of its own;
the chat's messages and commands are piped."""
import json
import re
import sys

from tests.ladder import ROOT
from tests.test_defaults_file import home, tinyharness  # noqa: F401 (a fixture)
from tinyharness.testing import ScriptedServer
from tinyharness.testing.fake_ollama import HEALTHY_MODEL, OllamaServer

TWO = ["qwen3:8b", "llama3.2:3b"]


def chat(home, server, stdin, *flags, env=None):
    ws, _, base = home
    import subprocess
    return subprocess.run([sys.executable, "-m", "tinyharness", "chat", "--base-url", server.base_url, *flags],
                          cwd=ws, env={**base, "TERM": "dumb", **(env or {})}, input=stdin, capture_output=True,
                          text=True, timeout=120, start_new_session=True)


def test_models_lists_the_servers_models_the_current_one_marked(home):
    _, config, _ = home
    config.write_text('model = "llama3.2:3b"\n')                     # the current model, from the defaults file
    with ScriptedServer(script=[], listed=TWO) as server:
        result = tinyharness(home, "models", "--base-url", server.base_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["  qwen3:8b", "* llama3.2:3b"]


def test_models_asks_ollama_for_its_tags(home):
    models = {"qwen3:8b": HEALTHY_MODEL, "gemma3:4b": HEALTHY_MODEL}
    with OllamaServer(models=models) as server:                     # its /v1/models names one model only
        result = tinyharness(home, "models", "--base-url", server.base_url, "--model", "gemma3:4b")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["  qwen3:8b", "* gemma3:4b"]


def test_a_current_model_the_server_lacks_is_said(home):
    with OllamaServer(models={"qwen3:8b": HEALTHY_MODEL}) as server:
        result = tinyharness(home, "models", "--base-url", server.base_url, "--model", "mistral:7b")
    assert result.returncode == 0 and result.stdout.splitlines() == ["  qwen3:8b"]
    assert "mistral:7b" in result.stderr and "ollama pull mistral:7b" in result.stderr


def test_models_says_in_one_line_that_nothing_answers(home):
    with ScriptedServer(script=[]) as server:
        url = server.base_url
    result = tinyharness(home, "models", "--base-url", url, "--api", "openai")   # the port was just freed
    assert result.returncode == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and url in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_models_says_what_a_401_wants_and_never_shows_the_key(home):
    with ScriptedServer(script=[], api_key="sk-right") as server:
        bare = tinyharness(home, "models", "--base-url", server.base_url)
        wrong = tinyharness(home, "models", "--base-url", server.base_url, env={"TINYHARNESS_API_KEY": "sk-wrong"})
        right = tinyharness(home, "models", "--base-url", server.base_url, env={"TINYHARNESS_API_KEY": "sk-right"})
    assert bare.returncode == 1 and "401" in bare.stderr and "no key was sent" in bare.stderr, bare.stderr
    assert "TINYHARNESS_API_KEY" in bare.stderr and len(bare.stderr.strip().splitlines()) == 1
    assert wrong.returncode == 1 and "TINYHARNESS_API_KEY was sent" in wrong.stderr and "sk-wrong" not in wrong.stderr
    assert right.returncode == 0 and right.stdout.splitlines() == ["* qwen3:8b"], right.stderr


def test_chat_model_without_a_name_lists_the_models(home):
    with ScriptedServer(script=[], listed=TWO) as server:
        result = chat(home, server, "/model\n/quit\n")
    assert result.returncode == 0, result.stderr
    assert "* qwen3:8b\n  llama3.2:3b\n" in result.stdout, result.stdout
    assert "/model NAME" in result.stdout


def test_chat_cost_counts_the_servers_tokens_and_turns(home):
    with ScriptedServer(script=["first answer", "second answer"]) as server:
        result = chat(home, server, "hello\nagain\n/cost\n/quit\n")
    assert result.returncode == 0, result.stderr
    stats = [line for line in result.stderr.splitlines() if line.startswith("[stats]")]
    prompt = sum(int(re.search(r"prompt_tokens=(\d+)", line).group(1)) for line in stats)
    completion = sum(int(re.search(r"completion_tokens=(\d+)", line).group(1)) for line in stats)
    assert len(stats) == 2 and prompt > 0
    cost = result.stdout.split("second answer", 1)[1]
    assert "2 messages" in cost and "2 model calls" in cost, cost
    assert f"{prompt} prompt tokens" in cost and f"{completion} completion tokens" in cost
    assert "$0" in cost                       # a local model has no price; nothing is made up


def test_chat_status_says_the_model_the_endpoint_the_session_and_the_window(home):
    ws, _, _ = home
    with ScriptedServer(script=["an answer"]) as server:
        result = chat(home, server, "hello\n/status\n/quit\n", "--context-window", "4000", "--model", "m-x")
    assert result.returncode == 0, result.stderr
    status = result.stdout.split("an answer", 1)[1]
    session = re.search(r"Session (\S+) saved", result.stderr).group(1)
    assert "m-x (from --model)" in status and server.base_url in status, status
    assert "openai" in status and session in status and str(ws) in status
    assert re.search(r"sandbox\s+(on|off)", status)
    prompt = int(re.search(r"prompt_tokens=(\d+)", result.stderr).group(1))
    assert f"{prompt} of 4000 tokens" in status and f"{prompt * 100 // 4000}%" in status


def test_chat_permissions_lists_the_rules_with_their_sources(home):
    ws, _, _ = home
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(./.env)"]}}))
    with ScriptedServer(script=[]) as server:
        result = chat(home, server, "/permissions\n/quit\n", "--allow", "Bash(npm test:*)")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"deny\s+Read\(\./\.env\)\s+\(\.claude/settings\.json\)", out), out
    assert re.search(r"allow\s+Bash\(npm test:\*\)\s+\(--allow\)", out), out
    assert "--yes: off" in out


def test_chat_mcp_lists_the_servers_their_tools_and_their_state(home):
    server_command = f"{sys.executable} {ROOT / 'tests' / 'mcp_server.py'}"
    with ScriptedServer(script=[]) as server:
        result = chat(home, server, "/mcp\n/quit\n", "--mcp", f"notes={server_command}")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"notes\s+running", out) and "mcp__notes__echo" in out, out
    with ScriptedServer(script=[]) as server:
        none = chat(home, server, "/mcp\n/quit\n")
    assert "No MCP servers" in none.stdout


def test_help_lists_the_new_commands(home):
    with ScriptedServer(script=[]) as server:
        result = chat(home, server, "/help\n/quit\n")
    for command in ("/cost", "/status", "/permissions", "/mcp", "/model [NAME]"):
        assert command in result.stdout, command
