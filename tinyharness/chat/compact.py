"""Compaction: when a conversation outgrows the window, summarise its past and go on from the
summary.

The problem. The context policies (context.py) cut old tool *results*, which slows the growth of one
run; but a conversation that goes on keeps adding user messages, answers, calls and stubs that no
scissors remove, and fills any window. Past it the server refuses the request, or (Ollama, unless
told `truncate: false`) silently drops the oldest messages after the system prompt, the first task
first.

The mechanism. Before a new user message is sent, the harness looks at the size of the last prompt:
the server's own count (`prompt_tokens` of the last call plus the `completion_tokens` of the reply
now in the history) when it reported one, else our estimate (characters/4 of the messages). Past
`COMPACT_AT` (80%) of the window, or when the user types `/compact`, it asks the model for a
summary, with `SUMMARY_PROMPT` appended to the history exactly as the model last saw it (the same
tools too - the run's own list, extensions.Extensions.tools(), the one place that decides what a
request offers - so the server's prompt cache reuses the whole prefix and the summary costs little
more than its own reply). Then everything between the system prompt and the last `KEEP_TURNS` user
turns is replaced by one user message that starts with `SUMMARY_MARK`. A turn is a message the user
typed and everything that followed it. The session file keeps the summary and every message it
replaced, whole, so nothing is lost on disk; `tinyharness view` marks the summary.

`PRE_COMPACT` is a hook point: a list of functions `hook(messages, workspace) -> str | None`, run
before each summary; what they return is added to the summary instructions ("keep the exact test
command"). A hook that fails is skipped and reported; compaction goes on.

What it cannot do. A summary is lossy by design: what the model leaves out is gone from its view
(the session file still has it, the model does not). It is written by the same model that may be
confused, and a small model may drop the one detail that mattered; facts that must survive belong in
`save_note`, whose file the prompt quotes and which is never cut. A failed or empty summary (an
error, a timeout, an empty reply) keeps the history unchanged and says so. Compaction runs between
user messages, never inside one: within a single long task the context policy's cuts are what keeps
the prompt in the window. The threshold leaves room for the summary request itself (the prompt below
and a reply of about 400 words), so in a small window it fires before 80%. A summary request that
still does not fit is sent once more with every old tool result stubbed; if the history is past the
window even then, only `/clear` or a model with a longer context helps.
"""
from ..context import estimate_tokens, sliding_scissors
from ..filedoor import read_bytes
from ..llm import ContextOverflow, LLMError
from ..tools import NOTES_FILE, schemas

COMPACT_AT = 0.8  # of the context window: compact before sending a user message past this
KEEP_TURNS = 2    # the newest user turns kept whole after the summary
NOTES_QUOTED = 4000  # characters of agent_notes.md quoted in the summary request

SUMMARY_MARK = "[harness] Summary of the conversation so far"
SUMMARY_PROMPT = """[harness] The conversation is getting too long for your context window. Write \
a summary of \
everything above that lets you (or a colleague) carry on without it. Do not call any tools. Use \
these headings:
1. Task: what the user asked for, in their words where it matters, and any later changes to it.
2. Decisions: what was decided and why; what the user accepted or refused.
3. Files: every file read, written or created, with its current state (done, half done, broken).
4. Facts: names, numbers, codes, paths and commands the user gave or that were found, exactly as \
written.
5. Open problems: what is failing, unfinished or uncertain, and the next step.
6. Notes: what save_note holds (quoted below when there is a notes file).
Write plain text, at most about 400 words. The summary will replace the older messages."""


PRE_COMPACT: list = []  # hook(messages, workspace) -> extra instructions for the summary, or None


class CompactionFailed(Exception):
    """No summary came back; the history is unchanged. The message says why, for the user."""


class Compaction:
    """What one compaction did: the new history, the summary message, the messages it replaced,
    the summary call's usage, and notes for the user (a failed hook)."""

    def __init__(self, messages, summary, replaced, usage, notes):
        self.messages, self.summary, self.replaced = messages, summary, replaced
        self.usage, self.notes = usage, notes


def prompt_size(last_usage, messages):
    """(tokens, how we know): what the next prompt holds before the new message. The server's count
    of the last prompt plus the reply it wrote (now part of the history) when it gave them, else our
    estimate."""
    usage = last_usage or {}
    if isinstance(usage.get("prompt_tokens"), int):
        reply = usage.get("completion_tokens")
        return (usage["prompt_tokens"]
                + (reply if isinstance(reply, int) else 0), "counted by the server")
    return estimate_tokens(messages), "estimated"


SUMMARY_REPLY_TOKENS = 600   # a summary of "at most about 400 words", with room to spare


def threshold(window, at=COMPACT_AT):
    """Tokens of history past which to compact: `at` of the window, or less in a small window, so
    that the summary request (the history, the summary prompt, the summary) still fits.
    (`at` above 1 means never, as the benchmark's uncompacted run uses it.)"""
    if at > 1:
        return at * window
    room = estimate_tokens([{"role": "user", "content": SUMMARY_PROMPT}]) + SUMMARY_REPLY_TOKENS
    return max(0, min(at * window, window - room))


def needs_compaction(last_usage, messages, window, at=COMPACT_AT):
    return prompt_size(last_usage, messages)[0] >= threshold(window, at)


def is_user_turn(message):
    """A message the user typed (not a [harness] message, not a summary)."""
    content = message.get("content")
    text = content if isinstance(content, str) else " ".join(
        p.get("text", "") for p in content or [] if isinstance(p, dict))
    return message.get("role") == "user" and not text.startswith("[harness]")


def kept_from(messages, keep_turns=KEEP_TURNS):
    """Where the kept tail starts: the keep_turns-th newest user turn (1 when nothing can be
    replaced)."""
    if keep_turns < 1:
        return len(messages)
    starts = [i for i, m in enumerate(messages) if i > 0 and is_user_turn(m)]
    return starts[-keep_turns] if len(starts) >= keep_turns else 1


def notes_text(workspace, rules=None, said=None):
    """The newest notes (they matter most), through filedoor.py: a link leading out or a FIFO reads
    as none; so does a notes file a Read deny rule (permissions.py) covers, as written or where its
    link leads (looked at before the read and after it), and `said` gets a line naming the rule."""
    refusal = rules and rules.read_refusal(NOTES_FILE)
    try:
        data, _ = (b"", 0) if refusal else read_bytes(NOTES_FILE, NOTES_QUOTED * 4, workspace,
                                                      tail=True)
    except OSError:
        return ""
    refusal = refusal or (rules and rules.read_refusal(NOTES_FILE))
    if refusal:
        if said is not None:
            said.append(f"{NOTES_FILE} is not quoted in the summary request: it {refusal}")
        return ""
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= NOTES_QUOTED else text[-NOTES_QUOTED:]


def run_hooks(messages, workspace):
    """The PRE_COMPACT hooks' extra instructions, and a note for each hook that failed."""
    extra, notes = [], []
    for hook in PRE_COMPACT:
        try:
            text = hook(messages, workspace)
        except Exception as e:  # noqa: BLE001 - a user's hook failing: compact without it
            notes.append(f"the pre_compact hook {getattr(hook, '__name__', hook)} failed "
                         f"({type(e).__name__}: {e}); compacting without it")
            continue
        if text:
            extra.append(str(text))
    return extra, notes


def summary_request(messages, workspace, extra, rules=None, said=None):
    """The history as the model last saw it, plus the summary prompt (and the notes, and the hooks'
    words)."""
    prompt = SUMMARY_PROMPT
    notes = notes_text(workspace, rules, said)
    if notes.strip():
        prompt += f"\n\nThe notes file {NOTES_FILE} (written by save_note) holds:\n{notes.strip()}"
    for text in extra:
        prompt += "\n\n" + text
    return list(messages) + [{"role": "user", "content": prompt}]


def compact(messages, client, workspace, keep_turns=KEEP_TURNS, extra=(), fewer_turns=False,
            on_overflow=None, tools=None, rules=None):
    """Summarise and replace everything before the last `keep_turns` user turns. Returns a
    Compaction; raises CompactionFailed (history untouched) when there is nothing to replace or no
    summary came. `extra`: more instructions for the summary (a pre_compact command hook's output).
    `fewer_turns`: when the last `keep_turns` turns are the whole conversation, keep fewer (down to
    none) rather than nothing to compact: the history is past the threshold and must shrink.
    `on_overflow(ContextOverflow)`: told when the summary request did not fit (chat learns the
    window). `tools`: what the conversation's requests offer, offered again (the prompt cache reuses
    the prefix; None: the built-in tools). `rules`: the run's permission rules (a Read deny keeps
    the notes file out)."""
    start, notes = kept_from(messages, keep_turns), []
    while fewer_turns and start <= 1 and keep_turns > 0:
        keep_turns -= 1
        start = kept_from(messages, keep_turns)
        if start > 1:
            notes.append(f"only the last {keep_turns} turn(s) are kept whole this time: the "
                         "history is too long and keeping more would leave nothing to summarise")
    replaced = messages[1:start]
    if not replaced:
        raise CompactionFailed("nothing to compact: the conversation is no longer than the last "
                               f"{keep_turns} turns, which are always kept whole")
    hooks_extra, hook_notes = run_hooks(messages, workspace)
    notes += hook_notes
    extra = hooks_extra + list(extra)
    request = summary_request(messages, workspace, extra, rules, notes)
    try:
        reply = ask_for_summary(client, request, on_overflow, tools)
    except LLMError as e:
        raise CompactionFailed("the summary request failed, so the history is kept as "
                               f"it was: {e}") from None
    message, usage = reply[0], reply[1]
    text = (message.get("content") or "").strip() if isinstance(message.get("content"), str) else ""
    if not text:
        raise CompactionFailed("the model sent an empty summary, so the history is kept as it was")
    summary = {"role": "user", "content": f"{SUMMARY_MARK} (it replaces {len(replaced)} earlier "
                                          f"messages; the newest turns follow it whole):\n\n{text}"}
    return Compaction(messages[:1] + [summary] + messages[start:], summary, replaced, usage, notes)


def ask_for_summary(client, request, on_overflow=None, tools=None):
    """The summary call. When it does not fit the window, every tool result in the request is
    stubbed (the summary replaces them anyway; the session file keeps them whole) and it is sent
    once more."""
    try:
        return client.chat(request, tools=schemas() if tools is None else tools)
    except ContextOverflow as overflow:
        if on_overflow:
            on_overflow(overflow)
        cut = sliding_scissors(request, keep=0)
        stubbed = sum(a is not b for a, b in zip(request, cut))
        if not stubbed:
            raise LLMError(f"{overflow} (The request held no tool result that could be "
                           "cut.)") from None
    try:
        return client.chat(cut, tools=tools)
    except ContextOverflow as overflow:
        if on_overflow:
            on_overflow(overflow)
        raise LLMError(f"{overflow} (This was after stubbing {stubbed} tool result(s) of the "
                       "request and trying once more.)") from None
