"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given); the reply is
{"choices": [{"message": {"role": "assistant", "content": "...", "tool_calls": [...]}, "finish_reason":
"stop"}], "usage": {"prompt_tokens": 20, "completion_tokens": 42}}. Another server: another base_url.

The lesson: the model only emits tokens. The serving layer turns them into this structure: it parses
tool-call text into `tool_calls`, gives each call its id and writes `finish_reason`. So what comes
back is the server's work, and it must not be trusted blindly: wire.py (the armour, read it after
this) rebuilds every reply into one canonical message and turns every failure into advice.
"""
import time

import requests

from .wire import LLMError, completion, explain_network_error, read_body, rebuilt, status_error

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"
# Sent as max_tokens with every request: without a cap one rambling reply can run for minutes, and a
# reply cut here says finish_reason "length", which the loop must never take as a finished answer.
MAX_REPLY_TOKENS = 4096


class Client:
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600,
                 max_reply_tokens=MAX_REPLY_TOKENS):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.max_reply_tokens = model, api_key, max_reply_tokens
        self.timeout = timeout  # a cold model can take a minute or more to load

    # exercise(m0): Write Client.chat: POST the model, the messages, max_tokens (and the tools, when given) to self.url, and return the reply's choices[0] message, usage and finish_reason (rebuilt by wire.py), turning every failure into an LLMError that gives advice.
    def chat(self, messages, tools=None, timeout=None):
        """Send the conversation; return (canonical assistant message, usage, finish_reason).
        timeout, when given, bounds this whole reply (the loop passes the time left of the run)."""
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_reply_tokens,
                **({"tools": tools} if tools else {})}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        wait = self.timeout if timeout is None else max(0.1, min(self.timeout, timeout))
        try:
            with requests.post(self.url, json=body, headers=headers, timeout=wait, stream=True) as response:
                raw = read_body(response, time.monotonic() + wait)
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, wait, wait < self.timeout)) from None
        if response.status_code != 200:
            raise status_error(response.status_code, raw, self.url, self.model)
        data = completion(raw, self.url, self.model)    # the JSON above (wire.py: an LLMError if it is not)
        choice = data["choices"][0]
        return rebuilt(choice["message"], data.get("usage"), choice.get("finish_reason"))  # wire.py: canonical
