"""Context policies: what the harness sends when the conversation outgrows the model's window.

Every tool result stays in the message list and is sent again on every later turn, so a run of
thirty turns pays for its first file read thirty times, and a local model with an 8k window soon
runs out of room (past its window a server refuses the request, or - Ollama, unless told
`truncate: false` - silently drops the oldest messages after the system prompt: the user's task
first). A context policy rewrites the list before each model call.

Everything here is a pure function over an OpenAI-style message list: no I/O, the input is never
mutated, the same input always gives the same output.

The catch is the server's prompt cache. llama.cpp and Ollama keep the work done for the longest
unchanged *prefix* of the previous prompt and recompute everything after the first changed
character. Cutting an old message therefore costs a re-read of everything after it. Three tools:

- `sliding_scissors` (the m5 stage's policy): every turn, stub every result older than the newest
  two. Small context, but the prefix changes on almost every turn, and each change re-reads the
  newest results.
- `batch_scissors`: change nothing until the context passes a high-water mark, then cut old results
  in one go. The prefix breaks now and then instead of every turn. A long run's skeleton (the
  calls and the stubs, which no stub removes) grows a few hundred characters a turn; once it keeps
  the context over the low mark, the oldest turns are collapsed into one summary line, deep, so
  the next cut is again many turns away instead of one turn.
- `cap_on_insert`: shorten a long result (head + tail) *before* the model first sees it. It never
  breaks the prefix, because nothing is changed after it was sent; but the model never sees the
  middle of that result.

What they cost, measured by `python -m benchmarks.context` (a scripted 40-turn coding task,
8192-token window, simulated prefix cache; "work" = tokens the server computes again, 1.00x = never
cutting, which overflows the window by the 12th turn):

    sliding scissors  1.48x the work, 29 prefix breaks
    batch scissors    1.21x, 7 breaks
    batch + cap       0.98x, 4 breaks, always under 90%; 13 of 39 results capped, 28% of the
                      tool output's characters never seen by the model

and by `python -m benchmarks.window_edge` (200 turns of a command printing 400 lines, ~1.9 KB a
result; bytes a prefix cache prefills anew against every message processed once): batch + cap
1.34x the floor, 34 prefix breaks 5-7 turns apart, every request under the window; before the
collapse it was 1.89x, with 164 breaks (every call from the 48th) and every request from the 77th
past the window. Sliding: 2.04x, and past the window too.

Why the cap is needed at 8k: by turn 40 the skeleton fills well over half of the window, so near
the end any scissors cut almost every turn, and every cut re-reads the two newest results. Only
smaller results make those re-reads, and the risk of overflowing, small. The price is information:
a capped file is seen head and tail only, a collapsed turn as a count in the summary line.
`DEFAULT_POLICY` is batch + cap.

What each policy measures of the history (the JSON size of each message) is measured once per
message (`message_chars`), so a turn costs the same at the 200th call as at the first.

The harness must keep what a policy returns as its history (`messages = policy(messages, window)`),
so a result cut once stays cut: `batch_scissors` depends on it (re-applied to the uncut history it
would cut again every turn), and it is what keeps a cut message byte-identical from then on.
"""
import json
import re
from collections import Counter

from .arrival import count_images, without_images
from .tools import record

STUB_PREFIX = "[cut by the harness: "
REPEAT_WARNING = "not shown again: running it again would repeat what it did"
# tokens: --context-window, for the policies and the warnings (/v1 cannot set Ollama's length)
CONTEXT_WINDOW = 8192


# --- The m5 stage's scissors -------------------------------------------------------------------

def describe_calls(messages):
    """tool_call_id -> 'name("arg", ...)', from the assistant messages that asked for the calls."""
    described = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            values = arguments.values() if isinstance(arguments, dict) else []
            shown = ", ".join(json.dumps(short(v), ensure_ascii=False) for v in values)
            described[call.get("id")] = f"{function.get('name', 'a tool')}({shown})"
    return described


def short(value, limit=60):
    """An argument as the stub shows it: long text (a file's content, a long command) abridged."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def stub(message, described):
    """The same message with its content replaced by a note saying what was cut and how to get it
    back.

    Deterministic (the same message gives the same stub), so a stub sent once never changes again.
    """
    # Short on purpose: a stub is sent again on every later turn. (save_note's own description
    # tells the model that notes survive the cut.)
    call = described.get(message.get("tool_call_id"), "a tool call")
    text = (f"{STUB_PREFIX}{call} returned {len(message['content']):,} characters; "
            f"{how_to_get_back(call)}]")
    return {**message, "content": text}


def how_to_get_back(call):
    """Reading again is harmless; running a command again repeats what it did (a second install, a
    second append), so a command's stub must not invite it."""
    tool = record(call.split("(")[0])  # its record says whether calling it again is safe
    return "call it again if you need them" if tool and tool.rereadable else REPEAT_WARNING


def older_results(messages, keep):
    """Positions of the tool results older than the newest `keep` that the model has already seen.
    Results added after the model's last reply have never been sent: cutting one would hide it for
    good."""
    last_reply = (max((i for i, m in enumerate(messages)
                       if m.get("role") == "assistant"), default=-1))
    positions = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    return [i for i in positions[:max(0, len(positions) - keep)] if i < last_reply]


def cuttable(message, limit):
    """A tool result long enough to be worth cutting, and not cut already."""
    content = message.get("content")
    return (message.get("role") == "tool" and isinstance(content, str) and len(content) > limit
            and not content.startswith(STUB_PREFIX))


def sliding_scissors(messages, keep=2, limit=200):
    """Stub every tool result older than the newest `keep` that is longer than `limit` characters.

    Runs before every model call, so the window slides: each turn the third-newest result is cut.
    Other messages (system, user, assistant) are left exactly as they were, and so is every result
    of the latest turn: the model has not seen them yet. Returns a new list.
    """
    old = set(older_results(messages, keep))
    described = describe_calls(messages)
    return ([stub(m, described) if i in old and cuttable(m, limit)
             else m for i, m in enumerate(messages)])


# --- Measuring ---------------------------------------------------------------------------------

# A picture is sent as base64 (a 3 MB photo is 4 MB of text) but costs the model a few hundred image
# tokens: Gemma 3 256, LLaVA 576, Qwen-VL about one per 28x28 pixels. We assume a generous 1,000.
IMAGE_TOKENS = 1000


def json_chars(messages):
    """Characters of the messages as JSON, each picture counted as IMAGE_TOKENS tokens instead of
    its base64. A list's JSON is its messages' JSON joined by ", " in brackets, so the sum of the
    messages' own sizes (each measured once: `message_chars`) is exact."""
    return 2 + sum(message_chars(m) for m in messages) + 2 * max(0, len(messages) - 1)


# id(message) -> (message, its JSON characters). A message is measured once: the loop appends new
# messages and replaces old ones (a stub, a summary), and never edits one in place - that is what
# keeps the server's prefix - so a long history is not encoded again at every turn. The entry holds
# the message itself, so its id cannot be reused while it is remembered.
_MEASURED: dict = {}
_MEASURED_MAX = 20_000


def message_chars(message):
    """The JSON characters of one message (a picture counted as IMAGE_TOKENS tokens)."""
    key = id(message)
    known = _MEASURED.get(key)
    content = message.get("content")
    shape = len(content) if isinstance(content, str) else -1
    if known is not None and known[0] is message and known[2] == shape:
        return known[1]
    size = (len(json.dumps(without_images([message])[0], ensure_ascii=False))
            + 4 * IMAGE_TOKENS * count_images([message]))
    if shape < 0:  # a picture's message is measured each time: the cache holds no pictures
        return size
    if len(_MEASURED) >= _MEASURED_MAX:
        _MEASURED.clear()
    _MEASURED[key] = (message, size, shape)
    return size


def estimate_tokens(messages):
    """Characters/4 of the messages as JSON, rounded up: the scripted server's rule, no
    tokenizer."""
    return (json_chars(messages) + 3) // 4


class ContextWatch:
    """Warns when the server's prompt count says the context is (nearly) full.

    Two signs, both read from `usage.prompt_tokens`:
    - it passes `near` (90%) of the window: the next few results may not fit;
    - it *drops* while the conversation grew: the server cut the prompt to fit its context length.
      Ollama does that silently, with HTTP 200, over /v1 (where the length cannot be set either):
      it keeps the system messages and drops the oldest others, the user's task first. When a
      context policy shrinks the messages itself, pass `sent_tokens` (our own estimate of the
      request) so that drop is not mistaken for the server's. (A server cut on the
      very turn the harness cut too goes unreported; the 90% warning came before it.)
    """

    def __init__(self, window, near=0.9):
        self.window, self.near = window, near
        self.last = None            # (prompt_tokens, message_count, sent_tokens) of the last check
        self.warned_near = False    # warn once per crossing, not on every turn that stays near

    def check(self, prompt_tokens, message_count, sent_tokens=None):
        """Return a warning for stderr, or None."""
        last, self.last = self.last, (prompt_tokens, message_count, sent_tokens)
        if last and prompt_tokens < last[0] and message_count > last[1] \
                and (sent_tokens is None or last[2] is None or sent_tokens >= last[2]):
            return (f"[context] prompt_tokens fell from {last[0]} to {prompt_tokens} while the "
                    f"conversation grew ({last[1]} -> {message_count} messages): the server "
                    "probably dropped the oldest messages to fit its context length (Ollama does "
                    "this silently). From now on the model may not see the task or the first "
                    "results.")
        if prompt_tokens >= self.near * self.window:
            if not self.warned_near:
                self.warned_near = True
                return (f"[context] prompt_tokens={prompt_tokens} is "
                        f"{100 * prompt_tokens // self.window}% of the {self.window}-token context "
                        "window; past it the server may refuse the request or silently drop the "
                        "oldest messages.")
        else:
            self.warned_near = False
        return None


# --- Cache-friendly policies (the final package) -----------------------------------------------

# Batch marks, as fractions of the window. High: the request must stay under 90% of the window
# together with the tool schemas (which `estimate_tokens(messages)` does not see) and the reply,
# so cutting starts at 75%. Low: cut deep. A cut re-reads everything after the first message it
# changes, and what it leaves uncut after that point is re-read too; a deep cut also buys more
# quiet turns before the next one. (At 8192 tokens the skeleton of a long run is past 40% anyway,
# so a cut there stubs every old result; in a larger window 40% keeps the recent story whole.)
HIGH_WATER = 0.75
LOW_WATER = 0.40
# When stubbing cannot reach the low mark and the skeleton (the calls and stubs before the newest
# turns) is over SKELETON_MAX of the window, its oldest turns are collapsed until it is under
# SKELETON_LEFT.
SKELETON_MAX = 0.20
SKELETON_LEFT = 0.05


def batch_scissors(messages, window_tokens, high=HIGH_WATER, low=LOW_WATER, keep=2, limit=200,
                   skeleton_max=SKELETON_MAX, skeleton_left=SKELETON_LEFT, collapsing=True):
    """Change nothing until the messages pass `high` of the window; then stub old tool results,
    oldest first and never the newest `keep` (nor a result the model has not seen yet), until they
    are under `low` of the window.

    Between two cuts the history only grows, so the server's prompt cache reuses all of it;
    a cut breaks the prefix once, and the stubs are the same ones `sliding_scissors` writes, so a
    message cut once is never changed again. When stubbing every old result is not enough (a long
    run's skeleton of calls and stubs has outgrown the low mark), the oldest turns are collapsed
    into one summary line (`collapse`) until the messages are under `collapse_to` of the window:
    one deep cut, so the next is many turns away, instead of a cut at every turn.
    `collapsing=False`: stubs only (the retry after an overflow, whose message says "stubbed").
    """
    chars = json_chars(messages)
    if (chars + 3) // 4 <= high * window_tokens:
        return list(messages)
    out = list(messages)
    described = None
    for i in older_results(out, keep):
        if (chars + 3) // 4 <= low * window_tokens:
            break
        if cuttable(out[i], limit):
            described = described or describe_calls(out)
            cut = stub(out[i], described)
            chars += message_chars(cut) - message_chars(out[i])
            out[i] = cut
    if collapsing and (chars + 3) // 4 > low * window_tokens:
        chars_per_window = 4 * window_tokens
        out = collapse(out, skeleton_max * chars_per_window, skeleton_left * chars_per_window, keep)
    return out


# --- Collapsing the skeleton ---------------------------------------------------------------------

COLLAPSED = "[harness] To keep this conversation in the context window, the harness removed "
COUNTS = re.compile(r"([^\s:,()]+): (\d+)")


def collapse(messages, over_chars, left_chars, keep=2):
    """The messages with the oldest turns of the current task (after the last message the user
    typed) replaced by one summary line, when those turns - the skeleton before the newest ones -
    take more than `over_chars` characters of JSON: turn by turn until they take under
    `left_chars`.

    Only whole turns go (a call never loses its result), never the newest `keep` results' turns nor
    a result the model has not seen. A summary already there is merged into the new one, so there
    is one, and its counts add up. The line says what went (how many calls of which tool) and where
    the work is; what the calls said is gone from the model's view, as from a stub, but the cut is
    at one place and made rarely: the next one is many turns away. Returns a new list."""
    start = skeleton_start(messages)
    stop = collapse_stop(messages, start, keep)
    skeleton = sum(message_chars(m) + 2 for m in messages[start:stop])
    if skeleton <= over_chars:
        return list(messages)
    counts: Counter = Counter()
    end, summary = start, None
    while end < stop and skeleton > left_chars:
        turn_end = end + 1
        while turn_end < stop and messages[turn_end].get("role") == "tool":
            turn_end += 1
        if turn_end < len(messages) and messages[turn_end].get("role") == "tool":
            break                        # it would split a call from its result
        for message in messages[end:turn_end]:
            counts += calls_in(message)
            skeleton -= message_chars(message) + 2
        new = summary_line(counts)
        skeleton += message_chars(new) + 2 - (message_chars(summary) + 2 if summary else 0)
        summary, end = new, turn_end
    if summary is None:
        return list(messages)
    return messages[:start] + [summary] + messages[end:]


def skeleton_start(messages):
    """Where the current task's turns begin: after the last message the user typed."""
    typed = [i for i, m in enumerate(messages) if m.get("role") in ("user", "system")
             and not message_text(m).startswith("[harness]")]
    return typed[-1] + 1 if typed else len(messages)


def collapse_stop(messages, start, keep):
    """The first message a collapse must leave: the turn of the oldest of the newest `keep` results,
    the model's last reply (its results are unseen), a message the user typed."""
    replies = [i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"]
    results = [i for i in range(start, len(messages)) if messages[i].get("role") == "tool"]
    stop = replies[-1] if replies else start
    if keep and len(results) >= keep:
        stop = min(stop, max((i for i in replies if i < results[-keep]), default=start))
    barrier = next((i for i in range(start, len(messages))
                    if messages[i].get("role") in ("user", "system")
                    and not message_text(messages[i]).startswith("[harness]")), len(messages))
    return min(stop, barrier)


def message_text(message):
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def calls_in(message):
    """Tool name -> calls, of an assistant message's calls or of an earlier summary line."""
    if message_text(message).startswith(COLLAPSED):
        return Counter({name: int(n) for name, n in COUNTS.findall(message_text(message))})
    return Counter(str((call.get("function") or {}).get("name") or "a tool")
                   for call in message.get("tool_calls") or [])


def summary_line(counts):
    total = sum(counts.values())
    listed = ", ".join(f"{name}: {n}" for name, n in sorted(counts.items()))
    return {"role": "user", "content": (
        f"{COLLAPSED}the {total} oldest tool call{'s' * (total != 1)} of this task and their "
        f"results ({listed or 'none'}). What they wrote is in the workspace and your notes are in "
        "agent_notes.md; read a file again if you need it (a command run again would repeat what "
        "it did).")}


# A tool's own "N characters omitted" marker (the shell cuts long output head + tail too), and ours.
OMITTED = re.compile(r"\n\[\.\.\. ([\d,]+) characters omitted[^\n]*\]\n")
CAP_MARKER = ("\n[... {} characters omitted by the harness; to see them ask for less: sed -n "
              "40,80p FILE, | head, | tail, | grep ...]\n")


def cap_on_insert(content, max_chars):
    """Shorten a result to at most `max_chars` characters, keeping its head and its tail.

    Apply it when the result is added, before the model has seen it: then nothing that was sent
    ever changes, and the cache keeps working. The price: the model never sees the middle, so the
    marker says how much is missing. Capping a capped result changes nothing. When the middle holds
    a tool's own omission marker (the shell's cut output), the count includes what that one hid,
    so the number the model reads is still the truth about the whole output.
    """
    if len(content) <= max_chars:
        return content
    earlier = [int(found.group(1).replace(",", "")) for found in OMITTED.finditer(content)]
    # the widest the count can be
    room = max(0, max_chars - len(CAP_MARKER.format(len(content) + sum(earlier))))
    start, end = room - room // 2, len(content) - room // 2
    for found in OMITTED.finditer(content):          # never keep half of a marker: drop it whole
        if found.start() < end and found.end() > start:
            start, end = min(start, found.start()), max(end, found.end())
    # a marker's text is not output; the count it carries is
    inside = OMITTED.finditer(content, start, end)
    carried = sum(int(found.group(1).replace(",", "")) - len(found.group(0)) for found in inside)
    omitted = end - start + carried
    return content[:start] + CAP_MARKER.format(omitted) + content[end:]


# A result may take at most this many characters per token of window: 8192 tokens -> 2,867
# characters, about 700 tokens or 9% of the window. (For comparison, coding agents made for 100k+
# windows cap at 10-30k characters.) A smaller cap saves more work and hides more; a larger one
# costs more re-reads and lets the two newest results overflow an 8k window late in a long run (0.5
# did on some of the benchmark's random tasks).
CAP_CHARS_PER_WINDOW_TOKEN = 0.35


def cap_chars(window_tokens):
    return int(window_tokens * CAP_CHARS_PER_WINDOW_TOKEN)


def cap_results(messages, max_chars):
    """`cap_on_insert` over every tool result. Run before each call, it caps each result before
    the model first sees it; results already sent were capped then, so they stay the same."""
    return [{**m, "content": cap_on_insert(m["content"], max_chars)}
            if m.get("role") == "tool" and isinstance(m.get("content"), str)
            and len(m["content"]) > max_chars
            else m for m in messages]


# --- The registry: every policy is policy(messages, window_tokens) -> messages -------------------

def keep_everything(messages, window_tokens):
    return list(messages)


def sliding(messages, window_tokens):
    return sliding_scissors(messages)


def batch(messages, window_tokens):
    return batch_scissors(messages, window_tokens)


def cap(messages, window_tokens):
    return cap_results(messages, cap_chars(window_tokens))


def batch_and_cap(messages, window_tokens):
    return batch_scissors(cap_results(messages, cap_chars(window_tokens)), window_tokens)


POLICIES = ({"none": keep_everything, "sliding": sliding, "batch": batch, "cap": cap,
             "batch+cap": batch_and_cap})
DEFAULT_POLICY = "batch+cap"


# --- After the server said "it does not fit" ------------------------------------------------------

def overflow_cut(messages, prompt_tokens=None, window=None, keep=2, low=LOW_WATER):
    """(messages with old tool results stubbed, how it chose) after a context overflow.

    With the server's numbers (its prompt count and its window) it is the batch policy measured on
    the server's count: our estimate misses the tool schemas and the chat template, so the target
    is moved by what the server counted beyond our estimate. Without numbers (llama-cpp-python's
    empty stream) there is nothing to measure against: every old result but the newest `keep` is
    stubbed. Never cut: the newest `keep` results, results the model has not seen, short ones."""
    if prompt_tokens and window:
        # schemas, template, tokenizer
        beyond = max(0, prompt_tokens - estimate_tokens(messages))
        # low * target = low * window - beyond
        target = window - beyond / low
        # stubs only: a collapse is the policy's, before a call, not the retry's
        return batch_scissors(messages, max(0.0, target), high=0, low=low, keep=keep,
                              collapsing=False), \
            (f"old results stubbed until the server's count would be under {low:.0%} of its "
             f"{window}-token window")
    return sliding_scissors(messages, keep=keep), f"every old result but the newest {keep} stubbed"


def why_nothing_was_cut(messages, keep=2, limit=200):
    """What the overflow cut checked and found, in words, when it could cut nothing."""
    results = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    if not results:
        return ("the history holds no tool result to cut: the prompt is the system prompt, the "
                "task and the tool schemas")
    old = set(older_results(messages, keep))
    stubbed = sum(1 for i in results if str(messages[i].get("content", "")).startswith(STUB_PREFIX))
    short = sum(1 for i in old if not cuttable(messages[i], limit) and not
                str(messages[i].get("content", "")).startswith(STUB_PREFIX))
    parts = [f"{len(results) - len(old)} are the newest (never cut)" if len(results) > len(old)
             else "", f"{stubbed} were cut already" if stubbed else "",
             f"{short} are under {limit} characters" if short else ""]
    return (f"of the {len(results)} tool result(s) in the history, "
            + ", ".join(p for p in parts if p) + "; nothing else could be cut")
