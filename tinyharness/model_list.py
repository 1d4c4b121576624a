"""The server's models: `tinyharness models`, and chat's `/model` without a name.

The problem. `--model` wants a name the server knows, spelled as it spells it (`qwen3:8b`, not
`qwen3-8b`; `llama3.2:3b`, or the file name llama.cpp was started with). A user who does not know it
guesses, and learns from an HTTP 404 after the run has started; a wrong key or a server that is down
shows up the same way, mid-run.

The mechanism. One GET, in the dialect a run would speak (llm/ollama.py's pick_api: `--api`, or
auto's /api/version question): Ollama's native `GET /api/tags` (its `models[].name`), else the
OpenAI-compatible `GET {base URL}/models` (its `data[].id`). It goes through the same client a run
would build (the key by endpoint.py's rule, a `user:password@` of the URL as Basic auth, the
environment's proxy), one name a line on standard output, `* ` before the current model (the one a
run would use: flag, variable, defaults file, default) and two spaces before the others, as `git
branch` marks its current branch; a current model the server does not list is said on standard
error with the command that would get it. Whatever goes wrong is one line, exit 1: nothing answers
(llm.explain_network_error, which names a proxy in the way), 401/403 (whether a key was sent, by its
variable's name, never its value), 404 (the base URL), an answer that is not a model list.

What it cannot do. A server lists what it has, not what it can run: a listed model may still lack
tools or not fit in memory (`tinyharness doctor` asks those). Ollama's cloud library and models not
yet pulled are not listed.
"""
import requests

from .console import printable, warn
from .llm import LLMError, explain_network_error

ASK_TIMEOUT = 10  # seconds: a list is a quick question, even for a busy server


class ModelsError(LLMError):
    """Why the list could not be had, in one line."""


def list_url(client):
    """Where the client's server lists its models: Ollama's /api/tags, else {base URL}/models."""
    if getattr(client, "dialect", "openai") == "ollama":
        return client.url.removesuffix("/api/chat") + "/api/tags"
    return client.url.removesuffix("/chat/completions") + "/models"


def names(client, key_name=None, timeout=ASK_TIMEOUT):
    """The model names the client's server lists, in its order. ModelsError says why not."""
    url = list_url(client)
    headers = {"Authorization": f"Bearer {client.api_key}"} if client.api_key else {}
    try:
        response = client.get(url, headers=headers, auth=client.auth, timeout=timeout)
    except requests.exceptions.RequestException as e:
        raise ModelsError(explain_network_error(e, url, timeout)) from None
    if response.status_code in (401, 403):
        sent = (f"{key_name or 'a key'} was sent and refused" if client.api_key else
                "no key was sent: set TINYHARNESS_API_KEY (OPENAI_API_KEY goes only to a "
                "--base-url or OPENAI_BASE_URL endpoint)")
        raise ModelsError(f"the server at {url} answered HTTP {response.status_code}: it wants a "
                          f"key, and {sent}.")
    if response.status_code == 404:
        raise ModelsError(f"the server answered HTTP 404 at {url}: no model list there; check "
                          "--base-url (an OpenAI-compatible one usually ends in /v1).")
    if response.status_code != 200:
        raise ModelsError(f"the server at {url} answered HTTP {response.status_code}: "
                          f"{response.text[:200]!r}.")
    return parse(response, url)


def parse(response, url):
    """The names in a /api/tags or /models answer; ModelsError for anything else."""
    try:
        body = response.json()
    except ValueError:
        body = None
    items = (body.get("models") if "models" in body else body.get("data")) \
        if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ModelsError(f"the server at {url} did not answer with a model list.")
    found = [item.get("name") or item.get("id") for item in items if isinstance(item, dict)]
    return [name for name in found if isinstance(name, str) and name]


def lines(listed, current):
    """One line a model, the current one marked."""
    return [("* " if name == current else "  ") + name for name in listed]


def missing_note(listed, current, dialect):
    """What to say when the current model is not listed, or None."""
    if current in listed or (dialect == "ollama" and current + ":latest" in listed):
        return None
    get = f"`ollama pull {current}`" if dialect == "ollama" else "another --model"
    return (f"the current model, {current}, is not on this server: {get}, or choose one listed "
            "(--model, TINYHARNESS_MODEL or model in the defaults file).")


def client_for(args):
    """The client a run would build from the flags, in the dialect it would speak (no window
    asked for)."""
    from .defaults import source
    from .endpoint import key_for
    from .llm import Client
    from .llm.ollama import OllamaClient, pick_api
    key, key_name = key_for(source(args, "base_url"))
    client = Client(args.base_url, args.model, api_key=key, timeout=ASK_TIMEOUT)
    if pick_api(args.api, args.base_url, http=client) == "ollama":
        client = client.hand_over(OllamaClient(args.base_url, args.model, api_key=key,
                                               timeout=ASK_TIMEOUT))
    return client, key_name


def models_command(args):
    """`tinyharness models`: 0 with the list, 1 with why not (one line on stderr)."""
    from .flags import base_url_problem
    if problem := base_url_problem(args.base_url, args.base_url_source):
        warn(f"error: {problem}")
        return 2
    client, key_name = client_for(args)
    try:
        listed = names(client, key_name)
    except ModelsError as e:
        warn(f"error: {e}")
        return 1
    for line in lines(listed, args.model):
        print(printable(line), flush=True)
    if not listed:
        warn("note: the server lists no models yet.")
    elif note := missing_note(listed, args.model, getattr(client, "dialect", "openai")):
        warn(f"note: {note}")
    return 0


def chat_lines(client, say):
    """chat's /model without a name: the list, the current one marked (or why there is none)."""
    try:
        listed = names(client, "the key")
    except ModelsError as e:
        say(f"The model is {client.model}; the server's list could not be had: {e}")
        return
    for line in lines(listed, client.model) or ["  (the server lists no models)"]:
        say(line)
    if note := missing_note(listed, client.model, getattr(client, "dialect", "openai")):
        say(f"Note: {note}")
    say("/model NAME talks to another from the next message on.")
