"""Does compaction keep a long conversation in the window, and a fact alive? A scripted measurement.

    python -m benchmarks.compaction

A conversation of 100 messages (after the system prompt) is played through the chat's real
machinery (`tinyharness.chat.Conversation`: run_agent, the tools, the default context policy, the
compaction check before each user message) against `ScriptedServer` with a policy function, in an
8192-token window:

    message 1-2    the user says hello; the model answers
    message 3-4    "Remember: the release codename is BLUE-HERON-4417."; the model answers
    message 5-96   23 times: "Read partN.txt ..." -> a read_file call -> a 2,400-character result -> an answer
    message 97-98  "What is the release codename?" -> the model answers from what it is sent
    message 99-100 the user says thanks; the model answers

The scripted model is honest and mechanical: asked for a summary, it lists every "Remember:" or
"Fact:" line it is sent and the files it read; asked the codename, it answers only if the codename
is somewhere in the request it receives. So the fact survives only if the summaries carry it.
What this measures is the mechanism (when compaction fires, how much it saves, what it costs),
not how well a real model summarises: a real model may drop the fact, which is why facts that
matter belong in save_note.

The same conversation is also played with compaction switched off, to show where the prompt would
have gone. `figures()` returns the numbers as a dict (NOTES.md quotes them).
"""
import contextlib
import io
import re
import shutil
import tempfile
from pathlib import Path

from tinyharness.chat import ChatSettings, Conversation
from tinyharness.chat.compact import SUMMARY_PROMPT
from tinyharness.llm import Client
from tinyharness.context import estimate_tokens as history_tokens
from tinyharness.testing import ScriptedServer
from tinyharness.testing.replies import common_prefix_length, estimate_tokens
from tinyharness.testing.server import prompt_text
from tinyharness.settings import RunSettings

WINDOW = 8192
CODENAME = "BLUE-HERON-4417"
READS = 23
RESULT_CHARS = 2400
ANSWER_CHARS = 900  # characters of each answer's paraphrase
FACT_LINE = re.compile(r"(?:Remember|Fact): ([^\n]+)")


def text_of(message):
    content = message.get("content")
    return content if isinstance(content, str) else ""


def user_messages():
    """The 27 messages the user types; with the answers, calls and results they make 100 messages."""
    yield "Hello, we are preparing a release."
    yield f"Remember: the release codename is {CODENAME}."
    for n in range(1, READS + 1):
        yield f"Read part{n}.txt and tell me its first line."
    yield "What is the release codename?"
    yield "Thanks, that is all for today."


def summary(messages):
    """What the scripted model writes when asked for a summary: every fact line it was sent, the files."""
    facts, files = [], []
    for message in messages:
        for fact in FACT_LINE.findall(text_of(message)):
            if fact not in facts:
                facts.append(fact)
        for name in re.findall(r"part\d+\.txt", text_of(message)):
            if name not in files:
                files.append(name)
    return ("Task: the user is preparing a release and has me read files.\n"
            + "".join(f"Fact: {fact}\n" for fact in facts)
            + f"Files: read {', '.join(files) or 'none'}; all unchanged.\nOpen problems: none.")


def model(body, index):
    """The scripted model: a policy function for ScriptedServer."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "user" and text_of(last).startswith(SUMMARY_PROMPT[:60]):
        return summary(messages[:-1])
    if last["role"] == "tool":  # a chatty answer: answers are never cut by the scissors, only summarised
        lines = text_of(last).split("\n")
        return "Its first line is: " + lines[0][:60] + ". The rest, in short: " + " ".join(lines[1:12])[:ANSWER_CHARS]
    asked = text_of(last)
    wanted = re.search(r"Read (part\d+\.txt)", asked)
    if wanted:
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": wanted.group(1)}}]}
    if "codename" in asked and "?" in asked:
        found = re.search(r"BLUE-HERON-\d+", "\n".join(text_of(m) for m in messages))
        return f"The release codename is {found.group(0)}." if found else "I do not know the codename."
    return "Noted."


def make_workspace(folder):
    for n in range(1, READS + 1):
        line = f"part {n}: release checklist item {n}\n"
        filler = "".join(f"detail {n}.{k}: nothing to report here, all fine\n" for k in range(200))
        (folder / f"part{n}.txt").write_text((line + filler)[:RESULT_CHARS])


def play(compact_at):
    """Play the conversation; return what the server and the conversation saw."""
    folder = Path(tempfile.mkdtemp(prefix="compaction-bench-"))
    try:
        make_workspace(folder)
        with ScriptedServer(policy=model) as server:
            client = Client(server.base_url, "scripted")
            run = RunSettings(max_turns=5, max_seconds=60, shell_timeout=10, approve=lambda prompt: False,
                              context_policy="batch+cap", context_window=WINDOW)
            notices = io.StringIO()
            conversation = Conversation(client, str(folder), ChatSettings(run, compact_at, keep_turns=2))
            with contextlib.redirect_stderr(notices):   # the chat's notices and the loop's warnings
                answers = [conversation.send(text, echo=lambda line: None) for text in user_messages()]
            return server.requests, conversation, answers, notices.getvalue()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def prompt_tokens_of(request):
    return estimate_tokens(prompt_text(request))


def is_summary_request(request):
    return text_of(request["messages"][-1]).startswith(SUMMARY_PROMPT[:60])


def new_tokens(requests, i):
    """Tokens of request i that are not a prefix of request i-1: what a prefix cache must compute."""
    text = prompt_text(requests[i])
    return estimate_tokens(text[common_prefix_length(text, prompt_text(requests[i - 1])) if i else 0:])


def figures():
    """The measurement, as a dict of the numbers NOTES.md quotes."""
    requests, conversation, answers, notices = play(compact_at=0.8)
    summaries = [i for i, r in enumerate(requests) if is_summary_request(r)]
    compactions = re.findall(r"from about (\d+) to (\d+) tokens", notices)
    question = next(r for r in requests if text_of(r["messages"][-1]) == "What is the release codename?")
    original_sent = any(text_of(m).startswith("Remember:") for m in question["messages"])
    plain_requests, plain, _, _ = play(compact_at=100.0)   # never compacts
    sizes = [prompt_tokens_of(r) for r in requests]
    return {
        "window": WINDOW,
        "messages": len(plain.messages) - 1,   # after the system prompt
        "user_messages": len(list(user_messages())),
        "model_calls": len(requests),
        "summary_calls": len(summaries),
        "compactions": len(compactions),
        "tokens_before_after": [(int(a), int(b)) for a, b in compactions],
        "max_prompt_tokens": max(sizes),
        "max_prompt_share": round(max(sizes) / WINDOW, 2),
        "summary_prompt_tokens": sum(sizes[i] for i in summaries),
        "summary_new_tokens": sum(new_tokens(requests, i) for i in summaries),
        "summary_completion_tokens": sum(estimate_tokens(summary(requests[i]["messages"][:-1])) for i in summaries),
        "fact_answer": answers[-2],
        "fact_recalled": CODENAME in answers[-2] and not original_sent,
        "final_history_tokens": history_tokens(conversation.messages),
        "uncompacted_max_prompt_tokens": max(prompt_tokens_of(r) for r in plain_requests),
    }


def main():
    f = figures()
    print(f"A scripted conversation of {f['messages']} messages ({f['user_messages']} typed by the user), "
          f"{f['window']}-token window, compaction at 80%, last 2 turns kept:")
    print(f"  model calls          {f['model_calls']}, of which {f['summary_calls']} for summaries")
    print(f"  summary requests     {f['summary_prompt_tokens']} prompt tokens, of which {f['summary_new_tokens']} "
          f"not a prefix of the request before (what a prefix cache recomputes); "
          f"{f['summary_completion_tokens']} tokens of summaries written")
    for n, (before, after) in enumerate(f["tokens_before_after"], 1):
        print(f"  compaction {n}         history about {before} -> {after} tokens (estimated)")
    print(f"  largest prompt       {f['max_prompt_tokens']} tokens ({f['max_prompt_share']:.0%} of the window); "
          f"without compaction {f['uncompacted_max_prompt_tokens']} "
          f"({f['uncompacted_max_prompt_tokens'] / f['window']:.0%})")
    print(f"  fact from message 3  {'recalled' if f['fact_recalled'] else 'LOST'} after {f['compactions']} "
          f"compactions: {f['fact_answer']!r}")
    return 0 if f["fact_recalled"] and f["max_prompt_share"] < 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
