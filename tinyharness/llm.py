"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
the assistant message and the token usage. Switching from Ollama to llama.cpp, vLLM or a cloud
API means changing base_url and model, nothing else.

With stream=True the server sends its answer as server-sent events (SSE): one `data: {json}` line
per small piece, then `data: [DONE]`. We print text as it arrives (through the on_text callback)
and assemble the pieces into the same message a non-streaming call returns, so the loop never
knows the difference.
"""
import json

import requests

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"

# Where servers put a model's reasoning: Ollama /v1 says `reasoning`, llama.cpp and DeepSeek-style
# APIs `reasoning_content`, Ollama's native API `thinking` (recent vLLM sends both of the first two).
REASONING_FIELDS = ("reasoning", "reasoning_content", "thinking")
# Reasoning sent back with tool results stays on the assistant message under the name the server
# used, because each server reads back the name it writes: Ollama's /v1 maps an incoming
# `reasoning` to the model's thinking (openai/openai.go, FromChatRequest); llama.cpp reads
# `reasoning_content` (common/chat.cpp, common_chat_msgs_parse_oaicompat); recent vLLM writes both
# names and reads `reasoning` (vllm#38488). Chat templates use it: Qwen3 keeps the reasoning of the
# assistant turns after the last user message (the tool-call chain), gpt-oss needs it between tool
# calls. Reasoning found only in <think> tags is stored as `reasoning` (Ollama first; unknown
# fields are ignored by the others).
DEFAULT_REASONING_FIELD = "reasoning"


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class Client:
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600,
                 stream=False, on_text=None, on_reasoning=None):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout = timeout  # a cold model can take a minute or more to load
        self.stream = stream
        self.on_text, self.on_reasoning = on_text, on_reasoning  # defaults for chat(); used when streaming

    def chat(self, messages, tools=None, on_text=None, on_reasoning=None):
        """Send the conversation; return (assistant message, usage).

        When streaming, on_text(piece) and on_reasoning(piece) are called as the answer arrives."""
        body = {"model": self.model, "messages": messages, **({"tools": tools} if tools else {})}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        if self.stream:
            return self.chat_streaming(body, headers, on_text or self.on_text, on_reasoning or self.on_reasoning)
        try:
            response = requests.post(self.url, json=body, headers=headers, timeout=self.timeout)
            raw = response.content  # reading the whole body here surfaces a connection dropped mid-answer
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, self.timeout)) from None
        if response.status_code != 200:
            raise LLMError(explain_status(response.status_code, excerpt(raw), self.url, self.model))
        return self.parse_completion(raw)

    def parse_completion(self, raw):
        """A whole chat.completion body -> (message, usage), with <think> blocks moved out of the text."""
        try:
            data = json.loads(raw.decode("utf-8", errors="replace"))
            message = data["choices"][0]["message"]
            assert isinstance(message, dict)
        except (ValueError, KeyError, IndexError, TypeError, AssertionError):
            raise LLMError(f"The answer from {self.url} is not a chat completion (no JSON with choices[0].message): "
                           f"{excerpt(raw)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?") from None
        usage = data.get("usage")
        return strip_think(message), usage if isinstance(usage, dict) else {}

    # --- Streaming ------------------------------------------------------------------------------

    def chat_streaming(self, body, headers, on_text, on_reasoning):
        # include_usage: the token counts come in one last chunk (OpenAI, Ollama, llama.cpp, vLLM).
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            # stream=True: requests returns after the headers and we read the body line by line.
            # The timeout still applies to every read, so a server that goes silent is noticed.
            with requests.post(self.url, json=body, headers=headers, timeout=self.timeout, stream=True) as response:
                if response.status_code != 200:
                    raise LLMError(explain_status(response.status_code, excerpt(response.content), self.url, self.model))
                return self.read_stream(response, Assembler(on_text, on_reasoning))
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, self.timeout)) from None

    def read_stream(self, response, assembler):
        """Feed the SSE lines to the assembler; fail clearly on an error event or a cut stream."""
        # iter_lines on bytes, decoded per line: a line never ends inside a UTF-8 character, so a
        # character cut between two network reads is put back together before decoding. Each HTTP
        # chunk is handed over as it arrives (Ollama, llama.cpp and vLLM stream chunked bodies).
        lines = response.iter_lines()
        event, done, first = None, False, True
        try:
            for raw_line in lines:
                line = raw_line.decode("utf-8", errors="replace")
                if not line.strip():
                    event = None            # a blank line ends one event
                    continue
                if first and line.lstrip().startswith("{"):
                    # The server ignored stream=true and sent a whole completion: take it as it is.
                    message, usage = self.parse_completion(b"\n".join([raw_line, *lines]))
                    return assembler.replay(message), usage
                first = False
                field, _, value = line.partition(":")
                value = value.strip()
                if field == "event":
                    event = value
                elif field == "error":      # older llama.cpp: `error: {...}` instead of a data line
                    raise LLMError(self.explain_stream_error(value))
                elif field == "data" and value == "[DONE]":
                    done = True
                    break
                elif field == "data":
                    chunk = self.parse_chunk(value)
                    if event == "error" or chunk.get("error") is not None:
                        raise LLMError(self.explain_stream_error(chunk.get("error", chunk)))
                    assembler.add_chunk(chunk)
                # other lines (": keep-alive" comments, id:, retry:) carry nothing for us
        except requests.exceptions.RequestException as e:
            if "timed out" in str(e):
                raise LLMError(f"The model server at {self.url} stopped sending its streamed answer for "
                               f"{self.timeout} s. It may be overloaded or stuck; check its log and try again.") from None
            done = False
        assembler.finish()
        if not done or assembler.finish_reason is None:
            missing = "[DONE]" if assembler.finish_reason else "a finish_reason"
            raise LLMError(f"The streamed answer from {self.url} ended before {missing}: the stream broke part-way. "
                           "The server may have crashed or run out of memory; check its log and try again.")
        return assembler.message(), assembler.usage

    def parse_chunk(self, value):
        try:
            chunk = json.loads(value)
            assert isinstance(chunk, dict)
            return chunk
        except (ValueError, AssertionError):
            raise LLMError(f"The stream from {self.url} sent a piece that is not a JSON object: "
                           f"{excerpt(value.encode())!r}. Does --base-url point at an OpenAI-compatible "
                           "/v1 endpoint?") from None

    def explain_stream_error(self, error):
        """llama.cpp reports e.g. a context overflow as an error event inside a 200 stream."""
        if isinstance(error, str):
            try:
                error = json.loads(error)
            except ValueError:
                pass
        if isinstance(error, dict) and "error" in error:
            error = error["error"]
        message = (error.get("message") or json.dumps(error)) if isinstance(error, dict) else str(error)
        return f"The server at {self.url} reported an error in the middle of its streamed answer: {message}. Check the server's log."


class Assembler:
    """Puts a streamed answer back together: text, reasoning, tool calls, finish_reason, usage."""

    def __init__(self, on_text=None, on_reasoning=None):
        self.on_text, self.on_reasoning = on_text, on_reasoning
        self.text, self.reasoning, self.reasoning_field = [], [], None
        self.calls, self.latest, self.last_index = [], {}, 0   # latest: index -> the call being built there
        self.think = ThinkSplitter()
        self.finish_reason, self.usage = None, {}

    def add_chunk(self, chunk):
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]          # with include_usage it comes last, once
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            self.add_reasoning(delta)
            if isinstance(delta.get("content"), str):
                self.add_content(delta["content"])
            for fragment in delta.get("tool_calls") or []:
                if isinstance(fragment, dict):
                    self.add_tool_call(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def add_content(self, text):
        for is_reasoning, piece in self.think.feed(text):
            self.emit(is_reasoning, piece)

    def add_reasoning(self, delta):
        # One field per chunk: a server that sends the same text under two names is counted once.
        field = next((f for f in REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        if field:
            self.reasoning_field = self.reasoning_field or field
            self.emit(True, delta[field])

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
        """Fragments are keyed by index *and* id: Ollama may send several calls all at index 0,
        each with its own id; fragments without an id continue the latest call at their index."""
        index = fragment.get("index")
        index = self.last_index if index is None else index
        call_id = fragment.get("id")
        call = self.latest.get(index)
        if call is None or (call_id and call["id"] and call_id != call["id"]):
            call = {"id": call_id, "name": "", "arguments": []}
            self.calls.append(call)
            self.latest[index] = call
        elif call_id and not call["id"]:
            call["id"] = call_id
        self.last_index = index
        function = fragment.get("function") or {}
        if function.get("name") and not call["name"]:
            call["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["arguments"].append(arguments)
        elif arguments is not None:          # a whole object at once: it is all the arguments
            call["arguments"] = [json.dumps(arguments, ensure_ascii=False)]

    def finish(self):
        for is_reasoning, piece in self.think.flush():
            self.emit(is_reasoning, piece)

    def replay(self, message):
        """A whole message (a server that did not stream): show it through the same callbacks."""
        field = next((f for f in REASONING_FIELDS if isinstance(message.get(f), str) and message[f]), None)
        if field and self.on_reasoning:
            self.on_reasoning(message[field])
        if isinstance(message.get("content"), str) and message["content"] and self.on_text:
            self.on_text(message["content"])
        return message

    def message(self):
        """The assembled answer, shaped like a non-streaming one (arguments as a JSON string)."""
        message = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message[self.reasoning_field or DEFAULT_REASONING_FIELD] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["name"], "arguments": "".join(c["arguments"]) or "{}"}} for c in self.calls]
        return message


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
                keep = next((n for n in range(min(len(tag) - 1, len(text)), 0, -1) if tag.startswith(text[-n:])), 0)
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
    """A whole message with <think> blocks in its content: move them to the reasoning field."""
    content = message.get("content")
    if not isinstance(content, str) or ThinkSplitter.OPEN not in content:
        return message
    assembler = Assembler()             # the same rules as when streaming, fed the whole text at once
    assembler.add_content(content)
    assembler.finish()
    field = next((f for f in REASONING_FIELDS if message.get(f)), DEFAULT_REASONING_FIELD)
    reasoning = "\n".join(filter(None, [message.get(field) or "", "".join(assembler.reasoning)]))
    return {**message, "content": "".join(assembler.text), field: reasoning}


def explain_network_error(error, url, timeout):
    if isinstance(error, requests.exceptions.Timeout):
        return (f"The model server at {url} did not answer within {timeout} s. "
                "A large model may still be loading; try again, or try a smaller model.")
    if isinstance(error, requests.exceptions.ConnectionError) and "refused" not in str(error).lower() \
            and any(s in str(error) for s in ("IncompleteRead", "RemoteDisconnected", "aborted")):
        return (f"The model server at {url} closed the connection before its answer was complete. "
                "It may have crashed or run out of memory; check its log and try again.")
    if isinstance(error, (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)):
        return (f"The connection to {url} broke while the answer was being sent. "
                "The server may have crashed or run out of memory; check its log and try again.")
    return (f"Could not connect to the model server at {url}. Is it running? For Ollama, start it with "
            "`ollama serve`; for another server, pass --base-url or set TINYHARNESS_BASE_URL.")


def explain_status(status, body, url, model):
    if status == 404 and "model" in body.lower() and "not found" in body.lower():
        return (f"The server at {url} does not have the model '{model}' (HTTP 404: {body}). "
                f"Pull it with `ollama pull {model}`, or choose another with --model.")
    hint = "Set TINYHARNESS_API_KEY if the server needs a key." if status in (401, 403) else "Check the server's log."
    return f"The server at {url} answered HTTP {status}: {body}. {hint}"


def excerpt(raw, limit=300):
    text = raw.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."
