"""`tinyharness demo`: the notes task end to end, with no model server.

Everything is real except the model: the loop, the tools, the files and the HTTP requests. The
model's five turns are replayed by the scripted server from examples/notes.script.json, so the
demo shows exactly what a harness does around a model, on any machine.

What it cannot do. The replayed model never varies and never errs: the demo shows the harness, not
how well a real model does the task (that is `tinyharness eval`'s job, against a real server).
"""
import shutil
import sys
import tempfile
from pathlib import Path

from .hooks import approve_everything
from .llm import Client
from .loop import RunSettings, Stats, run_agent
from .testing import ScriptedServer, load_script

ROOT = Path(__file__).resolve().parents[1]
TASK = "Find the testing budget in my notes and save it to budget.md."


class NarratingClient:
    """Wraps the real client to announce each model turn before the loop acts on it. (The loop
    itself shows each call's result, on the `->` line under it.)"""

    def __init__(self, client, say):
        self.client, self.say, self.turn = client, say, 0

    def __getattr__(self, name):  # everything else (max_reply_tokens, ...) is the real client's
        return getattr(self.client, name)

    def chat(self, messages, tools=None, **options):
        message, usage, finish_reason = self.client.chat(messages, tools, **options)
        self.turn += 1
        calls = message.get("tool_calls") or []
        action = (f"asks for {len(calls)} tool call(s):" if calls
                  else "answers without tool calls, so the loop ends:")
        self.say(f"\nTurn {self.turn} - the model (replayed) {action}")
        return message, usage, finish_reason


def run_demo(say=print, keep=False):
    notes, script_file = ROOT / "examples" / "notes", ROOT / "examples" / "notes.script.json"
    if not notes.is_dir() or not script_file.is_file():
        print("error: the demo needs examples/notes and examples/notes.script.json from a checkout "
              "of the tinyharness repository; run it from there (pip install -e .).",
              file=sys.stderr)
        return 1
    folder = Path(tempfile.mkdtemp(prefix="tinyharness-demo-"))
    try:
        replay(folder / "notes", script_file, say)
    finally:  # a demo that fails or is interrupted leaves nothing behind either
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    if keep:
        say(f"\nThe workspace is kept in {folder}; delete that folder when you are done with it.\n"
            f"Now with a real model: start Ollama (`ollama serve`, `ollama pull qwen3:8b`), then\n"
            f"  cd {folder / 'notes'} && rm budget.md && tinyharness run \"{TASK}\"")
    else:
        say("\nThe workspace was a temporary folder and is gone (`tinyharness demo --keep` keeps "
            "it).\nNow with a real model: start Ollama (`ollama serve`, `ollama pull qwen3:8b`), "
            "then\n  tinyharness course workspace notes ~/notes && cd ~/notes && tinyharness run "
            f"\"{TASK}\"")
    return 0


def replay(workspace, script_file, say):
    shutil.copytree(ROOT / "examples" / "notes", workspace)
    say("tinyharness demo: the notes task, end to end, with no model server.")
    say("The model's turns are REPLAYED from examples/notes.script.json by a scripted server on "
        "127.0.0.1;")
    say("the loop, the tools, the files and the HTTP requests are real.\n")
    say(f"Workspace: {workspace} (a fresh copy of examples/notes)")
    say(f"Task: {TASK}")
    say("The demo approves the write itself, as `tinyharness run --yes` would; without --yes you "
        "are asked\n`Allow write_file({...})? [y/N]` first. The hooks (path guard, command policy) "
        "still check every call.")
    stats = Stats()
    with ScriptedServer(script=load_script(script_file)) as server:
        client = NarratingClient(Client(server.base_url, "replayed-model"), say)
        settings = RunSettings(max_turns=8, echo=say, approve=approve_everything)
        answer = run_agent(TASK, client, workspace, settings, stats)
    say(answer)
    show_written_file(workspace / "budget.md", say)
    say(stats.line())


def show_written_file(path, say):
    if not path.is_file():
        say(f"\n{path.name} was not written.")
        return
    say(f"\n{path.name}, as the write_file tool left it on disk:")
    for line in path.read_text(encoding="utf-8").splitlines():
        say(f"  | {line}")
