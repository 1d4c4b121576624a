"""Eyes: load an image, put it into the chat format, and check that it reached the model.

The chat format has no image message. An image is one *part* of a user message, next to text:

    {"role": "user", "content": [
        {"type": "text", "text": "What colour is the left half?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo..."}}]}

Three facts shape this module:
- Ollama's /v1 takes images only as base64 data URIs of PNG, JPEG or WebP; it does not download
  http(s) URLs. So the harness downloads a URL itself and checks what it got before sending it.
  (llm.py still talks to the model; this is the harness fetching a file, not a model call.)
- A tool message holds only text. `view_image` answers with a short text, and the image follows in
  one user message placed after *all* tool results of the turn (`image_followup_message`).
- A model can answer a question about an image it never received: by guessing. The evidence is
  the bill, because an image costs prompt tokens. `arrival_check` compares the two counts, and
  `ArrivalWatch` applies it to each request of a run that brings a new image.
"""
import base64
import json
import re
import time
from pathlib import Path

import requests
import urllib3   # installed with requests

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # base64 adds a third, and the image is re-sent with every request
FETCH_TIMEOUT = 30                 # seconds for a whole download: connect, headers and body
MIN_IMAGE_TOKENS = 32              # see arrival_check


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
    if mime is None:
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
        if not target.is_file():                        # a folder, a FIFO (reading one blocks forever)
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
            read = getattr(response.raw, "read1", response.raw.read)   # read1: urllib3 2.2 and later
            while chunk := read(64 * 1024, decode_content=True):
                body += chunk
                if len(body) > max_bytes:
                    raise too_big(url, f"more than {max_bytes}", max_bytes)
                if time.monotonic() > deadline:
                    raise requests.Timeout()    # reported below like any other timeout
    except (requests.RequestException, urllib3.exceptions.HTTPError) as e:   # raw reads raise urllib3's
        timed_out = isinstance(e, requests.Timeout) or "timed out" in str(e)
        why = f"no complete answer within {timeout} s" if timed_out else "the connection failed"
        raise ImageError(f"could not download {url}: {why} (check the address and the network).") from None
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
        raise ImageError(f"cannot load {text}: only workspace paths and http(s) URLs are supported.")
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


# --- The chat format ------------------------------------------------------------------------

def data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(mime: str, data: bytes) -> dict:
    """One content part carrying an image, the shape /v1 servers expect."""
    return {"type": "image_url", "image_url": {"url": data_uri(mime, data)}}


# Small models do what the words around them suggest: told nothing, one went looking for
# "image.png" on disk with view_image while it was looking at the attached picture.
ATTACHED_NOTE = ("(The image is already attached to this message and you can see it now. It is not a "
                 "file on disk: do not look for it or call a tool to open it.)")


# exercise(m8): Write user_message_with_image: the first user message as a list of parts, the task text followed by ATTACHED_NOTE, then the image part.
def user_message_with_image(text: str, part: dict) -> dict:
    """The first user message with an image attached (--image): the task text, then the image."""
    return {"role": "user", "content": [{"type": "text", "text": f"{text}\n\n{ATTACHED_NOTE}"}, part]}


def view_image_result(name: str, mime: str, data: bytes) -> str:
    """The text a view_image call returns: the image itself cannot ride in a tool message."""
    return (f"OK: loaded {name} ({mime}, {len(data)} bytes). It is attached to the next user "
            "message, after the results of this turn's tool calls.")


# exercise(m8): Write image_followup_message: one user message that says which images follow, then each name and its image part in call order; refuse empty or mismatched lists.
def image_followup_message(parts: list, names: list) -> dict:
    """The user message carrying the images view_image loaded in one turn. Append it after the
    LAST tool result of the turn: every tool call must be answered by its tool message before
    anything else comes, so an image between two results would break the call/result pairing."""
    if not parts or len(parts) != len(names):
        raise ValueError("image_followup_message needs one name per image part, and at least one")
    content = [{"type": "text", "text": f"[harness] The image(s) you asked for with view_image, "
                                        f"in order: {', '.join(names)}."}]
    for name, part in zip(names, parts):
        content += [{"type": "text", "text": f"{name}:"}, part]
    return {"role": "user", "content": content}


def without_images(messages: list) -> list:
    """The same messages with every image part removed: what the text alone would cost."""
    def strip(message):
        content = message.get("content")
        if not isinstance(content, list):
            return message
        return {**message, "content": [p for p in content
                                       if not (isinstance(p, dict) and p.get("type") == "image_url")]}
    return [strip(m) for m in messages]


# --- Did the image arrive? ------------------------------------------------------------------

def arrival_check(prompt_tokens_with_image, text_only_estimate, min_image_tokens=MIN_IMAGE_TOKENS):
    """A warning (text) when the image evidently did not reach the model, else None.

    The rule: the request with the image must cost at least `min_image_tokens` (32) prompt tokens
    more than its text alone. A dropped image adds nothing, while every vision model we know spends
    far more on a picture: Gemma 3 a fixed 256 tokens, LLaVA 576, Qwen-VL about one token per 28x28
    pixels (81 for 256x256). 32 sits between the two with room for a text-only count that is a few
    dozen tokens off. Make `text_only_estimate` as exact as you can: for view_image, the previous
    request's measured prompt_tokens plus an estimate of only the messages added since; for a
    first message, a chars/4 estimate of a long prompt can be off by more than 32, so measure the
    text-only request once if in doubt. A server that leaves image tokens out of prompt_tokens
    would make this warn falsely: it is a warning, not a block.
    """
    if not prompt_tokens_with_image:
        return ("warning: the server reported no prompt_tokens, so we cannot tell whether the "
                "image reached the model.")
    added = prompt_tokens_with_image - text_only_estimate
    if added >= min_image_tokens:
        return None
    return (f"warning: the request with the image cost {prompt_tokens_with_image} prompt tokens, "
            f"about what its text alone costs (~{text_only_estimate}); an image adds at least "
            f"{min_image_tokens}. The image probably never reached the model, so any answer about it "
            "is a guess. Check that the model has vision (`ollama show MODEL` lists it); Ollama is "
            "known to drop images for gemma4 e2b/e4b, while qwen3-vl:8b receives them.")


def text_tokens(messages, tools=None) -> int:
    """A request's text without its images, estimated as characters/4 of its JSON (no tokenizer;
    the scripted server counts the same way, a real server only roughly so)."""
    text = json.dumps(without_images(messages), ensure_ascii=False) + json.dumps(tools, ensure_ascii=False)
    return (len(text) + 3) // 4


def count_images(messages) -> int:
    return sum(isinstance(part, dict) and part.get("type") == "image_url"
               for message in messages if isinstance(message.get("content"), list)
               for part in message["content"])


class ArrivalWatch:
    """Runs `arrival_check` on every request that brings a new image, once its usage is known.

    The text-only size is an offset from a measurement: the previous request's prompt_tokens plus
    the estimated change since then (the new messages, less whatever scissors cut). Only the change
    is estimated, so the error stays small. The first request has no measurement before it; there
    the whole text is estimated, which on a real server can be off by more than an image costs.
    The sure test is a control run: the same task without the image, and compare the two bills.
    """

    def __init__(self):
        self.images = 0
        self.measured = None            # (prompt_tokens, text_tokens) of the previous request

    def check(self, messages, tools, usage):
        """Call after each model call with what was sent; returns a warning or None."""
        text, images, prompt_tokens = text_tokens(messages, tools), count_images(messages), usage.get("prompt_tokens")
        warning = None
        if images > self.images:
            expected = text if self.measured is None else self.measured[0] + text - self.measured[1]
            warning = arrival_check(prompt_tokens, expected)
        self.images = images
        self.measured = (prompt_tokens, text) if prompt_tokens else None
        return warning
