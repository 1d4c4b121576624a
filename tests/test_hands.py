"""Season two's hands through `tinyharness run`: MCP tools, subagents, parallel reads, command hooks,
each passing the same choke point (hooks, permission, results paired by id) as the built-in tools."""
import json
import sys

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call, tool_results
from tinyharness.testing import ScriptedServer
from tinyharness.sandbox import Sandbox

MCP_SERVER = f"{sys.executable} {ROOT / 'tests' / 'mcp_server.py'}"


def run(workspace, *args, script=None, policy=None, tty=None, env=None):
    """`tinyharness run ARGS`; `tty`: the answers typed at its terminal (a pty of its own)."""
    with ScriptedServer(script=script, policy=policy) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, *args, tty=tty, env=env)
    return result, server


def offered(request):
    return {t["function"]["name"] for t in request.get("tools") or []}


def write_mcp_config(workspace, read_only=("echo", "slow")):
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    (workspace / ".tinyharness" / "mcp.json").write_text(json.dumps(
        {"servers": {"t": {"command": MCP_SERVER.split(), "read_only": list(read_only)}}}))


# --- MCP ---------------------------------------------------------------------------------------------

def test_the_model_lists_calls_and_reads_an_is_error_and_a_dead_server_is_withdrawn(workspace):
    script = [calls(tool_call("mcp__t__echo", text="hi"), tool_call("mcp__t__fail")),
              calls(tool_call("mcp__t__crash")),
              "Done."]
    result, server = run(workspace, "--yes", "--mcp", f"t={MCP_SERVER}", "do it", script=script)
    assert result.returncode == 0, result.stderr
    first, second, third = server.requests
    assert {"mcp__t__echo", "mcp__t__add", "mcp__t__tool_4", "read_file", "task"} <= offered(first)
    results = list(tool_results(second).values())
    assert results == ["echo: hi", "ERROR: the tool reported an error: the record is locked"]
    assert "    -> ERROR: the tool reported an error: the record is locked" in result.stdout
    assert "gone" in list(tool_results(third).values())[-1]
    assert not any(name.startswith("mcp__") for name in offered(third))  # withdrawn; the run went on
    assert result.stderr.count("withdrawn") == 1
    assert "prompt_tokens fell" not in result.stderr  # fewer tool schemas is our drop, not a server's cut
    assert result.stdout.strip().splitlines()[-1] == "Done."


def test_an_unknown_tool_is_answered_with_every_tool_on_offer(workspace):
    # The model reads the list to correct itself: the task tool and the MCP tools are tools too.
    script = [calls(tool_call("search_web", query="hi")), "Done."]
    result, server = run(workspace, "--yes", "--mcp", f"t={MCP_SERVER}", "do it", script=script)
    assert result.returncode == 0, result.stderr
    [answer] = tool_results(server.requests[1]).values()
    assert answer.startswith("ERROR: there is no tool named 'search_web'. The tools are: list_dir, read_file")
    assert set(answer.rstrip(".").split(": ", 2)[2].split(", ")) == offered(server.requests[0])


def test_an_mcp_call_asks_permission_unless_the_config_says_read_only(workspace, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    write_mcp_config(workspace)
    script = [calls(tool_call("mcp__t__echo", text="free"), tool_call("mcp__t__add", a=1, b=2)), "Done."]
    # First answer: trust the workspace's mcp.json; second: refuse the add call. echo never asks.
    result, server = run(workspace, "go", script=script, tty="y\nn\n",
                         env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert list(tool_results(server.requests[1]).values()) == [
        "echo: free", "DENIED: the user did not allow this mcp__t__add call, so it did not run."]
    assert "Allow mcp__t__add" in result.stdout and "Allow mcp__t__echo" not in result.stdout


def test_an_untrusted_mcp_config_stops_before_the_first_model_call_even_with_yes(workspace, tmp_path):
    write_mcp_config(workspace)
    result, server = run(workspace, "--yes", "go", script=["Done."], env={"XDG_DATA_HOME": str(tmp_path / "d")})
    assert result.returncode == 2 and "not trusted" in result.stderr
    assert server.requests == []


# --- Subagents ---------------------------------------------------------------------------------------

SECRET = "CHILD-ONLY-CONTENT: the answer is alpha"


def family_policy(child_script, parent_script):
    """The parent and the child talk to one server; the first user message tells them apart."""
    def policy(body, index):
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        own = child_script if first_user.startswith("Read secret.txt") else parent_script
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return own[min(turn, len(own) - 1)]
    return policy


def test_the_parents_requests_never_contain_the_childs_tool_results(workspace):
    (workspace / "secret.txt").write_text(SECRET)
    parent = [calls(tool_call("task", description="Read secret.txt and say which word the answer is.")),
              "The helper says: alpha."]
    child = [calls(tool_call("read_file", path="secret.txt")), "The answer is alpha."]
    result, server = run(workspace, "find it", policy=family_policy(child, parent))
    assert result.returncode == 0, result.stderr
    parents = [r for r in server.requests if r["messages"][1]["content"] == "find it"]
    children = [r for r in server.requests if r not in parents]
    assert len(parents) == 2 and len(children) == 2
    assert all(SECRET not in json.dumps(r) for r in parents)
    assert SECRET in json.dumps(children[1])                       # the child did read it
    assert "task" not in offered(children[0])                      # depth 1: no grandchildren
    assert [m["role"] for m in children[0]["messages"]] == ["system", "user"]  # a fresh context
    task_result = list(tool_results(parents[1]).values())[0]
    assert task_result == ("The answer is alpha.\n"
                           "[subagent] turns=2 tool_calls=1 files written: none")
    assert "turns=4 tool_calls=2" in result.stderr                # the child's calls are paid for too


def test_a_child_stopped_by_its_limit_is_not_confirmed_complete_and_asks_permission_like_the_parent(workspace):
    parent = [calls(tool_call("task", description="Read secret.txt, then write a.txt.")), "I could not finish."]
    child = [calls(tool_call("write_file", path="a.txt", content="x"))] * 5
    result, server = run(workspace, "go", "--subagent-max-turns", "2", policy=family_policy(child, parent),
                         tty="n\nn\n")
    assert result.returncode == 0, result.stderr
    assert not (workspace / "a.txt").exists()
    assert result.stdout.count("Allow write_file") == 2            # the child's writes asked, and were refused
    task_result = list(tool_results(server.requests[-1]).values())[0]
    assert task_result.startswith("NOT confirmed complete: the helper agent was stopped (reached --max-turns 2)")


def test_no_subagents_withholds_the_task_tool(workspace):
    result, server = run(workspace, "--no-subagents", "hi", script=["Hello."])
    assert result.returncode == 0 and "task" not in offered(server.requests[0])


# --- Parallel reads ----------------------------------------------------------------------------------

def test_read_only_calls_of_one_reply_run_together_and_stay_paired(workspace, tmp_path):
    (workspace / "a.txt").write_text("content of a")
    reads = [tool_call("mcp__t__slow", seconds=0.5), tool_call("read_file", path="a.txt"),
             tool_call("mcp__t__slow", seconds=0.5), tool_call("mcp__t__slow", seconds=0.5)]
    write_mcp_config(workspace, read_only=["slow", "peak"])  # the config's word makes them reads
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    for extra, peak in (([], "peak 3"), (["--no-parallel"], "peak 1")):
        script = [calls(*reads), calls(tool_call("mcp__t__peak")), "Done."]
        result, server = run(workspace, *extra, "read", script=script, tty="y\n", env=env)
        assert result.returncode == 0, result.stderr
        sent = server.requests[1]["messages"]
        ids = [c["id"] for c in sent[-5]["tool_calls"]]
        assert [m["tool_call_id"] for m in sent[-4:]] == ids        # in the order of the calls
        assert [m["content"] for m in sent[-4:]] == ["slept", "content of a", "slept", "slept"]
        assert list(tool_results(server.requests[2]).values())[-1] == peak  # how many slow calls overlapped


# --- Command hooks -----------------------------------------------------------------------------------

def trusted_hooks(workspace, tmp_path, hooks):
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    path = workspace / ".tinyharness" / "hooks.json"
    path.write_text(json.dumps(hooks))
    return {"XDG_DATA_HOME": str(tmp_path / "data")}


def test_a_failing_hook_blocks_the_call_and_the_user_sees_which(workspace, tmp_path):
    env = trusted_hooks(workspace, tmp_path, {"pre_tool_use": [{"matcher": "write_file", "command": "exit 1"}]})
    script = [calls(tool_call("write_file", path="a.txt", content="x")), "Done."]
    result, server = run(workspace, "--yes", "go", script=script, tty="y\n", env=env)  # y: trust the file
    assert result.returncode == 0, result.stderr
    assert not (workspace / "a.txt").exists()
    assert list(tool_results(server.requests[1]).values())[0].startswith("BLOCKED: the hook `exit 1` failed")
    assert "[hook] pre_tool_use `exit 1` blocked write_file" in result.stderr


def test_yes_does_not_answer_the_trust_question(workspace, tmp_path):
    env = trusted_hooks(workspace, tmp_path, {"pre_tool_use": [{"command": "true"}]})
    result, server = run(workspace, "--yes", "go", script=["Done."], env=env)  # nobody answers: not trusted
    assert result.returncode == 2 and "was not trusted" in result.stderr and server.requests == []


def test_a_stop_hook_sends_the_model_back_to_work(workspace, tmp_path):
    check = "test -f report.md || { echo 'report.md is missing' >&2; exit 2; }"
    env = trusted_hooks(workspace, tmp_path, {"stop": [{"command": check}]})
    script = ["Done (I think).", calls(tool_call("write_file", path="report.md", content="r")), "Done."]
    result, server = run(workspace, "--yes", "go", script=script, tty="y\n", env=env)
    assert result.returncode == 0, result.stderr
    assert server.requests[1]["messages"][-1]["content"] == (
        "[harness] A stop hook of this workspace says the task is not done yet: report.md is missing")
    assert (workspace / "report.md").exists() and result.stdout.strip().endswith("Done.")


def test_a_pre_compact_hook_can_block_compaction_or_add_to_the_summary_request(workspace, tmp_path):
    from tinyharness.hooks import commands
    from tinyharness.chat import compact
    from tinyharness.chat import ChatSettings, Conversation
    from tinyharness.extensions import Extensions
    from tinyharness.settings import RunSettings
    history = [{"role": "system", "content": "s"}]
    for i in range(4):
        history += [{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": f"done {i}"}]
    for command, compacted in (("echo 'nothing is compacted today' >&2; exit 2", False),
                               ("echo 'Keep the release codename.'", True)):
        (workspace / ".tinyharness").mkdir(exist_ok=True)
        (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps({"pre_compact": [{"command": command}]}))
        hands = Extensions(hooks=commands.CommandHooks(commands.load(workspace), workspace, report=lambda t: None,
                                                       sandbox=Sandbox()))
        with ScriptedServer(script=["The summary."]) as server:
            from tinyharness.llm import Client
            settings = ChatSettings(RunSettings(extensions=hands, warn=lambda text: None), keep_turns=1)
            conversation = Conversation(Client(server.base_url, "m"), str(workspace), settings,
                                        messages=[dict(m) for m in history])
            assert conversation.compact("test") is compacted
        if compacted:
            assert server.requests[0]["messages"][-1]["content"].endswith("Keep the release codename.")
            assert conversation.messages[1]["content"].startswith(compact.SUMMARY_MARK)
        else:
            assert server.requests == [] and len(conversation.messages) == len(history)
