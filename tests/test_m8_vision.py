"""m8: eyes. Run on m8, every later stage and `tinyharness run`.

The "model" is the scripted server with `vision_policy`: it decodes the PNG each request carries and
names the colours of its two halves, and says "I cannot see any image." when none arrived. So an
answer here is right only when the harness really delivered the picture, and the control image
(blue-red.png) catches a harness or a model that just says the usual "red, then blue".
"""
import base64
import os
import shutil
import socketserver
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, stages_from, tool_call, tool_results
from tinyharness.testing import ScriptedServer, vision_policy
from tinyharness.testing.images import split_png

LADDER = stages_from("m8")
ASK = "What colour is each half of the image?"
ANSWERS = {"red-blue.png": "left: red, right: blue", "blue-red.png": "left: blue, right: red"}
NO_IMAGE = "I cannot see any image."
TOO_BIG = 5 * 1024 * 1024 + 1          # one byte over the harness's cap
DROPPED = "probably never reached the model"


@pytest.fixture
def pictures(workspace):
    """The workspace with the example images (examples/images) in it."""
    for name in ("red-blue.png", "blue-red.png", "green.png"):
        shutil.copy(ROOT / "examples" / "images" / name, workspace / name)
    (workspace / "notes.txt").write_text("not a picture\n")
    return workspace


def run(stage, workspace, *args, before=(), guess=NO_IMAGE, drop_images=False):
    """Run the stage against the scripted vision model; `before` are its replies ahead of looking."""
    policy = vision_policy(guess, before=[dict(r) for r in before])
    # --yes approves a URL the model chose on the stages; the package still asks, unless told (README, sandbox table)
    urls = ("--allow-image-urls",) if stage == FINAL else ()
    with ScriptedServer(policy=policy, drop_images=drop_images) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *urls, *args, approve=True)
    assert "Traceback" not in result.stderr, result.stderr
    return result, server


def answer(result):
    assert result.returncode == 0, result.stderr
    return result.stdout.rstrip().splitlines()[-1]


def image_bytes(part):
    """The bytes carried by an image_url part (a base64 data URI, never a link)."""
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    return base64.b64decode(url.split(",", 1)[1])


def shape(messages):
    """Roles after the first user message, with the kind of content: what the pairing rules are about."""
    return [(m["role"], "parts" if isinstance(m.get("content"), list) else "text") for m in messages[2:]]


# --- --image: the first user message --------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("name", ["red-blue.png", "blue-red.png"])
def test_image_flag_the_model_answers_from_the_pixels(stage, pictures, name):
    result, server = run(stage, pictures, "--image", name, ASK)
    assert answer(result) == ANSWERS[name]                 # the control image gives the other answer
    first = server.requests[0]["messages"][1]
    text, image = first["content"]
    assert first["role"] == "user" and text["type"] == "text" and image["type"] == "image_url"
    assert text["text"].startswith(ASK) and "already attached" in text["text"]
    assert "do not look for it or call a tool" in text["text"]
    assert image_bytes(image) == (pictures / name).read_bytes()
    assert "warning" not in result.stderr and len(server.requests) == 1


@pytest.mark.parametrize("stage", LADDER)
def test_image_flag_takes_the_users_file_from_outside_the_workspace(stage, workspace, tmp_path):
    (tmp_path / "mine.png").write_bytes(split_png("green", "red"))      # the user chose it: allowed
    result, _ = run(stage, workspace, "--image", str(tmp_path / "mine.png"), ASK)
    assert answer(result) == "left: green, right: red"


@pytest.mark.parametrize("stage", LADDER)
def test_view_image_description_does_not_send_the_model_looking_for_an_attached_image(stage, pictures):
    _, server = run(stage, pictures, "--image", "red-blue.png", ASK)
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert tools["view_image"]["parameters"]["required"] == ["path"]
    assert "already visible" in tools["view_image"]["description"]
    assert "do not call this" in tools["view_image"]["description"]


BAD_FILES = {"fake.png": (b"hello", "fake.png is not a PNG, JPEG or WebP image"),
             "anim.gif": (b"GIF89a" + bytes(20), "anim.gif is a GIF"),
             "huge.png": (b"\x89PNG\r\n\x1a\n" + bytes(TOO_BIG), "huge.png is too big"),
             "nope.png": (None, "no such file: nope.png")}


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_image_file_is_a_usage_error_before_any_model_call(stage, workspace, name):
    content, message = BAD_FILES[name]
    if content is not None:
        (workspace / name).write_bytes(content)
    result, server = run(stage, workspace, "--image", name, ASK)
    assert result.returncode == 2, result.stderr
    assert "--image: " in result.stderr and message in result.stderr
    assert server.requests == []


# --- view_image: a text result, then the picture after ALL results ---------------------------------

@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("first", ["view_image", "list_dir"])
def test_view_image_the_image_follows_all_tool_results_of_the_turn(stage, pictures, first):
    pair = [tool_call("view_image", path="blue-red.png"), tool_call("list_dir", path=".")]
    result, server = run(stage, pictures, ASK, before=[calls(*(pair if first == "view_image" else pair[::-1]))])
    assert answer(result) == ANSWERS["blue-red.png"]
    assert '  [tool] view_image({"path": "blue-red.png"})' in result.stdout.splitlines()
    sent = server.requests[1]["messages"]
    assert shape(sent) == [("assistant", "text"), ("tool", "text"), ("tool", "text"), ("user", "parts")]
    ids = [c["id"] for c in sent[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent[3:5]] == ids   # each call answered, in order, before the image
    by_name = {c["function"]["name"]: c["id"] for c in sent[2]["tool_calls"]}
    assert tool_results(server.requests[1])[by_name["view_image"]].startswith("OK: loaded blue-red.png (image/png, ")
    images = [p for p in sent[5]["content"] if p["type"] == "image_url"]
    assert [image_bytes(p) for p in images] == [(pictures / "blue-red.png").read_bytes()]
    assert sent[5]["content"][0]["text"].startswith("[harness]")
    assert "warning" not in result.stderr


@pytest.mark.parametrize("stage", LADDER)
def test_two_images_in_one_turn_come_in_one_message_in_call_order(stage, pictures):
    looks = calls(tool_call("view_image", path="red-blue.png"), tool_call("view_image", path="blue-red.png"))
    result, server = run(stage, pictures, ASK, before=[looks])
    assert answer(result) == "image 1: left: red, right: blue; image 2: left: blue, right: red"
    assert shape(server.requests[1]["messages"]) == [("assistant", "text"), ("tool", "text"), ("tool", "text"),
                                                     ("user", "parts")]


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("path, expected", [
    ("../outside.png", "BLOCKED: "),                 # the path guard holds for view_image too
    ("link.png", "BLOCKED: "),                       # a symlink out of the workspace
    ("notes.txt", "ERROR: notes.txt is not a PNG, JPEG or WebP image"),
    ("missing.png", "ERROR: no such file: missing.png"),
])
def test_view_image_refusals_and_errors_reach_the_model(stage, pictures, path, expected):
    (pictures.parent / "outside.png").write_bytes(split_png("red", "blue"))
    (pictures / "link.png").symlink_to(pictures.parent / "outside.png")
    result, server = run(stage, pictures, ASK, before=[calls(tool_call("view_image", path=path))])
    assert answer(result) == NO_IMAGE                      # nothing was sent, and the loop went on
    outcome = tool_results(server.requests[1])["call_1"]
    assert outcome.startswith(expected), outcome
    if expected == "BLOCKED: ":
        assert "outside the workspace" in outcome
    assert shape(server.requests[1]["messages"]) == [("assistant", "text"), ("tool", "text")]


# --- URLs: the harness downloads, checks and sends bytes ------------------------------------------

class Site(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):                      # skip HTTPServer's reverse DNS lookup
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        pass                                    # a client that stops reading at the size cap is expected


class Pages(BaseHTTPRequestHandler):
    routes = {"/red-blue.png": ("image/png", split_png("red", "blue")),
              "/blue-red": ("image/png", split_png("blue", "red")),       # no extension: the bytes decide
              "/login": ("text/html; charset=utf-8", b"<html>Please log in</html>"),
              "/liar.png": ("image/png", b"this is not an image at all"),
              "/huge.png": ("image/png", b"\x89PNG\r\n\x1a\n" + bytes(TOO_BIG))}

    seen = []  # every path requested, so a test can tell whether the harness fetched at all

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.seen.append(self.path)
        if self.path not in self.routes:
            return self.send_error(404, "Not Found")
        kind, body = self.routes[self.path]
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site():
    server = Site(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("stage", LADDER)
def test_image_urls_are_downloaded_by_the_harness(stage, workspace, site):
    result, server = run(stage, workspace, "--image", site + "/red-blue.png", ASK)
    assert answer(result) == ANSWERS["red-blue.png"]
    result, server = run(stage, workspace, ASK, before=[calls(tool_call("view_image", path=site + "/blue-red"))])
    assert answer(result) == ANSWERS["blue-red.png"]      # the model got bytes: it cannot fetch a link
    assert tool_results(server.requests[1])["call_1"].startswith(f"OK: loaded {site}/blue-red (image/png, ")
    assert list(workspace.iterdir()) == []                # nothing was written to disk


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("reply, fetched", [("n\n", False), ("", False), ("y\n", True)])
def test_a_url_the_model_chose_is_fetched_only_with_permission(stage, workspace, site, reply, fetched):
    # a URL can carry data out (https://example.com/?q=<secret>): like a shell command, it asks first
    url = f"{site}/red-blue.png?asked={stage}-{len(reply)}"
    Pages.routes[url[len(site):]] = Pages.routes["/red-blue.png"]
    with ScriptedServer(policy=vision_policy(NO_IMAGE, before=[calls(tool_call("view_image", path=url))])) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, ASK, tty=reply)  # typed at the terminal
    assert f'Allow view_image({{"path": "{url}"}})? [y/N] ' in result.stdout
    assert (url[len(site):] in Pages.seen) == fetched
    outcome = tool_results(server.requests[1])["call_1"]
    assert outcome.startswith("OK: loaded") if fetched else outcome.startswith("DENIED: ")
    if stage == FINAL and not reply:  # nobody there to answer at all: the package says nothing was allowed (exit 3)
        assert result.returncode == 3 and "\nStopped: nothing was allowed: " in result.stdout, result.stdout
    else:
        assert answer(result) == (ANSWERS["red-blue.png"] if fetched else NO_IMAGE)


@pytest.mark.parametrize("stage", LADDER)
def test_a_workspace_image_needs_no_permission(stage, pictures):
    with ScriptedServer(policy=vision_policy(NO_IMAGE, before=[calls(tool_call("view_image", path="blue-red.png"))])) as server:
        result = run_stage(stage, pictures, "--base-url", server.base_url, ASK, stdin="")
    assert "Allow view_image" not in result.stdout and answer(result) == ANSWERS["blue-red.png"]


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("page, message", [
    ("/login", "is not an image: the server sent text/html"),
    ("/liar.png", "(sent as image/png) is not a PNG, JPEG or WebP image"),
    ("/huge.png", f"is too big: {TOO_BIG + 8} bytes"),   # cut off by the declared length
    ("/gone.png", "HTTP 404"),
])
def test_bad_urls_are_clear_errors_for_the_user_and_for_the_model(stage, workspace, site, page, message):
    result, server = run(stage, workspace, "--image", site + page, ASK)
    assert result.returncode == 2 and "--image: " in result.stderr and message in result.stderr
    assert server.requests == []
    result, server = run(stage, workspace, ASK, before=[calls(tool_call("view_image", path=site + page))])
    assert answer(result) == NO_IMAGE
    outcome = tool_results(server.requests[1])["call_1"]
    assert outcome.startswith("ERROR: ") and message in outcome


# --- Did it arrive? -------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_a_dropped_image_is_reported_even_when_the_answer_is_right(stage, pictures):
    # The source articles' trap: the server drops the image (Ollama with gemma4 e2b/e4b) and the
    # model names the usual pair. Right answer, no image: only the token count tells.
    result, _ = run(stage, pictures, "--image", "red-blue.png", ASK, guess=ANSWERS["red-blue.png"], drop_images=True)
    assert answer(result) == ANSWERS["red-blue.png"]
    assert result.stderr.count(DROPPED) == 1
    result, _ = run(stage, pictures, "--image", "red-blue.png", ASK, guess=ANSWERS["red-blue.png"])
    assert DROPPED not in result.stderr                    # delivered: no warning for the same answer


@pytest.mark.parametrize("stage", LADDER)
def test_a_dropped_view_image_is_reported_on_the_request_that_carried_it(stage, pictures):
    looks = [calls(tool_call("list_dir", path=".")), calls(tool_call("view_image", path="green.png")),
             calls(tool_call("read_file", path="notes.txt"))]
    result, server = run(stage, pictures, ASK, before=looks, drop_images=True)
    assert answer(result) == NO_IMAGE and len(server.requests) == 4
    warnings = [line for line in result.stderr.splitlines() if DROPPED in line]
    assert len(warnings) == 1 and "prompt tokens" in warnings[0]


@pytest.mark.parametrize("stage", LADDER)
def test_no_false_alarm_when_old_results_are_cut_before_the_image_turn(stage, pictures):
    # Long results make the context policy rewrite old messages between turns, so the request that
    # brings the image can be smaller than the one before it. The check must still see the image.
    for i in range(4):
        (pictures / f"log{i}.txt").write_text(f"line {i} of a long log\n" * 400)
    looks = [calls(tool_call("read_file", path=f"log{i}.txt")) for i in range(4)]
    looks.append(calls(tool_call("view_image", path="red-blue.png")))
    result, server = run(stage, pictures, ASK, before=looks)
    assert answer(result) == ANSWERS["red-blue.png"]
    assert DROPPED not in result.stderr
    result, _ = run(stage, pictures, ASK, before=looks, drop_images=True)
    assert result.stderr.count(DROPPED) == 1


# --- Try it without a model: `tinyharness fake-server --vision` ----------------------------------

@pytest.mark.parametrize("drop", [False, True])
def test_fake_server_can_play_a_vision_model(pictures, drop):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "tinyharness", "fake-server", "--vision"] + ["--drop-images"] * drop
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline()
        assert line.startswith("Scripted model server on http://127.0.0.1:") and "vision model" in line, line
        base_url = line.split(" on ", 1)[1].split()[0]
        result = run_stage(LADDER[0], pictures, "--base-url", base_url, "--image", "blue-red.png", ASK)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert answer(result) == (NO_IMAGE if drop else ANSWERS["blue-red.png"])
    assert (DROPPED in result.stderr) == drop


# --- The arrival check's arithmetic -----------------------------------------------------------

def test_arrival_watch_measures_from_the_previous_request_not_from_a_guess():
    # A real server counts text differently from characters/4: here 10% more. Estimating the whole
    # request would hide a dropped image behind that error; the offset from the last measurement
    # does not, and it follows a result that a context policy cut in between.
    from tinyharness.arrival import ArrivalWatch, text_tokens
    from tinyharness.vision import arrival_check, image_part
    before = [{"role": "user", "content": "look"}, {"role": "tool", "tool_call_id": "c1", "content": "x" * 4000}]
    measured = text_tokens(before) * 11 // 10
    picture = {"role": "user", "content": [{"type": "text", "text": "a.png:"},
                                           image_part("image/png", split_png("red", "blue"))]}
    after = [before[0], {**before[1], "content": "[cut]"}, picture]        # less text, one image more
    change = text_tokens(after) - text_tokens(before)
    assert change < 0
    assert arrival_check(measured + change, text_tokens(after)) is None   # the whole-request guess misses it
    for image_tokens, warned in [(0, True), (300, False)]:
        watch = ArrivalWatch()
        assert watch.check(before, None, {"prompt_tokens": measured}) is None   # no image yet: nothing to check
        warning = watch.check(after, None, {"prompt_tokens": measured + change + image_tokens})
        assert (warning is not None and DROPPED in warning) == warned
        assert watch.check(after, None, {"prompt_tokens": measured + change}) is None   # no new image: no check


@pytest.mark.parametrize("stage", stages_from("m8", final=False))
def test_the_stage_and_the_package_share_one_vision_module(stage):
    # One copy of the message shapes, the loader and its checks, the arrival check: a fix in one must go into the other.
    for name in ("vision.py", "imageload.py", "arrival.py"):
        assert (ROOT / stage / name).read_bytes() == (ROOT / "tinyharness" / name).read_bytes(), name


@pytest.mark.parametrize("stage", LADDER)
def test_a_big_picture_counts_as_image_tokens_in_the_context_estimate(stage, pictures):
    # The context watch (m5) tells its own cuts from the server's by an estimate of what it sent. Counted
    # by its base64, a 3 MB picture arriving on the turn the scissors cut would look like growth, and
    # the server's smaller count like a silent cut of the prompt's start: a false warning.
    (pictures / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(3 * 1024 * 1024))
    for i in range(4):
        (pictures / f"log{i}.txt").write_text(f"line {i} of a long log\n" * 400)
    looks = [calls(tool_call("read_file", path=f"log{i}.txt")) for i in range(4)]
    result, _ = run(stage, pictures, ASK, before=looks + [calls(tool_call("view_image", path="photo.png"))])
    assert result.returncode == 0 and "[context]" not in result.stderr, result.stderr


def test_a_big_picture_does_not_make_the_package_cut_the_context(pictures):
    # tinyharness cuts old results when its estimate of the request passes 75% of the window. A 3 MB
    # photo is 4 MB of base64, 1M "tokens" by characters/4, but a vision model spends a few hundred
    # tokens on it: counted by its base64, one photo would make every old result look too much.
    (pictures / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(3 * 1024 * 1024))
    (pictures / "a.txt").write_text("alpha " * 200)
    looks = [calls(tool_call("read_file", path="a.txt")), calls(tool_call("list_dir", path=".")),
             calls(tool_call("list_dir", path="."))]
    result, server = run(FINAL, pictures, "--image", "photo.png", ASK, before=looks)
    assert result.returncode == 0, result.stderr
    assert tool_results(server.requests[-1])["call_1"] == "alpha " * 200     # still whole, not a stub
    assert DROPPED not in result.stderr
