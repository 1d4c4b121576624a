"""Where the model is: the endpoint and the key, from a flag or from the variables a user already
set.

The problem. A user arrives with an environment other tools read: the OpenAI SDKs read
`OPENAI_BASE_URL` and `OPENAI_API_KEY`, Ollama's client and CLI read `OLLAMA_HOST` (`host:port`, the
scheme optional). A harness that reads only its own `TINYHARNESS_*` names talks to the default
`localhost:11434` while the user's server listens elsewhere, or sends no key to a cloud endpoint
that then answers 401 - and nothing says why.

The mechanism. One order, the same for every command: the flag (`--base-url`), then
`TINYHARNESS_BASE_URL`, then `OPENAI_BASE_URL`, then `OLLAMA_HOST` (mapped to `http://host:port/v1`
as Ollama's own client maps it: no scheme means http and port 11434, `http://` alone port 80,
`https://` port 443), then the default. Each value remembers where it came from, and `tinyharness
doctor` says it.

The key goes only to its own host. `TINYHARNESS_API_KEY` is this harness's own: it is sent as a
Bearer token wherever the user points the harness. `OPENAI_API_KEY` is the OpenAI SDKs' key, set
for other tools and other hosts: it is sent only to an endpoint that came from `OPENAI_BASE_URL` or
`--base-url` - never to one from `OLLAMA_HOST` (a model server elsewhere on the network, often over
plain HTTP), `TINYHARNESS_BASE_URL`, or the default (a local Ollama, which wants no key; the OpenAI
SDK's own default is api.openai.com, which is why it sends it there). `tinyharness doctor` says
which key, by its variable's name, goes to which host, or that none does and why.

What it cannot do. It reads the names, not the user's intent: an `OLLAMA_HOST=0.0.0.0` set for a
server to listen everywhere is taken as where to connect (which works on the same machine). A key
given to an endpoint the user named goes there, over plain HTTP if the URL says http.
"""
import argparse
import os
from urllib.parse import urlsplit

# after the flag, in this order
ENDPOINT_VARIABLES = ("TINYHARNESS_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST")
KEY_VARIABLES = ("TINYHARNESS_API_KEY", "OPENAI_API_KEY")
# where an endpoint came from when OPENAI_API_KEY may go to it (base_url_source's spelling)
OPENAI_KEY_SOURCES = ("--base-url", "env OPENAI_BASE_URL")
KEY_RULE = ("The key sent as a Bearer token: env TINYHARNESS_API_KEY, wherever it points; else "
            "OPENAI_API_KEY, only to a --base-url or OPENAI_BASE_URL endpoint")
ENDPOINT_ORDER = ("--base-url, else env TINYHARNESS_BASE_URL, else OPENAI_BASE_URL, else "
                  "OLLAMA_HOST (host:port, as `http://host:port/v1`)")


def ollama_host_url(value):
    """Ollama's base URL (no /v1) for an OLLAMA_HOST value, as Ollama's own client reads it."""
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest, port = "http", text, "11434"
    else:
        port = "443" if scheme == "https" else "80"
    hostport, _, path = rest.partition("/")
    host = hostport or "127.0.0.1"
    if hostport.startswith("["):  # [::1]:11500 or [::1]
        inside, _, after = hostport[1:].partition("]")
        host, port = f"[{inside}]", after[1:] if after.startswith(":") and after[1:] else port
    elif hostport.count(":") == 1:
        host, given = hostport.split(":")
        host, port = host or "127.0.0.1", given or port
    elif hostport.count(":") > 1:  # a bare IPv6 address
        host = f"[{hostport}]"
    return f"{scheme}://{host}:{port}" + (f"/{path.strip('/')}" if path.strip("/") else "")


def base_url_from_env(default, environ=None):
    """(the base URL, the name it came from) from the environment, else (default, "default")."""
    environ = os.environ if environ is None else environ
    for name in ENDPOINT_VARIABLES:
        value = environ.get(name, "").strip()
        if value:
            return ((ollama_host_url(value) + "/v1", name) if name == "OLLAMA_HOST"
                    else (value, name))
    return default, "default"


def key_for(source, environ=None):
    """(the key sent as a Bearer token to an endpoint that came from SOURCE - "--base-url",
    "env OPENAI_BASE_URL", "env OLLAMA_HOST", "default"... - or None, the variable it is, or None):
    TINYHARNESS_API_KEY wherever it points; else OPENAI_API_KEY, only to an OpenAI endpoint the user
    named."""
    environ = os.environ if environ is None else environ
    if environ.get("TINYHARNESS_API_KEY"):
        return environ["TINYHARNESS_API_KEY"], "TINYHARNESS_API_KEY"
    if environ.get("OPENAI_API_KEY") and source in OPENAI_KEY_SOURCES:
        return environ["OPENAI_API_KEY"], "OPENAI_API_KEY"
    return None, None


def api_key(source, environ=None):
    """The key sent as a Bearer token to an endpoint that came from SOURCE (key_for), or None."""
    return key_for(source, environ)[0]


def key_said(source, base_url, environ=None):
    """Which key goes to which host, in words, with the variable's name and never its value."""
    environ = os.environ if environ is None else environ
    host = urlsplit(base_url).netloc.rpartition("@")[2] or base_url  # never a user:password@
    name = key_for(source, environ)[1]
    if name:
        plain = " over plain http" if urlsplit(base_url).scheme == "http" else ""
        return (f"{name} is sent as a Bearer token to {host}{plain} (the endpoint came from "
                f"{source}).")
    if environ.get("OPENAI_API_KEY"):
        return (f"no key is sent to {host}: OPENAI_API_KEY goes only to an endpoint from "
                f"--base-url or OPENAI_BASE_URL, and this one came from {source}; set "
                "TINYHARNESS_API_KEY to send a key here.")
    return (f"no key is sent to {host}: neither TINYHARNESS_API_KEY nor OPENAI_API_KEY is set (a "
            "local Ollama needs none).")


class BaseUrlFlag(argparse.Action):
    """--base-url: the value, and that the flag gave it."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.base_url, namespace.base_url_source = values, option_string


def add_base_url_flag(parser, what="OpenAI-compatible endpoint"):
    """--base-url with its default from the environment (read when the parser is built, not at
    import)."""
    from .llm import DEFAULT_BASE_URL
    url, source = base_url_from_env(DEFAULT_BASE_URL)
    parser.add_argument("--base-url", default=url, action=BaseUrlFlag,
                        help=f"{what}: {ENDPOINT_ORDER}, else {DEFAULT_BASE_URL} (now: "
                             f"%(default)s). {KEY_RULE}")
    parser.set_defaults(base_url_source=source if source == "default" else f"env {source}")
