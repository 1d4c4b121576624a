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
`https://` port 443), then the default. The key: `TINYHARNESS_API_KEY`, then `OPENAI_API_KEY`. Each
value remembers where it came from, and `tinyharness doctor` says it.

What it cannot do. It reads the names, not the user's intent: an `OLLAMA_HOST=0.0.0.0` set for a
server to listen everywhere is taken as where to connect (which works on the same machine).
"""
import argparse
import os

# after the flag, in this order
ENDPOINT_VARIABLES = ("TINYHARNESS_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST")
KEY_VARIABLES = ("TINYHARNESS_API_KEY", "OPENAI_API_KEY")
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


def api_key(environ=None):
    """The key sent as a Bearer token: TINYHARNESS_API_KEY, else OPENAI_API_KEY, else None."""
    environ = os.environ if environ is None else environ
    return next((environ[name] for name in KEY_VARIABLES if environ.get(name)), None)


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
                             "%(default)s). The key sent as a Bearer token: env "
                             "TINYHARNESS_API_KEY, else OPENAI_API_KEY")
    parser.set_defaults(base_url_source=source if source == "default" else f"env {source}")
