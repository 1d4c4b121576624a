"""Putting a streamed answer back together, piece by piece, into the message a whole answer gives.

The problem. Streamed, a server sends its answer as many small chunks: text and reasoning in pieces,
tool calls as fragments cut differently by every server, the finish reason and the usage at the end.
Some models also write their reasoning into the text inside <think> tags, and a tag can be cut
between two chunks. The loop must see the same message whether the answer was streamed or not.

The mechanism. `Assembler.add_chunk` takes each parsed chunk, passes text and reasoning on to the
caller's callbacks as they arrive (through ThinkSplitter, which holds back what might be the start
of a tag) and builds each tool call at its index, or starts a new one when an id or a second name
says so. `message()` gives the raw message, which llm/reply.py's canonical_message then makes
well-formed. `strip_think` applies the same rules to a whole (unstreamed) answer.

Server-sent events. `sse_items` reads the stream's lines (llm.Client reads the bytes) and says what
each carries: a data piece (and the event it belongs to), the end, an error, a line that is no SSE
at all, or a whole completion from a server that ignored stream=true. The client decides what each
means for the reply.

What it cannot do. It reads no bytes (llm.Client does); a fragment that fits no rule is kept raw for
canonical_message to report, not guessed at.
"""
from .reply import (
    DEFAULT_REASONING_FIELD,
    REASONING_FIELDS,
    as_list_of_calls,
    as_text,
    clean,
    parse_json,
)


class Assembler:
    """Puts a streamed answer back together: text, reasoning, tool calls, finish_reason, usage.

    Tool-call fragments differ by server. OpenAI and vLLM: the first fragment of a call has its
    index, id and name, later ones only the index and a piece of the arguments. llama-cpp-python
    repeats index, id and name in every fragment and sends explicit nulls. Ollama sends each call
    whole, in one fragment, sometimes without an index or with every call at index 0 (each with its
    own id). Some servers send all calls only in the last chunk. So a fragment continues the call
    being built at its index (or the latest call, without an index) unless its id, or a second name,
    says a new call begins. What comes out is a raw message; canonical_message makes it
    well-formed."""

    def __init__(self, on_text=None, on_reasoning=None):
        self.on_text, self.on_reasoning = on_text, on_reasoning
        self.text, self.reasoning, self.reasoning_field = [], [], None
        # at_index: index -> the call built there
        self.calls, self.at_index, self.latest = [], {}, None
        self.think = ThinkSplitter()
        self.finish_reason, self.usage = None, {}

    def add_chunk(self, chunk):
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]          # with include_usage it comes last, once
        choices = chunk.get("choices")
        for choice in (choices if isinstance(choices, list)
                       else [choices] if isinstance(choices, dict) else []):
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            delta = (next((d for d in (choice.get("delta"), choice.get("message"))
                           if isinstance(d, dict)), {}))
            self.add_reasoning(delta)
            if delta.get("content") is not None:
                self.add_content(as_text(delta["content"]))
            for fragment in as_list_of_calls(delta.get("tool_calls")):
                self.add_tool_call(fragment)
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self.finish_reason = clean(choice["finish_reason"])

    def add_content(self, text):
        for is_reasoning, piece in self.think.feed(text):
            self.emit(is_reasoning, piece)

    def add_reasoning(self, delta):
        # One field per chunk: a server that sends the same text under two names is counted once.
        field = next((f for f in REASONING_FIELDS if isinstance(delta.get(f), str)
                      and delta[f]), None)
        if field:
            self.reasoning_field = self.reasoning_field or field
            self.emit(True, clean(delta[field]))

    def emit(self, is_reasoning, piece):
        if is_reasoning:
            self.reasoning.append(piece)
            callback = self.on_reasoning
        else:
            if not self.text and self.think.seen:
                piece = piece.lstrip()      # the blank lines after </think> are not the answer
            if not piece:
                return
            self.text.append(piece)
            callback = self.on_text
        if callback:
            callback(piece)

    def add_tool_call(self, fragment):
        if not isinstance(fragment, dict):
            self.calls.append({"raw": fragment})     # canonical_message will say what was wrong
            return
        index = fragment.get("index") if type(fragment.get("index")) is int else None
        call_id = (fragment.get("id") if isinstance(fragment.get("id"), str) and fragment["id"]
                   else None)
        function = fragment.get("function")
        function = (function if isinstance(function, dict) else {} if function is None
                    else {"bad": function})
        name = function.get("name")
        call = self.call_for(index, call_id, name)
        call["id"] = call["id"] or call_id
        if call["name"] in (None, "") and name is not None:
            call["name"] = name
        if "bad" in function:
            call["bad"] = function["bad"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and isinstance(call["arguments"], list):
            call["arguments"].append(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            call["arguments"] = arguments        # a whole object at once: it is all the arguments

    def call_for(self, index, call_id, name):
        """The call this fragment belongs to, started if it begins a new one."""
        call = self.at_index.get(index) if index is not None else self.latest
        if call is None or self.starts_new_call(call, call_id, name):
            call = {"id": None, "name": None, "arguments": []}
            self.calls.append(call)
        if index is not None:
            self.at_index[index] = call
        self.latest = call
        return call

    @staticmethod
    def starts_new_call(call, call_id, name):
        # an id decides: the same id continues (llama-cpp-python)
        if call_id:
            return bool(call["id"]) and call_id != call["id"]
        if not isinstance(name, str) or not name or not call["name"]:
            return False                          # a piece of arguments continues the call
        # A name again without an id: a new call when it differs or the arguments so far are
        # complete (Ollama-style whole calls without ids); a repeated name while arguments are open
        # continues.
        text = "".join(call["arguments"]) if isinstance(call["arguments"], list) else None
        return name != call["name"] or text is None or isinstance(parse_json(text or "null"), dict)

    def finish(self):
        for is_reasoning, piece in self.think.flush():
            self.emit(is_reasoning, piece)

    def replay(self, message):
        """A whole message (a server that did not stream): show it through the same callbacks."""
        field = (next((f for f in REASONING_FIELDS if isinstance(message.get(f), str)
                       and message[f]), None))
        if field and self.on_reasoning:
            self.on_reasoning(message[field])
        if message["content"] and self.on_text:
            self.on_text(message["content"])
        return message

    def message(self):
        """The assembled answer as a raw message, shaped like a non-streaming one."""
        message: dict = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message[self.reasoning_field or DEFAULT_REASONING_FIELD] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.raw_call(c) for c in self.calls]
        return message

    @staticmethod
    def raw_call(call):
        if "raw" in call:
            return call["raw"]
        arguments = ("".join(call["arguments"]) if isinstance(call["arguments"], list)
                     else call["arguments"])
        function = call["bad"] if "bad" in call else {"name": call["name"], "arguments": arguments}
        return {"id": call["id"], "type": "function", "function": function}


def sse_items(lines):
    """What a stream of server-sent events carries, from its lines (bytes, one iterator), as (kind,
    value, event): ("data", text, the event's `event:` name or None) for each data line; ("done",
    None, None) at `data: [DONE]`, the end; ("error", text, None) for an `error:` line (older
    llama.cpp's way); ("stranger", line, None) for a line that is no SSE at all (a web page where
    the API should be); ("whole", body, None) when the first line opens a JSON object: the server
    ignored stream=true and sent a whole completion (body: all of it, as bytes), the end too.
    Comments (": keep-alive"), id: and retry: carry nothing for us and are skipped."""
    event, first = None, True
    for raw_line in lines:
        line = raw_line.decode("utf-8", errors="replace")
        if not line.strip():
            event = None            # a blank line ends one event
            continue
        if first and line.lstrip().startswith("{"):
            yield "whole", b"\n".join([raw_line, *lines]), None
            return
        first = False
        field, _, value = line.partition(":")
        value = value.strip()
        if field == "event":
            event = value
        elif field == "error":
            yield "error", value, None
        elif field == "data" and value == "[DONE]":
            yield "done", None, None
            return
        elif field == "data":
            yield "data", value, event
        elif field not in ("id", "retry") and not line.startswith(":"):
            yield "stranger", line, None


class ThinkSplitter:
    """Separates <think>...</think> blocks from the text, even when a tag is cut between chunks.

    Some models write their reasoning into the content inside these tags when the server does not
    parse it out; it must never be taken (or printed) as the answer."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self):
        self.inside, self.seen, self.pending = False, False, ""

    def feed(self, text):
        """Return [(is_reasoning, piece), ...] for all that can be decided now."""
        text, self.pending, out = self.pending + text, "", []
        while text:
            tag = self.CLOSE if self.inside else self.OPEN
            at = text.find(tag)
            if at < 0:
                keep = (next((n for n in range(min(len(tag) - 1, len(text)), 0, -1)
                              if tag.startswith(text[-n:])), 0))
                out.append((self.inside, text[:len(text) - keep]))
                self.pending = text[len(text) - keep:]   # maybe the start of a tag: wait for more
                break
            out.append((self.inside, text[:at]))
            text = text[at + len(tag):]
            self.inside = not self.inside
            self.seen = True
        return [(r, p) for r, p in out if p]

    def flush(self):
        """The end of the answer: whatever was held back is what it looked like."""
        rest, self.pending = self.pending, ""
        return [(self.inside, rest)] if rest else []


def strip_think(message):
    """A canonical message with <think> blocks in its content: move them to the reasoning field."""
    if ThinkSplitter.OPEN not in message["content"]:
        return message
    # the same rules as when streaming, fed the whole text at once
    assembler = Assembler()
    assembler.add_content(message["content"])
    assembler.finish()
    field = next((f for f in REASONING_FIELDS if message.get(f)), DEFAULT_REASONING_FIELD)
    reasoning = "\n".join(filter(None, [message.get(field) or "", "".join(assembler.reasoning)]))
    return {**message, "content": "".join(assembler.text), field: reasoning}
