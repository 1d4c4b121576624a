"""Verification: checks that run after a tool call, at the same choke point, on every call.

The model thinking it is done is not evidence that it is done. A check the model has to ask for (a
tool) is optional, and a model that is sure of itself skips it. A hook is not optional:
`post_tool_use` runs after every call that ran, and a hook may add a note to that call's result, so
the model reads the evidence next turn without having asked for it.
"""
import traceback
from pathlib import Path

# failing writes of one file in a row that get checked; aider also stops after 3 fix-up rounds
MAX_ROUNDS = 3


def check_python(workspace, name, args, result, memory):
    """After write_file of a .py file: compile it, and when that fails, say where and what.
    Nothing is added when it compiles, so a good write reads exactly as before."""
    if name != "write_file" or not args["path"].endswith(".py") or not result.startswith("OK:"):
        return None
    path = args["path"]
    failures = memory.setdefault("compile_failures", {})  # file -> failing writes in a row
    key = str((Path(workspace) / path).resolve())  # 'calc.py' and './calc.py' are one file
    if failures.get(key, 0) >= MAX_ROUNDS:
        return None  # the cap was reached and the model was told: this file is no longer checked
    error = compile_error(Path(workspace) / path, path)
    if error is None:
        failures.pop(key, None)  # it compiles: a later failure starts a new count
        return None
    failures[key] = failures.get(key, 0) + 1
    note = f"[harness] {path} was written, but Python cannot compile it:\n{error}"
    if failures[key] == MAX_ROUNDS:
        note += (f"\n[harness] That is {MAX_ROUNDS} writes of {path} in a row that do not compile. "
                 f"The harness stops checking {path} automatically for the rest of this run. Step "
                 "back instead of patching the last error: read the whole file, find the cause, "
                 "or tell the user what stops you.")
    return note


def compile_error(file, shown_as):
    """The compiler's message for a file that does not compile (file, line, what), or None.
    This is the compile step of `python -m py_compile`, without writing a .pyc: no __pycache__
    folder is left in the user's workspace."""
    try:
        compile(file.read_bytes(), shown_as, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte, on older Pythons
        return "".join(traceback.format_exception_only(type(e), e)).rstrip()
    return None


POST_TOOL_USE = [check_python]


def post_tool_use(workspace, name, args, result, memory):
    """Run every post hook on a call that ran; each may append a note to its result. `memory` is one
    dict per run, where a hook keeps what it needs to remember between calls."""
    for hook in POST_TOOL_USE:
        try:
            note = hook(workspace, name, args, result, memory)
        except Exception as e:  # noqa: BLE001 - the call ran; say the check did not, never crash
            note = (f"[harness] the {hook.__name__} check failed ({type(e).__name__}: {e}), so "
                    "this result is unchecked")
        if note:
            result += "\n\n" + note
    return result
