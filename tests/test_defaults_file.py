"""The defaults file (issue 39, 9): `$XDG_CONFIG_HOME/tinyharness/config.toml` gives the model, the base
URL, the API and run flags' defaults; a flag beats its TINYHARNESS_* variable, which beats the file, which
beats the built-in default; `tinyharness doctor` says where each came from. Each case runs the real command
(`python -m tinyharness ...`) against the scripted servers, in a home folder of its own."""
import os
import subprocess
import sys

import pytest

from tests.ladder import ROOT, calls, tool_call
from tinyharness.testing import ScriptedServer
from tinyharness.testing.fake_ollama import OllamaServer

PY = sys.executable


@pytest.fixture
def home(tmp_path):
    """(workspace, the config file's path, the environment): HOME and XDG_* in tmp_path, no TINYHARNESS_* or
    endpoint variable of the developer's."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    (home / "config" / "tinyharness").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TINYHARNESS_") and k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_HOST")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
               XDG_DATA_HOME=str(home / "data"), XDG_STATE_HOME=str(home / "state"),
               XDG_CACHE_HOME=str(home / "cache"))
    return ws, home / "config" / "tinyharness" / "config.toml", env


def tinyharness(home, *argv, env=None):
    ws, _, base = home
    return subprocess.run([PY, "-m", "tinyharness", *argv], cwd=ws, env={**base, **(env or {})},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          start_new_session=True)


def test_the_file_gives_the_model_the_base_url_and_a_budget(home):
    _, config, _ = home
    with ScriptedServer(script=[calls(tool_call("list_dir", path=".")), calls(tool_call("list_dir", path=".")),
                                "done"]) as server:
        config.write_text(f'# my defaults\nmodel = "llama3.2:3b"\nbase_url = "{server.base_url}"\n'
                          "max_turns = 1\nstream = false\n")
        result = tinyharness(home, "run", "--no-session", "--yes", "list the files")
    assert server.requests, result.stderr
    assert {r["model"] for r in server.requests} == {"llama3.2:3b"}
    assert len(server.requests) == 1 and result.returncode == 3, result.stderr   # max_turns = 1 held
    assert "turns" in result.stdout


def test_a_flag_beats_the_variable_which_beats_the_file(home):
    _, config, _ = home
    config.write_text('model = "from-file"\n')
    seen = {}
    for name, flags, env in (("file", [], {}), ("env", [], {"TINYHARNESS_MODEL": "from-env"}),
                             ("flag", ["--model", "from-flag"], {"TINYHARNESS_MODEL": "from-env"})):
        with ScriptedServer(script=["done"]) as server:
            result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, *flags, "hi", env=env)
        assert result.returncode == 0, result.stderr
        seen[name] = server.requests[0]["model"]
    assert seen == {"file": "from-file", "env": "from-env", "flag": "from-flag"}


def test_the_variable_endpoint_beats_the_file_endpoint(home):
    _, config, _ = home
    config.write_text('base_url = "http://127.0.0.1:9/v1"\n')   # nothing listens on port 9
    with ScriptedServer(script=["done"]) as server:
        result = tinyharness(home, "run", "--no-session", "hi", env={"TINYHARNESS_BASE_URL": server.base_url})
    assert result.returncode == 0 and len(server.requests) == 1, result.stderr


def test_an_unknown_key_and_a_bad_value_are_named_and_the_run_goes_on(home):
    _, config, _ = home
    config.write_text('max_turn = 3\nmax_seconds = "ten"\napi = "openia"\nmodel = "m1"\n')
    with ScriptedServer(script=["done"]) as server:
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "hi")
    assert result.returncode == 0, result.stderr
    assert server.requests[0]["model"] == "m1"                       # the good line still counts
    lines = result.stderr.splitlines()
    assert any("unknown key 'max_turn'" in line and str(config) in line for line in lines), result.stderr
    assert any("max_seconds" in line and '"ten"' in line and "ignored" in line for line in lines), result.stderr
    assert any("api" in line and '"openia"' in line and "auto, openai, ollama" in line for line in lines)


def test_a_token_budget_that_cannot_be_read_is_a_usage_error(home):
    """The one value whose loss is dangerous: without it a run has no token limit at all."""
    _, config, _ = home
    config.write_text('max_tokens = "50k"\n')
    with ScriptedServer(script=["done"]) as server:
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "hi")
    assert result.returncode == 2 and server.requests == [], result.stderr
    assert "max_tokens" in result.stderr and "Traceback" not in result.stderr
    with ScriptedServer(script=["done"]) as server:          # the flag gives the limit: the run goes on
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "--max-tokens", "900", "hi")
    assert result.returncode == 0 and len(server.requests) == 1, result.stderr


def test_a_file_that_is_not_toml_is_named_and_left_out(home):
    _, config, _ = home
    config.write_text('model = "unterminated\n')
    with ScriptedServer(script=["done"]) as server:
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "hi")
    assert result.returncode == 0 and server.requests[0]["model"] == "qwen3:8b", result.stderr
    assert str(config) in result.stderr and "Traceback" not in result.stderr


def test_yes_and_trust_are_never_taken_from_the_file(home):
    ws, config, _ = home
    config.write_text("yes = true\ntrust = true\n")
    with ScriptedServer(script=[calls(tool_call("write_file", path="x.txt", content="hi")), "done"]) as server:
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "write x.txt")
    assert not (ws / "x.txt").exists(), "a defaults file approved a write"
    assert "DENIED" in str(server.requests[-1]["messages"][-1]["content"])
    assert "yes" in result.stderr and "on the command line" in result.stderr


def test_a_link_into_the_workspace_is_not_read(home):
    """The model writes in the workspace: a defaults file that leads there would be the model's."""
    ws, config, _ = home
    (ws / "planted.toml").write_text('model = "the-models-choice"\nsandbox = "off"\n')
    config.symlink_to(ws / "planted.toml")
    with ScriptedServer(script=["done"]) as server:
        result = tinyharness(home, "run", "--no-session", "--base-url", server.base_url, "hi")
    assert result.returncode == 0 and server.requests[0]["model"] == "qwen3:8b", result.stderr
    assert "workspace" in result.stderr and "sandbox off" not in result.stderr


def test_help_says_the_order(home):
    _, config, _ = home
    config.write_text("max_turns = 7\n")
    result = tinyharness(home, "run", "--help")
    text = " ".join(result.stdout.split())
    assert "config.toml" in text and "(default 7)" in text, result.stdout


def test_doctor_says_where_the_model_the_api_and_the_endpoint_came_from(home):
    _, config, _ = home
    with OllamaServer(personality="healthy") as server:
        config.write_text(f'model = "qwen3:8b"\napi = "openai"\nbase_url = "{server.base_url}"\n')
        result = tinyharness(home, "doctor", "--timeout", "30")
    out = result.stdout
    assert "qwen3:8b (from config.toml" in out, out
    assert f"{server.base_url} (from config.toml" in out
    assert "openai (from config.toml" in out and "drop --api openai" not in out
    assert f"remove `api = \"openai\"` from {config}" in out
    assert str(config) in out


def test_doctor_names_the_variable_not_a_flag_never_passed(home):
    with OllamaServer(personality="healthy") as server:
        result = tinyharness(home, "doctor", "--base-url", server.base_url, "--timeout", "30",
                             env={"TINYHARNESS_API": "openai", "TINYHARNESS_API_KEY": "sk-secret"})
    out = result.stdout
    assert "openai (from env TINYHARNESS_API)" in out, out
    assert "drop --api openai" not in out and "unset TINYHARNESS_API" in out
    assert "qwen3:8b (from default)" in out and f"{server.base_url} (from --base-url" in out
    assert "TINYHARNESS_API_KEY" in out and "sk-secret" not in out


def test_the_flat_file_is_read_as_tomllib_reads_it_on_every_python():
    """Python 3.10 without tomli reads the file with tomlread.subset: the same values."""
    tomllib = pytest.importorskip("tomllib")
    from tinyharness.tomlread import subset
    text = ('# a comment\nmodel = "qwen3:8b"  # trailing\nbase_url = \'http://h:1/v1\'\nmax_turns = 1_000\n'
            'max_seconds = 2.5\nstream = true\nthink = false\nname = "a \\"q\\" \\u00e9 # not a comment"\n')
    assert subset(text) == tomllib.loads(text)
    for bad in ('model = "x\n', "model = bare\n", "= 1\n", 'a = "1"\na = "2"\n'):
        with pytest.raises(ValueError):
            subset(bad)
