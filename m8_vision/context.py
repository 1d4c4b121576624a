"""The context: scissors for old tool results, and a watch on the server's prompt count.

Every tool result stays in the history and is sent again on every later turn, so a ten-turn run
pays for its first file read ten times, and a local model with an 8k window soon runs out of room.
Past its context length Ollama keeps the system prompt and the tool schemas, silently drops the
oldest other messages (the task first), answers HTTP 200, and the model just seems to forget.

The scissors run before each model call: a tool result older than the newest two and longer than
200 characters becomes a short stub that says what was cut and how to get it back. The cut is by
position alone; nothing here reads or judges the content. The watch cannot stop a server from
cutting; it only makes the cut visible.
"""
import json

from .arrival import count_images, without_images

STUB_PREFIX = "[cut by the harness: "
REREADABLE = ("list_dir", "read_file")  # tools that change nothing: calling again is safe
REPEAT_WARNING = "not shown again: running it again would repeat what it did"
CONTEXT_WINDOW = 8192  # tokens, for the warnings only (/v1 cannot set Ollama's length); --context-window changes it


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
    """The message with its content replaced by a note saying what was cut and how to get it back.
    Deterministic: the same message always gives the same stub, so a stub once sent never changes."""
    call = described.get(message.get("tool_call_id"), "a tool call")
    text = f"{STUB_PREFIX}{call} returned {len(message['content']):,} characters; {how_to_get_back(call)}]"
    return {**message, "content": text}


def how_to_get_back(call):
    """Reading again is harmless; running a command again repeats what it did (a second install, a
    second append), so a command's stub must not invite it."""
    return "call it again if you need them" if call.split("(")[0] in REREADABLE else REPEAT_WARNING


# exercise(m5): Write older_results: the positions of the tool results older than the newest `keep` that the model has already seen (those before its last reply).
def older_results(messages, keep):
    """Positions of the tool results older than the newest `keep` that the model has already seen.
    Results added after the model's last reply have never been sent: cutting one would hide it for good."""
    last_reply = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    positions = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    return [i for i in positions[:max(0, len(positions) - keep)] if i < last_reply]


def cuttable(message, limit):
    """A tool result long enough to be worth cutting, and not cut already."""
    content = message.get("content")
    return (message.get("role") == "tool" and isinstance(content, str) and len(content) > limit
            and not content.startswith(STUB_PREFIX))


# exercise(m5): Write sliding_scissors: return a new list in which every old, cuttable tool result is replaced by its stub and every other message is unchanged.
def sliding_scissors(messages, keep=2, limit=200):
    """Stub every tool result older than the newest `keep` that is longer than `limit` characters.

    Runs before every model call, so the window slides: each turn one more old result is cut.
    System, user and assistant messages (with the calls' arguments, and so the notes) are never cut.
    Returns a new list; the input is not changed.
    """
    old = set(older_results(messages, keep))
    described = describe_calls(messages)
    return [stub(m, described) if i in old and cuttable(m, limit) else m for i, m in enumerate(messages)]


IMAGE_TOKENS = 1000  # a picture: sent as base64 (3 MB are 4 MB of text), it costs a few hundred tokens


def estimate_tokens(messages):
    """Characters/4 of the messages as JSON, rounded up: a rough count, no tokenizer needed.
    A picture counts as IMAGE_TOKENS, not as its base64 text."""
    text = json.dumps(without_images(messages), ensure_ascii=False)
    return (len(text) + 4 * IMAGE_TOKENS * count_images(messages) + 3) // 4


class ContextWatch:
    """Reads the server's `usage.prompt_tokens` after each call and warns when the context is (nearly) full.

    - Past `near` (90%) of the window: the next few results may not fit.
    - A *drop* while the conversation grew: the server dropped the oldest messages to fit its context
      length (Ollama does that silently, with HTTP 200, and /v1 cannot tell it the length). The
      scissors shrink the prompt too, so the loop passes `sent_tokens`, its own estimate of the
      request: a drop it made itself is not the server's.
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
            return (f"[context] prompt_tokens fell from {last[0]} to {prompt_tokens} while the conversation "
                    f"grew ({last[1]} -> {message_count} messages): the server probably dropped the oldest "
                    "messages to fit its context length (Ollama does this silently). From now on the model "
                    "may not see the task or the first results.")
        if prompt_tokens >= self.near * self.window:
            if not self.warned_near:
                self.warned_near = True
                return (f"[context] prompt_tokens={prompt_tokens} is {100 * prompt_tokens // self.window}% of "
                        f"the {self.window}-token context window; past it the server may silently drop the "
                        "oldest messages.")
        else:
            self.warned_near = False
        return None
