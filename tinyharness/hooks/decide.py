"""What a command hook's exit code and output decide (hooks/commands.py runs the hooks; this reads
their answers).

Exit 2 blocks with stderr as the reason; another exit code, a timeout or output that is not UTF-8
blocks too (fail closed). Exit 0 with empty stdout allows. A JSON object on stdout decides by its
fields: ours (`{"decision": "block", "reason": ...}`) or Claude Code's
(`hookSpecificOutput.permissionDecision` allow|deny|ask, the older approve|block). `"continue":
false` ends the whole run (Claude Code stops processing): the call is refused and its `stopReason`
is said to the user (`stop` below; the loop stops before the next model call, edges.py).
`systemMessage` is a line for the user, whatever the decision. For `post_tool_use`, `pre_compact`,
`user_prompt_submit` and `session_start` plain output is text for the model (or context for the
task); an object that carries none of the decision keys is text too (a linter's JSON report). For
`pre_tool_use` and `stop`, plain text (not JSON) with exit 0 is no objection, as in Claude Code: the
text is shown to the user, not given to the model. What cannot be read where a decision belongs -
output that starts like JSON (`{`, `[`) but does not parse, an unknown decision, `updatedInput` -
blocks: a policy we cannot read is a policy that says no.
"""
import json
from dataclasses import dataclass

MAX_OUTPUT = 4000  # characters of a hook's stdout/stderr kept for the model


@dataclass
class Verdict:
    allowed: bool
    reason: str = ""   # why it was blocked, for the model
    output: str = ""   # a post_tool_use hook's stdout, or context for the task, for the model
    hook: str = ""     # which command decided, for the user
    ask: str = ""      # a hook asks that the user confirm this call (its reason), see "Deciding"
    own: bool = False  # the hook that decided is from the user's own file, not the workspace's
    shown: str = ""    # plain text of a pre_tool_use or stop hook: for the user, not the model
    message: str = ""  # Claude's systemMessage: a line for the user
    stop: str = ""     # Claude's "continue": false: the run ends; this (its stopReason) says why



def verdict_of(event, command, code, out, err, timeout, confined=False):
    """What a finished (or timed-out: code None) hook decided, from its exit code and output."""
    if code is None:
        return Verdict(False, f"the hook `{command}` did not finish within {timeout:g} s, so "
                              "the call is refused (a hook that fails must not open the door)",
                       hook=command)
    try:
        out, err = out.decode("utf-8").strip(), err.decode("utf-8").strip()
    except UnicodeDecodeError:
        return Verdict(False, f"the hook `{command}` wrote output that is not UTF-8 text, so "
                              "the call is refused", hook=command)
    if code == 2:
        return Verdict(False, err[:MAX_OUTPUT]
                       or f"the hook `{command}` refused it (exit 2, no reason given)",
                       hook=command)
    if code != 0:
        sandboxed = (" It ran in the sandbox (no network, no home folder but the programs on your "
                     "PATH, writes only in the workspace): \"sandbox\": false in its entry runs it "
                     "unconfined.") if confined else ""
        return Verdict(False, f"the hook `{command}` failed with exit code "
                              f"{code}{': ' + err[:500] if err else ''}, so the call is "
                              "refused (fail closed: Claude Code would have let it "
                              f"run).{sandboxed}", hook=command)
    return decision(event, out, command)


def decision(event, out, command):
    """Exit 0: what the hook's stdout says, by event. Anything unreadable where a decision belongs
    blocks."""
    text_events = ("post_tool_use", "pre_compact", "user_prompt_submit", "session_start")
    data = parse_object(out, text_allowed=event in text_events)
    # their plain output is text for the model (context for a task, as in Claude Code)
    if event in text_events:
        if data is None:
            return Verdict(True, output=out[:MAX_OUTPUT], hook=command)
        verdict = json_decision(data, command)
        if verdict.allowed:
            verdict.output = additional_context(data)
        return verdict
    if not out:
        return Verdict(True, hook=command)
    if data is None and out.lstrip().startswith(("{", "[")):  # meant as a decision: unreadable
        return Verdict(False, f"the hook `{command}` printed JSON that cannot be read as a "
                              f"decision ({out[:120]!r}), so the call is refused", hook=command)
    if data is None:  # a friendly line with exit 0: no objection, as in Claude Code; shown
        return Verdict(True, hook=command, shown=out[:MAX_OUTPUT])
    return json_decision(data, command)


DECISION_KEYS = {"decision", "reason", "hookSpecificOutput", "continue", "stopReason",
                 "suppressOutput", "systemMessage"}


def parse_object(out, text_allowed=False):
    """The JSON object the hook printed, or None when it printed no object. Where text is allowed,
    an object without any of the decision keys is text too (a linter's JSON report for the
    model)."""
    if not out:
        return None
    try:
        data = json.loads(out)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or (text_allowed and not DECISION_KEYS & set(data)):
        return None
    return data


ALLOW, BLOCK = ("allow", "approve"), ("block", "deny")


def json_decision(data, command):
    """The verdict of a JSON answer, with its systemMessage (a line for the user) whatever it
    decides."""
    verdict = json_verdict(data, command)
    message = data.get("systemMessage")
    verdict.message = str(message)[:MAX_OUTPUT] if message else ""
    return verdict


def json_verdict(data, command):
    """Ours: {"decision": "block"|"allow", "reason"}. Claude Code's:
    hookSpecificOutput.permissionDecision allow|deny|ask with permissionDecisionReason, "continue":
    false (the run ends, its stopReason said), the older decision approve|block. A decision this
    code does not know blocks: a policy we cannot read is a policy that says no."""
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    why = specific.get("permissionDecisionReason") or data.get("reason") or data.get("stopReason")
    why = str(why) if why else ""
    if data.get("continue") is False:
        stop = str(data.get("stopReason") or why or f"the hook `{command}` said not to continue")
        return Verdict(False, stop[:MAX_OUTPUT], hook=command, stop=stop[:MAX_OUTPUT])
    if "updatedInput" in specific:
        return Verdict(False, f"the hook `{command}` rewrote the call's input (updatedInput), "
                              "which tinyharness does not support, so the call is refused",
                       hook=command)
    decisions = [str(value).lower() if isinstance(value, str) else value
                 for value in (data.get("decision"), specific.get("permissionDecision"))
                 if value is not None]
    for value in decisions:
        if value in BLOCK:
            return Verdict(False, why or f"the hook `{command}` blocked it", hook=command)
        if value != "ask" and value not in ALLOW:
            return Verdict(False, f"the hook `{command}` gave the decision "
                                  f"{json.dumps(value)[:40]}, which is not allow, deny, ask or "
                                  "block, so the call is refused", hook=command)
    if "ask" in decisions:
        return (Verdict(True, hook=command,
                        ask=why or f"the hook `{command}` asks you to confirm this call"))
    return Verdict(True, hook=command)


def additional_context(data):
    specific = data.get("hookSpecificOutput")
    context = specific.get("additionalContext") if isinstance(specific, dict) else None
    return str(context)[:MAX_OUTPUT] if context else ""
