"""Loading an image safely: armour for m8's eyes. Read it after vision.py.

The problem: the picture the model asks for (view_image) or the user attaches (--image) is input,
and input can be hostile or just wrong. A path can lead out of the workspace; a file can be a FIFO
that blocks forever, or 2 GB; a URL can answer with a login page, an endless body or one byte a
second; a name or a Content-Type can lie about what the bytes are.

The mechanism: a workspace path is resolved before it is checked (`..`, symlinks) and must be a
regular file under the size cap; a URL is downloaded by the harness (Ollama's /v1 does not fetch
URLs) with one deadline for the whole download and the cap enforced while the body streams in;
then the first bytes (the magic number) must say PNG, JPEG or WebP, the types the server decodes.
Every refusal is an ImageError whose message says what to do, for a person or a model.

What it cannot do: it does not decode the image, so a file with a valid header and a broken body
still reaches the server (which answers with an error); and a URL the user allows is still a
request sent off the machine.
"""
import re
import time
from pathlib import Path

import requests
import urllib3  # installed with requests

# base64 adds a third, and the image is re-sent with every request
MAX_IMAGE_BYTES = 5 * 1024 * 1024
FETCH_TIMEOUT = 30                 # seconds for a whole download: connect, headers and body
SENDABLE = ("image/png", "image/jpeg", "image/webp")   # what Ollama's /v1 decodes


class ImageError(Exception):
    """An image we cannot or will not send. The message says why, for a person or a model."""


def sniff(data: bytes):
    """The image type named by the first bytes (the magic number), or None. Names and
    Content-Type headers can lie; these bytes are what the model server will decode. GIF is
    recognised only to be refused with a useful message: Ollama's /v1 rejects it."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def checked_type(data: bytes, source: str) -> str:
    """The MIME type to send, or an ImageError saying what is wrong with the bytes."""
    mime = sniff(data)
    if mime == "image/gif":
        raise ImageError(f"{source} is a GIF; the model server accepts only PNG, JPEG and WebP. "
                         "Convert it first (for example: ffmpeg -i in.gif out.png).")
    if mime not in SENDABLE:
        start = f"its first bytes are {data[:8]!r}" if data else "it is empty"
        raise ImageError(f"{source} is not a PNG, JPEG or WebP image ({start}).")
    return mime


def too_big(source, size, max_bytes) -> ImageError:
    return ImageError(f"{source} is too big: {size} bytes, the limit is {max_bytes} bytes.")


def read_workspace_file(path: str, workspace, max_bytes: int) -> bytes:
    """The bytes of a file inside the workspace. Resolve first (`..`, symlinks), then check."""
    root = Path(workspace).resolve()
    try:
        target = (root / path).resolve()
    except (OSError, ValueError, RuntimeError) as e:   # a NUL byte, a symlink loop
        raise ImageError(f"cannot use the path {path!r}: {e}") from None
    if not target.is_relative_to(root):
        raise ImageError(f"refused: {path} is outside the workspace. Copy the image into the "
                         "workspace, or give an http(s) URL.")
    try:
        if not target.exists():
            raise ImageError(f"no such file: {path} (paths are relative to the workspace).")
        # a folder, a FIFO (reading one blocks forever)
        if not target.is_file():
            raise ImageError(f"{path} is not a regular file.")
        if target.stat().st_size > max_bytes:
            raise too_big(path, target.stat().st_size, max_bytes)
        return target.read_bytes()
    except OSError as e:                                # e.g. permission denied, a name too long
        raise ImageError(f"cannot read {path}: {e.strerror or e}") from None


def fetch_url(url: str, max_bytes: int, timeout: float):
    """Download an image; return (declared Content-Type, bytes). The size cap is enforced while
    the body streams in, so a huge (or endless) answer is cut off, never held in memory."""
    deadline = time.monotonic() + timeout   # requests' own timeout bounds each wait, not the total
    try:
        with requests.get(url, stream=True, timeout=timeout) as response:
            if response.status_code != 200:
                raise ImageError(f"could not download {url}: HTTP {response.status_code} "
                                 f"{response.reason or ''}".rstrip() + ".")
            declared = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if not declared.startswith("image/"):
                raise ImageError(f"{url} is not an image: the server sent "
                                 f"{declared or 'no Content-Type'} (an error or login page?).")
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise too_big(url, int(length), max_bytes)
            body = bytearray()
            # read1 returns what has arrived, after at most one wait of `timeout`; iter_content
            # would wait for a whole chunk, and a server sending one byte a second never fills it.
            # read1: urllib3 2.2 and later
            read = getattr(response.raw, "read1", response.raw.read)
            while chunk := read(64 * 1024, decode_content=True):
                body += chunk
                if len(body) > max_bytes:
                    raise too_big(url, f"more than {max_bytes}", max_bytes)
                if time.monotonic() > deadline:
                    raise requests.Timeout()    # reported below like any other timeout
    # raw reads raise urllib3's
    except (requests.RequestException, urllib3.exceptions.HTTPError) as e:
        timed_out = isinstance(e, requests.Timeout) or "timed out" in str(e)
        why = f"no complete answer within {timeout} s" if timed_out else "the connection failed"
        raise ImageError(f"could not download {url}: {why} (check the address and the "
                         "network).") from None
    return declared, bytes(body)


def is_url(text) -> bool:
    return bool(re.match(r"(?i)https?://", str(text)))


def load_image(path_or_url, workspace, max_bytes=MAX_IMAGE_BYTES, timeout=FETCH_TIMEOUT):
    """Return (mime, bytes) for a workspace path or an http(s) URL, checked and ready to send.
    Anything we cannot send raises ImageError with a message that says what to do."""
    text = str(path_or_url)
    if not text:
        raise ImageError("no image given: pass a path inside the workspace or an http(s) URL.")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if scheme and scheme.group(1).lower() not in ("http", "https"):
        raise ImageError(f"cannot load {text}: only workspace paths and http(s) URLs are "
                         "supported.")
    if scheme:
        declared, data = fetch_url(text, max_bytes, timeout)
        return checked_type(data, f"{text} (sent as {declared})"), data
    data = read_workspace_file(text, workspace, max_bytes)
    return checked_type(data, text), data


def load_attachment(source, workspace, max_bytes=MAX_IMAGE_BYTES, timeout=FETCH_TIMEOUT):
    """--image: like load_image, except that a file may be anywhere the user can read. The user
    chose it; the workspace limit is for the paths the *model* asks for (view_image)."""
    path = Path(workspace, source)
    if not is_url(source) and path.is_file():
        path = path.resolve()
        return load_image(path.name, path.parent, max_bytes, timeout)
    return load_image(source, workspace, max_bytes, timeout)
