"""Vision building blocks: loading images safely, the message shapes, and proof that an image arrived.

URLs are fetched from a small HTTP server started here on 127.0.0.1; the "vision model" is the
scripted server with `vision_policy`, which really decodes the PNG it is sent.
"""
import base64
import json
import os
import socket
import socketserver
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.ladder import ROOT
from tinyharness import arrival, imageload, vision
from tinyharness.testing import ScriptedServer, vision_policy
from tinyharness.testing.images import (COLOURS, example_images, image_tokens, make_png, read_png_pixels,
                                        split_png, tiny_png)
from tinyharness.testing.replies import estimate_tokens
from tinyharness.testing.server import prompt_text

RED_BLUE = split_png("red", "blue")
BLUE_RED = split_png("blue", "red")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(20)
WEBP = b"RIFF" + struct.pack("<I", 30) + b"WEBPVP8 " + bytes(22)
GIF = b"GIF89a" + bytes(20)


# --- A tiny web server to download from ------------------------------------------------------

class Site(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):                      # skip the reverse DNS lookup of HTTPServer
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        pass                                    # clients hanging up on purpose is the point here


class Pages(BaseHTTPRequestHandler):
    """Routes: path -> (status, content type, body). A few paths misbehave on purpose."""
    routes = {
        "/red-blue.png": (200, "image/png", RED_BLUE),
        "/photo.jpg": (200, "image/jpeg", JPEG),
        "/mislabelled.png": (200, "image/png", JPEG),          # the bytes decide, not the header
        "/anim.gif": (200, "image/gif", GIF),
        "/drawing.svg": (200, "image/svg+xml", b"<svg xmlns='http://www.w3.org/2000/svg'/>"),
        "/page": (200, "text/html; charset=utf-8", b"<html>Please log in</html>"),
        "/untyped": (200, None, RED_BLUE),
        "/liar.png": (200, "image/png", b"hello, I am not an image"),
        "/big.png": (200, "image/png", b"\x89PNG\r\n\x1a\n" + bytes(5000)),
    }

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/red-blue.png")
            self.end_headers()
        elif self.path == "/slow.png":          # no answer at all until released
            self.server.release.wait(5)
        elif self.path == "/endless.png":       # no Content-Length, and more bytes than any cap
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(b"\x89PNG\r\n\x1a\n")
            for _ in range(10_000):
                self.wfile.write(bytes(4096))
        elif self.path == "/trickle.png":       # a byte at a time: each read is quick, the whole is not
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(b"\x89PNG\r\n\x1a\n")
            for _ in range(60):                 # 3 s at most, so a regression fails instead of hanging
                if self.server.release.wait(0.05):
                    break
                self.wfile.write(b"\x00")
                self.wfile.flush()
        elif self.path in self.routes:
            status, kind, body = self.routes[self.path]
            self.send_response(status)
            if kind:
                self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Not Found")


@pytest.fixture(scope="module")
def site():
    server = Site(("127.0.0.1", 0), Pages)
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.release.set()
    server.shutdown()
    server.server_close()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Workspace files ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, data, mime", [("a.png", RED_BLUE, "image/png"), ("b.jpg", JPEG, "image/jpeg"),
                                              ("c.webp", WEBP, "image/webp"), ("no-extension", JPEG, "image/jpeg")])
def test_workspace_images_are_recognised_by_their_bytes(workspace, name, data, mime):
    (workspace / name).write_bytes(data)
    assert imageload.load_image(name, workspace) == (mime, data)


def test_subfolder_and_absolute_paths_inside_the_workspace_work(workspace):
    (workspace / "pics").mkdir()
    (workspace / "pics" / "x.png").write_bytes(RED_BLUE)
    assert imageload.load_image("pics/../pics/x.png", workspace)[0] == "image/png"
    assert imageload.load_image(str(workspace / "pics" / "x.png"), workspace)[1] == RED_BLUE


def test_gif_is_refused_with_what_to_do(workspace):
    (workspace / "anim.gif").write_bytes(GIF)
    with pytest.raises(imageload.ImageError, match=r"anim.gif is a GIF.*PNG, JPEG and WebP.*Convert"):
        imageload.load_image("anim.gif", workspace)


def test_a_text_file_named_png_is_not_an_image(workspace):
    (workspace / "fake.png").write_text("hello, world\n")
    (workspace / "empty.png").write_bytes(b"")
    with pytest.raises(imageload.ImageError, match=r"fake.png is not a PNG, JPEG or WebP image .*b'hello, w'"):
        imageload.load_image("fake.png", workspace)
    with pytest.raises(imageload.ImageError, match="it is empty"):
        imageload.load_image("empty.png", workspace)


def test_paths_outside_the_workspace_are_refused(workspace):
    outside = workspace.parent / "outside.png"
    outside.write_bytes(RED_BLUE)
    (workspace.parent / "ws-evil").mkdir()
    (workspace.parent / "ws-evil" / "x.png").write_bytes(RED_BLUE)      # shares the prefix "ws"
    (workspace / "link.png").symlink_to(outside)
    (workspace / "linked-dir").symlink_to(workspace.parent / "ws-evil")
    for path in ("../outside.png", str(outside), "../ws-evil/x.png", "link.png", "linked-dir/x.png"):
        with pytest.raises(imageload.ImageError, match="refused: .* is outside the workspace"):
            imageload.load_image(path, workspace)


def test_the_size_limit_at_its_boundary(workspace):
    # An image of exactly the limit is sent; one byte more is refused, from the workspace and from a URL alike.
    (workspace / "edge.png").write_bytes(RED_BLUE)
    assert imageload.load_image("edge.png", workspace, max_bytes=len(RED_BLUE)) == ("image/png", RED_BLUE)
    with pytest.raises(imageload.ImageError, match=f"edge.png is too big: {len(RED_BLUE)} bytes, the limit is {len(RED_BLUE) - 1}"):
        imageload.load_image("edge.png", workspace, max_bytes=len(RED_BLUE) - 1)


def test_missing_odd_and_oversized_files_are_clear_errors(workspace):
    (workspace / "folder").mkdir()
    (workspace / "big.png").write_bytes(RED_BLUE)
    with pytest.raises(imageload.ImageError, match="no such file: nope.png"):
        imageload.load_image("nope.png", workspace)
    with pytest.raises(imageload.ImageError, match="folder is not a regular file"):
        imageload.load_image("folder", workspace)
    with pytest.raises(imageload.ImageError, match="cannot use the path"):
        imageload.load_image("bad\x00name.png", workspace)
    with pytest.raises(imageload.ImageError, match="cannot read .*name too long"):
        imageload.load_image("x" * 5000 + ".png", workspace)
    if hasattr(os, "mkfifo"):                            # reading a FIFO would block forever
        os.mkfifo(workspace / "pipe.png")
        with pytest.raises(imageload.ImageError, match="pipe.png is not a regular file"):
            imageload.load_image("pipe.png", workspace)
    with pytest.raises(imageload.ImageError, match=f"big.png is too big: {len(RED_BLUE)} bytes, the limit is 100"):
        imageload.load_image("big.png", workspace, max_bytes=100)
    with pytest.raises(imageload.ImageError, match="no image given"):
        imageload.load_image("", workspace)


@pytest.mark.parametrize("source", ["file:///etc/hostname", "ftp://example.com/a.png"])
def test_only_http_urls_are_fetched(workspace, source):
    with pytest.raises(imageload.ImageError, match="only workspace paths and http\\(s\\) URLs"):
        imageload.load_image(source, workspace)


# --- URLs ----------------------------------------------------------------------------------------

def test_url_images_are_downloaded_and_checked(site, workspace):
    assert imageload.load_image(site + "/red-blue.png", workspace) == ("image/png", RED_BLUE)
    assert imageload.load_image(site + "/photo.jpg", workspace) == ("image/jpeg", JPEG)
    assert imageload.load_image(site + "/mislabelled.png", workspace) == ("image/jpeg", JPEG)
    assert imageload.load_image(site + "/redirect", workspace) == ("image/png", RED_BLUE)
    assert list(workspace.iterdir()) == []             # nothing is written to disk


@pytest.mark.parametrize("path, message", [
    ("/page", r"is not an image: the server sent text/html"),
    ("/untyped", r"the server sent no Content-Type"),
    ("/liar.png", r"liar.png \(sent as image/png\) is not a PNG, JPEG or WebP image"),
    ("/drawing.svg", r"\(sent as image/svg\+xml\) is not a PNG, JPEG or WebP image"),
    ("/anim.gif", r"is a GIF"),
    ("/missing.png", r"could not download .*/missing.png: HTTP 404 Not Found"),
])
def test_url_answers_that_are_not_images_are_refused(site, workspace, path, message):
    with pytest.raises(imageload.ImageError, match=message):
        imageload.load_image(site + path, workspace)


def test_url_size_cap_from_the_header_and_while_streaming(site, workspace):
    with pytest.raises(imageload.ImageError, match=r"big.png is too big: 5008 bytes, the limit is 1000"):
        imageload.load_image(site + "/big.png", workspace, max_bytes=1000)
    started = time.monotonic()
    with pytest.raises(imageload.ImageError, match=r"endless.png is too big: more than 100000 bytes"):
        imageload.load_image(site + "/endless.png", workspace, max_bytes=100_000)
    assert time.monotonic() - started < 2               # stopped at the cap, not after 40 MB


def test_url_timeouts_cover_a_silent_server_and_a_trickle(site, workspace):
    for path in ("/slow.png", "/trickle.png"):
        started = time.monotonic()
        with pytest.raises(imageload.ImageError, match=r"no complete answer within 0.3 s"):
            imageload.load_image(site + path, workspace, timeout=0.3)
        assert time.monotonic() - started < 1.5, path


def test_unreachable_url(workspace):
    with pytest.raises(imageload.ImageError, match="could not download .*: the connection failed"):
        imageload.load_image(f"http://127.0.0.1:{closed_port()}/a.png", workspace, timeout=2)


# --- The chat format -------------------------------------------------------------------------

def test_image_part_shape_is_a_data_uri():
    uri = vision.image_part("image/png", RED_BLUE)["image_url"]["url"]
    assert uri == "data:image/png;base64," + base64.b64encode(RED_BLUE).decode("ascii")
    assert vision.image_part("image/jpeg", JPEG) == {
        "type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()}}


def test_first_message_says_the_image_is_already_visible():
    part = vision.image_part("image/png", RED_BLUE)
    message = vision.user_message_with_image("What colours are the halves?", part)
    assert message["role"] == "user" and len(message["content"]) == 2
    text, image = message["content"]
    assert text["type"] == "text" and text["text"].startswith("What colours are the halves?")
    for words in ("attached", "can see it now", "not a file", "do not look for it or call a tool"):
        assert words in text["text"]
    assert image is part


def test_followup_message_labels_each_image():
    parts = [vision.image_part("image/png", RED_BLUE), vision.image_part("image/png", BLUE_RED)]
    message = vision.image_followup_message(parts, ["a.png", "b.png"])
    assert message["role"] == "user"
    assert [p["type"] for p in message["content"]] == ["text", "text", "image_url", "text", "image_url"]
    assert message["content"][0]["text"].startswith("[harness]") and "a.png, b.png" in message["content"][0]["text"]
    assert message["content"][1]["text"] == "a.png:" and message["content"][2] is parts[0]
    with pytest.raises(ValueError):
        vision.image_followup_message(parts, ["only one name"])
    with pytest.raises(ValueError):
        vision.image_followup_message([], [])


def test_view_image_result_is_short_text():
    text = vision.view_image_result("a.png", "image/png", RED_BLUE)
    assert text.startswith(f"OK: loaded a.png (image/png, {len(RED_BLUE)} bytes).")
    assert "next user message" in text and "base64" not in text


def test_without_images_keeps_the_text_and_leaves_the_input_alone():
    message = vision.user_message_with_image("task", vision.image_part("image/png", RED_BLUE))
    messages = [{"role": "system", "content": "be brief"}, message]
    stripped = arrival.without_images(messages)
    assert stripped == [messages[0], {"role": "user", "content": [message["content"][0]]}]
    assert len(message["content"]) == 2


def turn_with_view_image(two_images=False):
    """A conversation as m8's loop builds it: two calls in one turn, both results, then the images."""
    calls = [{"id": "call_1", "type": "function", "function": {"name": "view_image", "arguments": '{"path": "a.png"}'}},
             {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "n.txt"}'}}]
    parts = [vision.image_part("image/png", RED_BLUE)] + ([vision.image_part("image/png", BLUE_RED)] * two_images)
    names = ["a.png"] + (["b.png"] * two_images)
    return [{"role": "user", "content": "Look at a.png and read n.txt."},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_1", "content": vision.view_image_result("a.png", "image/png", RED_BLUE)},
            {"role": "tool", "tool_call_id": "call_2", "content": "notes"},
            vision.image_followup_message(parts, names)]


def test_the_image_follows_all_tool_results_and_the_model_sees_it():
    messages = turn_with_view_image()
    with ScriptedServer(policy=vision_policy()) as srv:
        answer = requests.post(srv.base_url + "/chat/completions", timeout=5,
                               json={"model": "m", "messages": messages}).json()
    sent = srv.requests[0]["messages"]
    ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[2:4]] == [("tool", i) for i in ids]
    assert all(isinstance(m["content"], str) for m in sent if m["role"] == "tool")   # text only
    assert answer["choices"][0]["message"]["content"] == "left: red, right: blue"


# --- PNGs we make and read -------------------------------------------------------------------

def pattern(width, height):
    return [[((x * 37) % 256, (y * 59) % 256, (x * y) % 256) for x in range(width)] for y in range(height)]


def test_make_png_round_trips_and_has_a_valid_structure():
    rows = pattern(7, 5)
    data = make_png(rows)
    assert read_png_pixels(data) == rows
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (7, 5)
    assert tiny_png(3, 2, lambda x, y: (x, y, 9)) == make_png([[(0, 0, 9), (1, 0, 9), (2, 0, 9)],
                                                               [(0, 1, 9), (1, 1, 9), (2, 1, 9)]])
    with pytest.raises(ValueError):
        make_png([])
    with pytest.raises(ValueError):
        make_png([[(0, 0, 0)], [(0, 0, 0), (1, 1, 1)]])


def encode_png(rows, filter_type, colour_type=2, depth=8, interlace=0):
    """An independent PNG writer for the reader's tests: any filter, RGB or RGBA."""
    bpp = 3 if colour_type == 2 else 4
    raw, previous = b"", bytes(len(rows[0]) * bpp)
    for row in rows:
        line = bytes(v for p in row for v in (p if bpp == 3 else (*p, 200)))
        out = bytearray()
        for i, value in enumerate(line):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], (previous[i - bpp] if i >= bpp else 0)
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            paeth = a if pa <= pb and pa <= pc else b if pb <= pc else c
            guess = [0, a, b, (a + b) // 2, paeth][filter_type]
            out.append((value - guess) & 0xFF)
        raw += bytes([filter_type]) + bytes(out)
        previous = line

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", len(rows[0]), len(rows), depth, colour_type, 0, 0, interlace)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("filter_type", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("colour_type", [2, 6])
def test_read_png_pixels_undoes_every_filter(filter_type, colour_type):
    rows = pattern(6, 4)
    assert read_png_pixels(encode_png(rows, filter_type, colour_type)) == rows


def test_read_png_pixels_refuses_what_it_cannot_read():
    rows = pattern(2, 2)
    for data, message in [(JPEG, "signature"), (encode_png(rows, 0, depth=16), "8-bit"),
                          (encode_png(rows, 0, interlace=1), "interlac"),
                          (b"\x89PNG\r\n\x1a\n", "no IHDR"), (make_png(rows)[:-30], "broken")]:
        with pytest.raises(ValueError, match=message):
            read_png_pixels(data)


def test_example_images_show_what_their_readme_says():
    folder = ROOT / "examples" / "images"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for name, data in example_images().items():
        assert f"`{name}`" in readme
        assert read_png_pixels((folder / name).read_bytes()) == read_png_pixels(data)
    colours = {name: describe(folder / name) for name in example_images()}
    assert colours == {"red-blue.png": "left: red, right: blue", "blue-red.png": "left: blue, right: red",
                       "green.png": "left: green, right: green"}


def describe(path):
    """Ask the scripted vision model about one image file, over HTTP."""
    message = vision.user_message_with_image("Colours?", vision.image_part("image/png", path.read_bytes()))
    with ScriptedServer(policy=vision_policy()) as srv:
        return chat(srv, [message])["choices"][0]["message"]["content"]


# --- The scripted vision model -----------------------------------------------------------------

def chat(srv, messages, **extra):
    response = requests.post(srv.base_url + "/chat/completions", timeout=5,
                             json={"model": "m", "messages": messages, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def with_image(data, text="What colour is each half?", mime="image/png"):
    return [vision.user_message_with_image(text, vision.image_part(mime, data))]


def test_vision_policy_answers_from_the_pixels():
    with ScriptedServer(policy=vision_policy()) as srv:
        answers = [chat(srv, with_image(data))["choices"][0]["message"]["content"]
                   for data in (RED_BLUE, BLUE_RED, tiny_png(5, 3, lambda x, y: COLOURS["yellow"]))]
    assert answers == ["left: red, right: blue", "left: blue, right: red", "left: yellow, right: yellow"]


def test_vision_policy_without_an_image_says_so():
    text_only = [{"role": "user", "content": "What colour is each half?"}]
    url_only = [{"role": "user", "content": [{"type": "text", "text": "this?"},
                                             {"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}]
    with ScriptedServer(policy=vision_policy()) as srv:
        assert chat(srv, text_only)["choices"][0]["message"]["content"] == "I cannot see any image."
        assert chat(srv, url_only)["choices"][0]["message"]["content"] == "I cannot see any image."
    with ScriptedServer(policy=vision_policy("left: red, right: blue")) as srv:   # a guesser
        assert chat(srv, text_only)["choices"][0]["message"]["content"] == "left: red, right: blue"


def test_vision_policy_numbers_several_images_and_plays_replies_first():
    before = [{"tool_calls": [{"name": "view_image", "arguments": {"path": "a.png"}}]}]
    with ScriptedServer(policy=vision_policy(before=before)) as srv:
        first = chat(srv, [{"role": "user", "content": "look"}])["choices"][0]["message"]
        second = chat(srv, turn_with_view_image(two_images=True))["choices"][0]["message"]["content"]
        jpeg = chat(srv, with_image(JPEG, mime="image/jpeg"))["choices"][0]["message"]["content"]
    assert first["tool_calls"][0]["function"]["name"] == "view_image"
    assert second == "image 1: left: red, right: blue; image 2: left: blue, right: red"
    assert jpeg == "a image/jpeg image I cannot read"


# --- Image tokens, and the dropped-image bug ---------------------------------------------------

@pytest.mark.parametrize("data, size", [(RED_BLUE, (256, 256)), (make_png(pattern(64, 48)), (64, 48))])
def test_an_image_costs_image_tokens_not_its_base64_length(data, size):
    messages = with_image(data)
    text_only = estimate_tokens(prompt_text({"messages": arrival.without_images(messages)}))
    with ScriptedServer(policy=vision_policy()) as srv:
        usage = chat(srv, messages)["usage"]
    expected = image_tokens(*size)
    assert expected == 256 + size[0] * size[1] // 784
    assert expected <= usage["prompt_tokens"] - text_only <= expected + 2


def test_a_noisy_image_costs_far_less_than_its_base64_over_4():
    messages = with_image(make_png(pattern(64, 48)))         # compresses badly: ~12 KB of base64
    with ScriptedServer(policy=vision_policy()) as srv:
        prompt_tokens = chat(srv, messages)["usage"]["prompt_tokens"]
    assert prompt_tokens < 400 < estimate_tokens(json.dumps(messages))


def test_text_only_list_contents_are_counted_as_before():
    messages = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    with ScriptedServer(script=["hi"]) as srv:
        usage = chat(srv, messages)["usage"]
    assert usage["prompt_tokens"] == estimate_tokens(json.dumps(messages, ensure_ascii=False) + "null")


def test_cache_simulation_sees_a_changed_image():
    first = with_image(RED_BLUE)
    same = first + [{"role": "assistant", "content": "left: red, right: blue"}, {"role": "user", "content": "ok"}]
    other = with_image(BLUE_RED) + same[1:]
    with ScriptedServer(policy=vision_policy()) as srv:
        cached = [chat(srv, m)["usage"]["prompt_tokens_details"]["cached_tokens"] for m in (first, same, other)]
    assert cached[1] > image_tokens(256, 256)          # the image is part of the reused prefix
    text_before_image = json.dumps(first).index('{"type": "image_url"')
    assert cached[2] < text_before_image // 4 + 8      # a different picture: recomputed from there


def test_drop_images_records_the_request_but_the_model_never_sees_the_image():
    messages = with_image(RED_BLUE)
    with ScriptedServer(policy=vision_policy(), drop_images=True) as srv:
        answer = chat(srv, messages)
    assert srv.requests[0]["messages"] == messages      # the harness did send it
    assert answer["choices"][0]["message"]["content"] == "I cannot see any image."
    text_only = estimate_tokens(prompt_text({"messages": arrival.without_images(messages)}))
    assert answer["usage"]["prompt_tokens"] == text_only


# --- Did it arrive? --------------------------------------------------------------------------

def test_arrival_check_rule():
    assert vision.MIN_IMAGE_TOKENS == 32
    assert vision.arrival_check(1058, 800) is None
    assert vision.arrival_check(80 + 32, 80) is None
    warning = vision.arrival_check(89, 80)
    assert warning.startswith("warning:") and "89 prompt tokens" in warning and "~80" in warning
    assert "guess" in warning and "gemma4" in warning
    assert vision.arrival_check(80 + 31, 80) is not None
    assert vision.arrival_check(100, 100, min_image_tokens=0) is None
    assert "cannot tell" in vision.arrival_check(0, 80) and "cannot tell" in vision.arrival_check(None, 80)


@pytest.mark.parametrize("drop", [False, True])
def test_arrival_check_catches_a_right_answer_by_guessing(drop):
    # The source articles' trap: the model says "left: red, right: blue" with or without the image.
    messages = with_image(RED_BLUE)
    text_only = estimate_tokens(prompt_text({"messages": arrival.without_images(messages)}))
    with ScriptedServer(policy=vision_policy("left: red, right: blue"), drop_images=drop) as srv:
        answer = chat(srv, messages)
    assert answer["choices"][0]["message"]["content"] == "left: red, right: blue"   # right either way
    warning = vision.arrival_check(answer["usage"]["prompt_tokens"], text_only)
    assert (warning is not None) == drop


def test_a_guessing_vision_model_names_the_colours_of_a_file_name_or_the_usual_pair():
    from tinyharness.testing.images import vision_policy as policy
    guess = policy(guess=True)
    ask = lambda text: guess({"messages": [{"role": "user", "content": text}]}, 0)
    assert ask("What colour is each half of the image?") == "left: red, right: blue"
    assert ask("What colour is each half of blue-red.png?") == "left: blue, right: red"
    assert policy()({"messages": [{"role": "user", "content": "blue-red.png?"}]}, 0) == "I cannot see any image."


def test_a_looking_vision_model_asks_for_a_named_picture_then_answers_from_its_pixels():
    from tinyharness.testing.images import vision_policy as policy
    from tinyharness.vision import image_part
    look = policy(look=True)
    task = {"role": "user", "content": "What colour is each half of blue-red.png?"}
    call = look({"messages": [task]}, 0)
    assert call["tool_calls"] == [{"name": "view_image", "arguments": {"path": "blue-red.png"}}]
    picture = {"role": "user", "content": [{"type": "text", "text": "blue-red.png:"},
                                           image_part("image/png", split_png("blue", "red"))]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "OK: loaded blue-red.png"}
    assert look({"messages": [task, {"role": "assistant", "content": ""}, result, picture]}, 1) == "left: blue, right: red"
    assert look({"messages": [task, {"role": "assistant", "content": ""}, result]}, 1) == "I cannot see any image."
