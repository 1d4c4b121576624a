"""One connection per client, kept open between turns.

The problem. A bare `requests.post` opens a new TCP connection for every request: below a
millisecond on localhost, but a TLS handshake per turn against a cloud API or an Ollama on another
machine, and a run of 20 turns opened 23 connections (the probes at start included).

The mechanism. Each client (llm.Client, llm.ollama.OllamaClient) holds one `requests.Session`, made
at its first request (no work at import or construction); the probes at start (/props,
/api/version, /api/show) ride it too, and a client that takes over from another (the native
dialect) is handed it. A streamed answer is read to its very end (`drain`: the closing chunk after
[DONE] or `done: true`), or the connection could not carry the next request.

A request goes through the proxy the user's environment names (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
less NO_PROXY), as every `requests` program's does; `proxy_in_the_way` names it, so that a dead
proxy is not reported as a dead model server.

A `user:password@` in --base-url is sent as Basic auth, as requests sends it, but kept out of the
client's URL, so no message shows it (`masked` hides it in doctor's lines).

What it cannot do. A server that closes the connection (`Connection: close`, a restart, an idle
timeout) costs a new one; a body left unread past `drain`'s cap, or cut by HangUp, is closed with
its connection. One client is used by one thread at a time (the loop and its subagents take turns).
"""
import os
import re
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
import urllib3


class KeepAlive:
    """The client's kept connection: a `requests.Session`, made at the first request. A connection
    the server closed, or one a HangUp cut, is dropped from the pool and the next request opens
    another. `close()` ends it."""

    _session = None
    url: str  # the endpoint: each client sets its own

    def session(self):
        if self._session is None:
            self._session = requests.Session()
        return self._session

    auth = None  # (user, password) from a URL's `user:password@`, kept out of every message

    def post(self, url, **kwargs):
        return self.session().post(url, auth=self.auth, **kwargs)

    def get(self, url, **kwargs):
        """For the start's probes (llm/ollama.py), so they ride the run's one connection."""
        return self.session().get(url, **kwargs)

    def take_credentials(self):
        """Move a `user:password@` out of self.url into self.auth (sent as Basic auth, as requests
        would send it from the URL), so that no error message shows the password."""
        self.url, self.auth = without_credentials(self.url)

    def hand_over(self, other):
        """Give this client's connection to the client that takes over from it (another dialect)."""
        other._session, self._session = self._session, None
        return other

    def close(self):
        session, self._session = self._session, None
        if session is not None:
            session.close()


def drain(response, cap=65536):
    """Read what a stream sends after its end ([DONE], or `done: true`): the closing chunk, so the
    connection goes back to the client's pool for the next request (llm.KeepAlive). A server that
    goes on past `cap` bytes loses the connection instead (closing an unfinished body closes it);
    HangUp still bounds the time."""
    try:
        response.raw.read(cap)
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError,
            ValueError):
        pass  # the answer is whole already; at worst the next request opens a new connection


def proxy_in_the_way(url):
    """'the proxy http://host:port (from HTTP_PROXY)' when a request to `url` goes through one,
    else None. The password in a proxy URL is never shown."""
    try:
        proxies = requests.utils.get_environ_proxies(url)
    except (ValueError, OSError):
        return None
    scheme = urlsplit(url).scheme
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    names = (f"{scheme}_proxy", "all_proxy")
    source = next((n for name in names for n in (name, name.upper()) if os.environ.get(n) == proxy),
                  "the environment")
    return f"the proxy {without_password(proxy)} (from {source})"


def without_password(proxy):
    parts = urlsplit(proxy if "://" in proxy else "http://" + proxy)
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    netloc = (f"{parts.username}:***@" if parts.password else "") + host + \
        (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def without_credentials(url):
    """(the URL without its `user:password@`, (user, password) or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    netloc = parts.netloc.rpartition("@")[2]
    return (urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
            (unquote(parts.username or ""), unquote(parts.password or "")))


def masked(text):
    """TEXT with the password of every URL in it (`scheme://user:password@`) shown as ***."""
    return CREDENTIALS.sub(r"\1:***@", text)


CREDENTIALS = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:]*):[^\s/@]*@")
