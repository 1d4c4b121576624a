"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
the assistant message and the token usage. Switching from Ollama to llama.cpp, vLLM or a cloud
API means changing base_url and model, nothing else.
"""
import json

import requests

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class Client:
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout = timeout  # a cold model can take a minute or more to load

    # exercise(m0): Write Client.chat: POST the model, the messages (and the tools, when given) to self.url, and return choices[0].message with the usage, turning every failure into an LLMError that gives advice.
    def chat(self, messages, tools=None):
        """Send the conversation; return (assistant message, usage)."""
        body = {"model": self.model, "messages": messages, **({"tools": tools} if tools else {})}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = requests.post(self.url, json=body, headers=headers, timeout=self.timeout)
            raw = response.content  # reading the whole body here surfaces a connection dropped mid-answer
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, self.timeout)) from None
        if response.status_code != 200:
            raise LLMError(explain_status(response.status_code, excerpt(raw), self.url, self.model))
        try:
            data = json.loads(raw.decode("utf-8", errors="replace"))
            message = data["choices"][0]["message"]
            assert isinstance(message, dict)
        except (ValueError, KeyError, IndexError, TypeError, AssertionError):
            raise LLMError(f"The answer from {self.url} is not a chat completion (no JSON with choices[0].message): "
                           f"{excerpt(raw)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?") from None
        usage = data.get("usage")
        return message, usage if isinstance(usage, dict) else {}


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
