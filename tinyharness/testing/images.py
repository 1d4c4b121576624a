"""Images for the scripted server: tiny PNGs, what an image costs in tokens, and a scripted vision
model.

The problem. Testing a harness's pictures (view_image, an MCP tool's screenshot) needs images whose
content is known, a server that charges a realistic number of tokens for them (hundreds, not the
length of their base64 text), and a "model" that can only answer right if the picture arrived. The
standard library has no image codec.

The mechanism. A PNG is simple: a signature, then chunks (length, type, data, CRC). IHDR says the
size and pixel format, IDAT holds the zlib-compressed rows, each row prefixed by a filter byte.
`make_png` writes 8-bit RGB; `read_png_pixels` reads 8-bit RGB or RGBA and undoes the five row
filters. An image part of a request counts as `image_tokens(width, height)`, written into the
prompt text as a stand-in that starts with a digest of the picture (so a changed image breaks the
simulated cache). `vision_policy` plays a model that names the colours of each image's halves.

What it cannot do. Only the PNGs described above are read (no palette, no 16-bit, no interlacing);
other formats count a flat IMAGE_BASE_TOKENS and are "seen" as unreadable. The token rule is an
order of magnitude, not any real encoder's count.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
import zlib

from .replies import normalise_reply

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGE_BASE_TOKENS = 256         # a fixed cost per image, like Gemma 3's 256
IMAGE_TILE = 28                 # plus one token per 28x28 pixels, like Qwen-VL
COLOURS = {"black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128),
           "red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255),
           "yellow": (255, 255, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255)}


def image_tokens(width: int, height: int) -> int:
    """Prompt tokens we charge for an image: 256 + width*height/784. Real encoders differ (Gemma 3
    a fixed 256, LLaVA 576, Qwen-VL one per 28x28 tile); what matters for tests is the order of
    magnitude: an image that arrives costs hundreds of tokens, one that is dropped costs none."""
    return IMAGE_BASE_TOKENS + (width * height) // (IMAGE_TILE * IMAGE_TILE)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def make_png(rows) -> bytes:
    """A real PNG from rows of (r, g, b) tuples: 8-bit RGB, not interlaced, filter 0 on every
    row."""
    height, width = len(rows), len(rows[0]) if rows else 0
    if not width or any(len(row) != width for row in rows):
        raise ValueError("make_png needs at least one row, all rows the same non-zero length")
    raw = b"".join(b"\x00" + bytes(value for pixel in row for value in pixel) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)   # depth 8, colour type 2 = RGB
    return (PNG_SIGNATURE + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(raw, 9))
            + _png_chunk(b"IEND", b""))


def tiny_png(width: int, height: int, pixel) -> bytes:
    """A PNG whose colour at (x, y) is pixel(x, y), an (r, g, b) tuple."""
    return make_png([[pixel(x, y) for x in range(width)] for y in range(height)])


def split_png(left: str, right: str, width: int = 256, height: int = 256) -> bytes:
    """A PNG whose left half is one named colour and right half another (see COLOURS)."""
    return tiny_png(width, height, lambda x, y: COLOURS[left if x < width // 2 else right])


def _unfilter(kind: int, line: bytearray, previous: bytes, bpp: int) -> bytes:
    """Undo one row's PNG filter (0 none, 1 sub, 2 up, 3 average, 4 Paeth), in place."""
    if kind == 0:
        return bytes(line)
    if kind > 4:
        raise ValueError(f"not a PNG filter type: {kind}")
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0            # left
        b = previous[i]                                  # up
        c = previous[i - bpp] if i >= bpp else 0        # up-left
        if kind == 1:
            guess = a
        elif kind == 2:
            guess = b
        elif kind == 3:
            guess = (a + b) // 2
        else:
            p = a + b - c
            guess = min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]
        line[i] = (line[i] + guess) & 0xFF
    return bytes(line)


def read_png_pixels(data: bytes) -> list:
    """Rows of (r, g, b) tuples from an 8-bit RGB or RGBA, non-interlaced PNG (alpha is dropped).
    Other PNGs raise ValueError: this reads the images we make, not every PNG there is."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG (wrong signature)")
    pos, header, compressed = len(PNG_SIGNATURE), None, b""
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length                              # length, type, data, CRC
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            compressed += chunk
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("not a PNG (no IHDR chunk)")
    width, height, depth, colour_type, _, _, interlace = header
    bpp = {2: 3, 6: 4}.get(colour_type)                 # bytes per pixel: RGB or RGBA
    if depth != 8 or bpp is None or interlace:
        raise ValueError("only 8-bit RGB or RGBA PNGs without interlacing can be read here")
    try:
        raw = zlib.decompress(compressed)
    except zlib.error as e:
        raise ValueError(f"broken PNG data: {e}") from None
    stride = width * bpp
    if len(raw) < height * (stride + 1):
        raise ValueError("broken PNG data: fewer pixels than the header promises")
    rows, previous = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous, bpp)
        rows.append(list(zip(line[0::bpp], line[1::bpp], line[2::bpp])))
        previous = line
    return rows


def png_size(data: bytes):
    """(width, height) from a PNG's header, or None when the bytes are not a PNG."""
    if data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    return None


def decode_data_uri(url):
    """(mime, bytes) of a base64 data URI, or None for anything else (an http URL, bad base64)."""
    match = re.fullmatch(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", url or "", re.DOTALL)
    if not match:
        return None
    try:
        return match.group(1), base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_url(part):
    """The URL of an image_url content part, or None when `part` is something else."""
    if (isinstance(part, dict) and part.get("type") == "image_url"
        and isinstance(part.get("image_url"), dict)):
        url = part["image_url"].get("url")
        return url if isinstance(url, str) else None
    return None


def _contents(messages):
    """The list-shaped contents of a messages list (text-only messages have a plain string)."""
    if not isinstance(messages, list):
        return []
    return ([m["content"] for m in messages if isinstance(m, dict)
             and isinstance(m.get("content"), list)])


def image_stand_in(url):
    """The text an image counts as: 4 characters per image token, starting with a digest of the
    image. None when the URL is not a data URI the server could decode (it then counts as text)."""
    decoded = decode_data_uri(url)
    if decoded is None:
        return None
    size = png_size(decoded[1])
    tokens = image_tokens(*size) if size else IMAGE_BASE_TOKENS
    tag = f"<image {hashlib.sha256(decoded[1]).hexdigest()[:16]}: {tokens} tokens>"
    return tag.ljust(4 * tokens, ".")


def with_image_stand_ins(messages):
    """The messages with each image part replaced by its stand-in; unchanged when there is none,
    so text-only requests are counted exactly as before."""
    if not any(_image_url(p) for content in _contents(messages) for p in content):
        return messages

    def swap(part):
        stand_in = image_stand_in(_image_url(part))
        return part if stand_in is None else stand_in

    return [{**m, "content": [swap(p) for p in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m for m in messages]


def without_image_parts(body: dict) -> dict:
    """The request as a server that ignores images sees it: every image part gone."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    stripped = [{**m, "content": [p for p in m["content"] if _image_url(p) is None]}
                if isinstance(m, dict) and isinstance(m.get("content"), list)
                else m for m in messages]
    return {**body, "messages": stripped}


def colour_name(rgb) -> str:
    """The name in COLOURS nearest to an (r, g, b) colour."""
    return min(COLOURS, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb)))


def _average(pixels) -> tuple:
    return tuple(sum(p[i] for p in pixels) / len(pixels) for i in range(3))


def describe_image(mime: str, data: bytes) -> str:
    """What our scripted vision model "sees": the colours of the left and right halves of a PNG."""
    try:
        rows = read_png_pixels(data)
    except ValueError:
        return f"a {mime} image I cannot read"
    half = max(1, len(rows[0]) // 2)                    # an odd width leaves the middle column out
    left = [p for row in rows for p in row[:half]]
    right = [p for row in rows for p in row[-half:]]
    return f"left: {colour_name(_average(left))}, right: {colour_name(_average(right))}"


IMAGE_NAME = re.compile(r"[\w.-]+\.(?:png|jpe?g|webp)\b", re.IGNORECASE)
COLOUR_PAIR = re.compile(r"\b(" + "|".join(COLOURS) + r")-(" + "|".join(COLOURS) + r")\.png\b")


def request_text(messages) -> str:
    """Every text a request's messages hold (contents, text parts, call arguments), one string."""
    texts = []
    for m in [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []:
        content = m.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        texts += [p["text"] for p in parts
                  if isinstance(p, dict) and isinstance(p.get("text"), str)]
        calls = listed if isinstance(listed := m.get("tool_calls"), list) else []
        texts += [str((c.get("function") or {}).get("arguments"))
                  for c in calls if isinstance(c, dict)]
    return "\n".join(texts)


def guessed_colours(messages) -> str:
    """What a model that never got the picture says when it will not admit it: the colours of a
    file name in the request (blue-red.png), else the pair a guess names first, red and blue."""
    named = COLOUR_PAIR.findall(request_text(messages))
    left, right = named[-1] if named else ("red", "blue")
    return f"left: {left}, right: {right}"


def looked_for(messages):
    """A view_image call for the image file the task names, when nothing was attached or looked at
    yet (what a vision model does with "What colour is each half of green.png?"), else None."""
    messages = messages if isinstance(messages, list) else []
    if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
        return None
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    name = IMAGE_NAME.search(request_text(users[-1:]))
    if name is None:
        return None
    return {"tool_calls": [{"name": "view_image", "arguments": {"path": name.group(0)}}]}


def vision_policy(answer_without_image="I cannot see any image.", before=(), guess=False,
                  look=False):
    """A ScriptedServer policy that plays a vision model. The replies in `before` come first (for
    example a view_image call); with `look`, a task that names an image file and attaches none gets
    a view_image call for it. After that it answers from the pixels of every image part in the
    request ("left: red, right: blue"; several images are numbered), or with
    `answer_without_image` when the request holds none - the honest answer a guessing model skips;
    with `guess` it skips it too, and names the colours of a file name in the request or red and
    blue (`guessed_colours`). Only data URIs count: like Ollama's /v1, this "model" cannot fetch an
    http(s) URL."""
    before = [normalise_reply(r) for r in before]

    def policy(body, index):
        if index < len(before):
            return before[index]
        images = [decode_data_uri(_image_url(part)) for content in _contents(body.get("messages"))
                  for part in content]
        seen = [describe_image(*image) for image in images if image is not None]
        if not seen and look and looked_for(body.get("messages")):
            return looked_for(body.get("messages"))
        if not seen:
            return guessed_colours(body.get("messages")) if guess else answer_without_image
        if len(seen) == 1:
            return seen[0]
        return "; ".join(f"image {i}: {s}" for i, s in enumerate(seen, 1))

    return policy


def example_images() -> dict:
    """The PNGs of examples/images, by file name. blue-red.png is the control: red-left/blue-right
    is the pair a guessing model names by default, so a right answer on it alone proves little."""
    return {"red-blue.png": split_png("red", "blue"),
            "blue-red.png": split_png("blue", "red"),
            "green.png": tiny_png(128, 128, lambda x, y: COLOURS["green"])}
