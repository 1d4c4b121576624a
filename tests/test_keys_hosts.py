"""Each key to its own host (tinyharness only). OPENAI_API_KEY is the OpenAI SDKs' key: it goes only to an
endpoint that came from OPENAI_BASE_URL or --base-url, never to one from OLLAMA_HOST, TINYHARNESS_BASE_URL
or the default (a local Ollama); TINYHARNESS_API_KEY goes wherever the user points the harness. The scripted
servers record the Authorization header of every model call; `tinyharness doctor` says which key (by its
variable's name, never its value) goes to which host."""
import os
import subprocess
import sys

import pytest

from tests.ladder import FINAL, ROOT, run_stage
from tinyharness.doctor import main as doctor_main
from tinyharness.testing import ScriptedServer
from tinyharness.testing.fake_ollama import OllamaServer

THEIRS, MINE = "sk-openai-secret-of-another-tool", "th-key-for-this-harness"


def where(source, server):
    """(the flags, the environment) that point the harness at SERVER by SOURCE."""
    host = server.base_url.removeprefix("http://").removesuffix("/v1")
    return {"--base-url": (["--base-url", server.base_url], {}),
            "OPENAI_BASE_URL": ([], {"OPENAI_BASE_URL": server.base_url}),
            "TINYHARNESS_BASE_URL": ([], {"TINYHARNESS_BASE_URL": server.base_url}),
            "OLLAMA_HOST": ([], {"OLLAMA_HOST": host})}[source]


def authorizations(server):
    return {headers.get("Authorization") for headers in server.headers}


@pytest.mark.parametrize("source, sent", [("OLLAMA_HOST", None), ("TINYHARNESS_BASE_URL", None),
                                          ("OPENAI_BASE_URL", f"Bearer {THEIRS}"), ("--base-url", f"Bearer {THEIRS}")])
def test_openai_api_key_goes_only_to_an_endpoint_from_openai_base_url_or_the_flag(tmp_path, source, sent):
    with ScriptedServer(["Done."]) as server:
        flags, env = where(source, server)
        done = run_stage(FINAL, tmp_path, "--api", "openai", *flags, "hi", env={**env, "OPENAI_API_KEY": THEIRS})
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 1 and authorizations(server) == {sent}


def test_ollama_host_gets_no_openai_key_on_ollama_s_own_api_either(tmp_path):
    with OllamaServer(script=["Done."]) as server:
        done = run_stage(FINAL, tmp_path, "hi", env={"OLLAMA_HOST": server.root_url.removeprefix("http://"),
                                                     "OPENAI_API_KEY": THEIRS})
    assert done.returncode == 0, done.stderr
    assert "options" in server.requests[0] and authorizations(server) == {None}  # /api/chat, no key


@pytest.mark.parametrize("source", ["OLLAMA_HOST", "TINYHARNESS_BASE_URL", "OPENAI_BASE_URL", "--base-url"])
def test_tinyharness_api_key_goes_wherever_the_user_points_it(tmp_path, source):
    with ScriptedServer(["Done."]) as server:
        flags, env = where(source, server)
        done = run_stage(FINAL, tmp_path, "--api", "openai", *flags, "hi",
                         env={**env, "OPENAI_API_KEY": THEIRS, "TINYHARNESS_API_KEY": MINE})
    assert done.returncode == 0, done.stderr
    assert authorizations(server) == {f"Bearer {MINE}"}


def test_a_chat_keeps_the_same_rule(tmp_path):
    with ScriptedServer(["One.", "Two."]) as server:
        flags, env = where("OLLAMA_HOST", server)
        full = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
        full.update(env, OPENAI_API_KEY=THEIRS, PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(tmp_path / "data"))
        (tmp_path / "ws").mkdir()
        done = subprocess.run([sys.executable, "-m", "tinyharness", "chat", "--api", "openai"], cwd=tmp_path / "ws",
                              input="a\nb\n", capture_output=True, text=True, timeout=60, env=full)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 2 and authorizations(server) == {None}


def test_the_default_endpoint_gets_no_openai_key():
    from tinyharness.endpoint import api_key, key_for
    assert key_for("default", {"OPENAI_API_KEY": THEIRS})[0] is None
    assert key_for("default", {"OPENAI_API_KEY": THEIRS, "TINYHARNESS_API_KEY": MINE})[0] == MINE
    assert api_key("env OPENAI_BASE_URL", {"OPENAI_API_KEY": THEIRS}) == THEIRS
    assert api_key("env OLLAMA_HOST", {"OPENAI_API_KEY": THEIRS}) is None


@pytest.mark.parametrize("source, said", [
    ("OLLAMA_HOST", "no key is sent to {host}: OPENAI_API_KEY goes only to an endpoint from --base-url or "
                    "OPENAI_BASE_URL, and this one came from env OLLAMA_HOST"),
    ("OPENAI_BASE_URL", "OPENAI_API_KEY is sent as a Bearer token to {host}")])
def test_doctor_names_the_key_and_its_host_never_its_value(capsys, monkeypatch, source, said):
    with OllamaServer(personality="healthy") as server:
        flags, env = where(source, server)
        for name in ("TINYHARNESS_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST", "TINYHARNESS_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        for name, value in {**env, "OPENAI_API_KEY": THEIRS}.items():
            monkeypatch.setenv(name, value)
        code = doctor_main(["--model", "qwen3:8b", *flags])
        sent = authorizations(server)
    out = capsys.readouterr().out
    assert code == 0, out
    host = server.root_url.removeprefix("http://")
    assert "INFO  key" in out and said.format(host=host) in out and THEIRS not in out
    assert sent == ({None} if source == "OLLAMA_HOST" else {f"Bearer {THEIRS}"})


def test_doctor_says_when_no_key_is_set(capsys, monkeypatch):
    for name in ("OPENAI_API_KEY", "TINYHARNESS_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with OllamaServer(personality="healthy") as server:
        code = doctor_main(["--model", "qwen3:8b", "--base-url", server.base_url])
    out = capsys.readouterr().out
    assert code == 0 and "no key is sent to" in out and "neither TINYHARNESS_API_KEY nor OPENAI_API_KEY is set" in out


@pytest.mark.parametrize("source, sent", [("OLLAMA_HOST", None), ("OPENAI_BASE_URL", f"Bearer {THEIRS}")])
def test_the_eval_s_runs_keep_the_rule(tmp_path, monkeypatch, capsys, source, sent):
    """The eval hands each run its endpoint as --base-url: the run must not take that for the user's own."""
    from tinyharness import eval as ev
    for name in ("TINYHARNESS_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST", "TINYHARNESS_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedServer(["Done."]) as server:
        for name, value in {**where(source, server)[1], "OPENAI_API_KEY": THEIRS}.items():
            monkeypatch.setenv(name, value)
        code = ev.main(["--models", "m", "--tasks", "fact", "--tier", "easy", "--out", str(tmp_path / "r.json")])
    assert code == 0, capsys.readouterr().err
    assert len(server.requests) >= 1 and authorizations(server) == {sent}
