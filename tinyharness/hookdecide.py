"""What a command hook's exit-0 output decides (cmdhooks.py runs the hooks; this reads their
answers).

Exit 0 with empty stdout allows. A JSON object on stdout decides by its fields: ours (`{"decision":
"block", "reason": ...}`) or Claude Code's (`hookSpecificOutput.permissionDecision` allow|deny|ask,
`"continue": false`, the older approve|block). For `post_tool_use`, `pre_compact`,
`user_prompt_submit` and `session_start` plain output is text for the model (or context for the
task); an object that carries none of the decision keys is text too (a linter's JSON report).
Anything that cannot be read where a decision belongs - text, an unknown decision, `updatedInput` -
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
    if data is None:
        return Verdict(False, f"the hook `{command}` printed something that is not a JSON decision "
                              f"({out[:120]!r}), so the call is refused", hook=command)
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
    """Ours: {"decision": "block"|"allow", "reason"}. Claude Code's:
    hookSpecificOutput.permissionDecision allow|deny|ask with permissionDecisionReason, "continue":
    false, the older decision approve|block. A decision this code does not know blocks: a policy we
    cannot read is a policy that says no."""
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    why = specific.get("permissionDecisionReason") or data.get("reason") or data.get("stopReason")
    why = str(why) if why else ""
    if data.get("continue") is False:
        return Verdict(False, why or f"the hook `{command}` said not to continue", hook=command)
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
