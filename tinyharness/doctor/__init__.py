"""`tinyharness doctor`: why a run will or will not work, said before the run.

The problem. A newcomer's first run fails for reasons far from the harness: the server is not
started, the model was never pulled, the model cannot call tools, the server quietly uses a
4096-token context while the harness plans for more, the stream carries no token counts. Each shows
up mid-run as a confusing symptom (an HTTP 404, a model that "forgets" its instructions, `?` in the
stats).

The mechanism. Ask the server the questions a run depends on, each answered on one line,
`OK`, `WARN` (a run works, with a limit worth knowing) or `FAIL` (a run will not work), with the fix
(`SKIP` for a probe not sent because the server is still busy with the one before):

    defaults    the defaults file (defaults.py), and where the model and the API came from: the
                flag, a variable, config.toml or the built-in default
    endpoint    the base URL and where it came from (the flag, which variable, config.toml, the
                default)
    key         which key goes to that host as a Bearer token, by its variable's name (never its
                value), or that none does and why (OPENAI_API_KEY goes only to an endpoint from
                --base-url or OPENAI_BASE_URL: endpoint.py)
    server      who answers at the base URL: Ollama (/api/version), llama.cpp (/props), vLLM
                (/version), or another OpenAI-compatible server (/v1/models owned_by, the Server
                header)
    model       pulled / listed (else the exact `ollama pull` command)
    tools, vision, thinking   what Ollama's /api/show says the model can do
    context     the length in force on the server versus the window the harness will assume, and
                (Ollama's native API) the memory that window's KV cache costs, as arithmetic
    tool call   one trivial request with one tool: does a real, well-formed tool call come back?
    streaming   does a streamed answer arrive, and does it report token counts?
    round trip  how long the probe took (a cold model loads first)

Every probe caps its reply (max_tokens 128 for the tool call, 64 otherwise): a model that does not
stop is a finding of its own (finish_reason "length"), not a timeout that keeps the server busy for
the next probe. When no answer comes, three causes are told apart, each with its own fix: nothing
listens (connection refused: start the server); something accepts the connection but does not answer
even a quick GET (busy with another request, or stuck); the quick GET answers but the model sends
nothing in time (most likely still loading).

The probes go through the same client `tinyharness run` would use (--api decides, as in a run).
Exit 0 when a run can work (no FAIL), 1 when it cannot.

What it cannot do: one trivial tool call says the wiring works, not that the model is good at a
real task; measure that with `tinyharness eval`.
"""
import argparse
import os
import socket
import sys
import time
from types import SimpleNamespace
from urllib.parse import urlsplit

import requests

from ..console import printable, warn  # a server's error text is printed in the FAIL lines
from ..context import CONTEXT_WINDOW
from ..defaults import apply as apply_defaults
from ..defaults import refusal, said, source, undo_hint
from ..endpoint import ENDPOINT_ORDER, add_base_url_flag, api_key, key_said
from ..flags import base_url_problem
from ..llm import DEFAULT_MODEL, Client, LLMError
from ..llm.ollama import (
    API_CHOICES,
    choose_dialect,
    could_be_ollama,
    host_root,
    ollama_version,
    show_model,
)
from .model import check_capabilities, check_context, check_model_openai, listed_models

ASK_TIMEOUT = 5             # seconds for the quick questions (version, model list, props)
PROBE_REPLY_TOKENS = 64     # max_tokens of the streaming probe: "OK" needs one or two
# max_tokens of the tool-call probe: one short call, with room to think a little
TOOL_PROBE_REPLY_TOKENS = 128
TOOL_CALL_FIX = ("use a model with tool support; on llama.cpp start the server with --jinja (a "
                 "tool-aware chat template), on llama-cpp-python with --chat_format "
                 "chatml-function-calling (or a GGUF whose template handles tools), on vLLM with "
                 "--enable-auto-tool-choice --tool-call-parser.")
SLOW_ROUND_TRIP = 30        # seconds: slower than this is worth a warning
PROBE_TOOL = {"type": "function", "function": {
    "name": "report", "description": "Report one word back to the user.",
    "parameters": {"type": "object",
                   "properties": {"word": {"type": "string", "description": "the word"}},
                   "required": ["word"]}}}
PROBE_MESSAGES = [{"role": "system", "content": "You are being tested. Use the tool you are "
                                                "given."},
                  {"role": "user", "content": 'Call the tool `report` with the word "ready". Do '
                                              'not answer in text.'}]
STREAM_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]


class Report:
    """Prints each finding as it is made, and remembers whether any was a FAIL."""

    def __init__(self, out=None):
        self.out, self.failed, self.warned = out or sys.stdout, False, 0

    def line(self, status, check, text, fix=None):
        self.failed, self.warned = self.failed or status == "FAIL", self.warned + (status == "WARN")
        from ..llm.keepalive import masked  # a --base-url may carry user:password@
        print(printable(masked(f"{status:<5} {check:<11} {text}"
                               + (f" Fix: {fix}" if fix else ""))), file=self.out, flush=True)


def get(url, timeout=None):
    """(status, JSON or None, headers) of a GET, or None when nothing answers."""
    try:
        response = requests.get(url, timeout=ASK_TIMEOUT if timeout is None else timeout)
    except requests.exceptions.RequestException:
        return None
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, body, response.headers


# --- Which server? --------------------------------------------------------------------------------

def identify(base_url):
    """{kind, version, models, n_ctx, ...} for the server at base_url, or None when nothing
    answers."""
    root = host_root(base_url)
    version = ollama_version(base_url, ASK_TIMEOUT) if could_be_ollama(base_url) else None
    if version:
        return {"kind": "Ollama", "version": version}
    listed = get(base_url.rstrip("/") + "/models")
    if listed is None:
        return None
    status, body, headers = listed
    found = ({"kind": "an OpenAI-compatible server", "models_status": status, "models": [],
              "owned_by": set()})
    for model in (body or {}).get("data") or [] if isinstance(body, dict) else []:
        if isinstance(model, dict):
            found["models"].append(model.get("id"))
            found["owned_by"].add(str(model.get("owned_by")))
            if isinstance(model.get("max_model_len"), int):
                found["n_ctx"] = model["max_model_len"]          # vLLM says it here
    props = get(root + "/props")
    if props and props[0] == 200 and isinstance(props[1], dict) and (
            "default_generation_settings" in props[1] or "build_info" in props[1]):
        found["kind"] = "llama.cpp (llama-server)"
        n_ctx = (props[1].get("default_generation_settings") or {}).get("n_ctx")
        found["n_ctx"] = n_ctx if isinstance(n_ctx, int) else found.get("n_ctx")
    elif "vllm" in found["owned_by"] or "n_ctx" in found or is_version(get(root + "/version")):
        found["kind"] = "vLLM"
    elif "llamacpp" in found["owned_by"]:
        found["kind"] = "llama.cpp (llama-server)"
    elif "me" in found["owned_by"] and "uvicorn" in str(headers.get("server", "")).lower():
        found["kind"] = "llama-cpp-python"                       # its /v1/models says owned_by "me"
    elif "uvicorn" in str(headers.get("server", "")).lower():
        found["kind"] = ("a Python OpenAI-compatible server (uvicorn: llama-cpp-python, vLLM or "
                         "similar)")
    return found


def is_version(answer):
    """vLLM answers GET /version with {"version": "..."}."""
    return (bool(answer) and answer[0] == 200 and isinstance(answer[1], dict)
            and isinstance(answer[1].get("version"), str))


def resolves(host):
    try:
        socket.getaddrinfo(host, None)
        return True
    # socket.gaierror is an OSError; a bad IDN name is a UnicodeError
    except (OSError, UnicodeError):
        return False


def silence(url, timeout=None):
    """Why a quick GET got no answer: "refused" (nothing listens), "timeout" (something accepted the
    connection but sent nothing: a busy or stuck server), "other", or None when it did answer."""
    try:
        requests.get(url, timeout=ASK_TIMEOUT if timeout is None else timeout)
    except requests.exceptions.ConnectTimeout:
        return "timeout"
    except requests.exceptions.ReadTimeout:
        return "timeout"
    except requests.exceptions.ConnectionError as e:
        return "refused" if "refused" in str(e).lower() else "other"
    except requests.exceptions.RequestException:
        return "other"
    return None


def timed_out(error):
    """Did this LLMError come from a timeout? (The door raises its own words `from None`; the cause
    is still on __context__.)"""
    cause = error.__context__
    return isinstance(cause, requests.exceptions.Timeout) or (
        isinstance(cause, requests.exceptions.ConnectionError)
        and "timed out" in str(cause).lower())


BUSY = ("something accepts connections at {url} but did not answer a quick question (GET {path}) "
        "within {t:g} s: the server is busy with another request (llama-cpp-python and Ollama work "
        "on one request per model at a time; an abandoned request keeps it busy until it ends) or "
        "stuck.")
BUSY_FIX = ("wait until the other request ends (or stop the client that sent it), or restart the "
            "server; then run the doctor again.")


# --- The checks -----------------------------------------------------------------------------------

def check_server(report, args):
    found = identify(args.base_url)
    host = urlsplit(args.base_url).hostname
    if found is None and not resolves(host):  # a typo in the name, not a server that is down
        report.line("FAIL", "server",
                    f"the host name {host!r} of {args.base_url} could not be resolved.",
                    "check the spelling of --base-url (or TINYHARNESS_BASE_URL), e.g. "
                    "http://localhost:11434/v1.")
        return None
    if found is None and silence(args.base_url.rstrip("/") + "/models") == "timeout":
        report.line("FAIL", "server", BUSY.format(url=args.base_url, path="/models", t=ASK_TIMEOUT),
                    BUSY_FIX)
        return None
    if found is None:
        report.line("FAIL", "server",
                    f"nothing answers at {args.base_url} (the connection was refused or failed).",
                    "start the server (Ollama: `ollama serve`), or point --base-url (or "
                    "TINYHARNESS_BASE_URL) at the one you run, e.g. http://localhost:8080/v1 for "
                    "llama.cpp.")
        return None
    if found["kind"] == "Ollama":
        report.line("OK", "server",
                    f"Ollama {found['version']} answers at {host_root(args.base_url)}.")
    elif (found.get("models_status") == 404
          and not urlsplit(args.base_url).path.rstrip("/").endswith("/v1")):
        report.line("FAIL", "server",
                    f"something answers at {args.base_url}, but not the OpenAI API (404 on "
                    "/models).",
                    f"add /v1: --base-url {args.base_url.rstrip('/')}/v1")
        return None
    elif found.get("models_status") != 200:
        report.line("WARN", "server", f"{found['kind']} answers at {args.base_url}, but /models "
                    f"said HTTP {found['models_status']}.",
                    "check --base-url and TINYHARNESS_API_KEY.")
    else:
        report.line("OK", "server", f"{found['kind']} answers at {args.base_url}.")
    return found


def check_dialect(report, args, found):
    """Which API the run will speak, said once, with what it means for the context length."""
    if args.api == "openai" or (args.api == "auto" and found["kind"] != "Ollama"):
        api = "openai"
    else:
        api = "ollama"
    if found["kind"] == "Ollama" and api == "openai":
        report.line("WARN", "api", "the run will use Ollama's /v1 shim (api openai, from "
                    f"{source(args, 'api')}), where the context length cannot be set.",
                    f"{undo_hint(args, 'api')} (auto picks Ollama's native API).")
    elif api == "ollama" and found["kind"] != "Ollama":
        report.line("FAIL", "api",
                    f"--api ollama, but {found['kind']} does not speak Ollama's native API.",
                    "use --api auto or openai.")
    else:
        what = ("Ollama's native /api/chat" if api == "ollama"
                else "the OpenAI API (/v1/chat/completions)")
        report.line("OK", "api", f"the run will use {what}.")
    return api


def check_model_ollama(report, args):
    listed = get(host_root(args.base_url) + "/api/tags")
    names = [name for m in listed_models(listed) if isinstance(name := m.get("name"), str)]
    wanted = {args.model, args.model + ":latest"} if ":" not in args.model else {args.model}
    if wanted & set(names):
        report.line("OK", "model", f"{args.model} is pulled.")
        return show_model(args.base_url, args.model, ASK_TIMEOUT) or {}
    have = (f" (this server has: {', '.join(names)})" if names
            else " (this server has no models yet)")
    report.line("FAIL", "model", f"{args.model} is not on this server{have}.",
                f"`ollama pull {args.model}`, or choose one it has with --model.")
    return None


def loaded_context(args):
    """The context length a loaded model runs with, from /api/ps (newer Ollama says it), or None."""
    for model in listed_models(get(host_root(args.base_url) + "/api/ps")):
        if model.get("name") == args.model and isinstance(model.get("context_length"), int):
            return model["context_length"]
    return None


def make_client(args, api, stream, reply_tokens):
    """The client a run would build, for the probes, with the reply capped: a model that does not
    stop must not keep the server busy for minutes (and every later probe waiting behind it)."""
    client = Client(args.base_url, args.model, api_key=api_key(source(args, 'base_url')),
                    timeout=args.timeout, stream=stream, max_reply_tokens=reply_tokens)
    run_args = SimpleNamespace(api=api, base_url=args.base_url, model=args.model,
                               context_window=args.context_window, think=None)
    return choose_dialect(run_args, client, CONTEXT_WINDOW)[0]


def probe_failed(report, check, args, error):
    """A probe got no answer: say which of the causes it was, each with its own fix. Returns True
    when the server may still be working on the abandoned request (later probes would only wait)."""
    if not timed_out(error):
        report.line("FAIL", check, f"the probe request failed: {error}")
        return False
    quiet = silence(args.base_url.rstrip("/") + "/models")
    if quiet == "timeout":
        report.line("FAIL", check, BUSY.format(url=args.base_url, path="/models", t=ASK_TIMEOUT) +
                    f" (The probe itself waited {args.timeout:g} s.)", BUSY_FIX)
    elif quiet is not None:
        report.line("FAIL", check,
                    f"the server stopped answering during the probe ({quiet}): it may have "
                    "crashed.",
                    "check the server's log and start it again.")
    else:
        report.line("FAIL", check, "the server answers quick questions, but the model sent no "
                    f"answer within {args.timeout:g} s to a one-line request with a short reply: "
                    "it is most likely still loading (the first call after idle loads the model, "
                    "which can take minutes), or far too slow for this machine.",
                    "run the doctor again in a minute (`ollama ps` shows whether the "
                    "model is loaded), raise --timeout, or choose a smaller model.")
    return True


def cut_short(report, check, finish_reason, tokens):
    """finish_reason "length": the model was still talking at the probe's cap. A finding of its
    own."""
    if finish_reason != "length":
        return False
    report.line("WARN", check, f"the reply was cut at the probe's cap of {tokens} tokens "
                "(finish_reason \"length\"): for a one-line request the model did not stop. In a "
                "run such replies end at --max-reply-tokens.",
                "a model whose chat template matches it stops (check the server's chat template or "
                "--chat_format); a thinking model may need --no-think or a larger "
                "--max-reply-tokens.")
    return True


def probe_tool_call(report, args, api):
    """One trivial request with one tool; the answer should be a well-formed call to it.
    Returns (seconds, busy): busy when the server may still be working on an abandoned probe."""
    started = time.monotonic()
    try:
        answer = (make_client(args, api, False,
                              TOOL_PROBE_REPLY_TOKENS).chat(PROBE_MESSAGES, tools=[PROBE_TOOL]))
    except LLMError as e:
        return None, probe_failed(report, "tool call", args, e)
    seconds = time.monotonic() - started
    message = answer[0]
    calls = message.get("tool_calls") or []
    problems = message.get("_problems") or {}
    # cut or not, text instead of a call is what a run would get: an agent that cannot act
    if not calls:
        said = (message.get("content") or "").strip().replace("\n", " ")[:120]
        cut = (f" (cut at the probe's cap of {TOOL_PROBE_REPLY_TOKENS} tokens)"
               if answer[2] == "length" else "")
        report.line("FAIL", "tool call",
                    f"asked for a call to `report`, the model answered in text{cut}: {said!r}.",
                    TOOL_CALL_FIX)
    elif cut_short(report, "tool call", answer[2], TOOL_PROBE_REPLY_TOKENS):
        return seconds, False
    elif problems or calls[0]["function"].get("name") != "report":
        what = "; ".join(problems.values()) or f"it called {calls[0]['function'].get('name')!r}"
        report.line("WARN", "tool call", f"a tool call came back, but not a clean one: {what}.",
                    "a bigger model, or one trained for tool calls, does better.")
    else:
        report.line("OK", "tool call", f"report({calls[0]['function']['arguments']}) came back as "
                    f"a real tool call in {seconds:.1f} s.")
    return seconds, False


def probe_stream(report, args, api):
    started = time.monotonic()
    try:
        answer = make_client(args, api, True, PROBE_REPLY_TOKENS).chat(STREAM_MESSAGES)
    except LLMError as e:
        if timed_out(e):
            probe_failed(report, "streaming", args, e)
        else:
            report.line("FAIL", "streaming", f"a streamed answer failed: {e}",
                        "run without --stream (a pipe does).")
        return None
    usage = answer[1] or {}
    if cut_short(report, "streaming", answer[2], PROBE_REPLY_TOKENS):
        pass
    elif isinstance(usage.get("prompt_tokens"), int):
        report.line("OK", "streaming", "works and reports usage "
                    f"(prompt_tokens={usage['prompt_tokens']}, "
                    f"completion_tokens={usage.get('completion_tokens', '?')}).")
    else:
        report.line("WARN", "streaming", "works, but the server reports no token counts: [stats] "
                    "will say ? and the context watch falls back to the harness's own estimate.",
                    "a server that reports usage (Ollama, llama-server) measures instead of "
                    "guessing.")
    return time.monotonic() - started


def check_round_trip(report, seconds):
    if seconds is None:
        return
    if seconds > SLOW_ROUND_TRIP:
        report.line("WARN", "round trip", f"{seconds:.1f} s for a one-line request: a cold model "
                    "loads first, or the machine is slow for this model.",
                    "run the doctor again (a loaded model answers faster), or choose a smaller "
                    "model.")
    else:
        report.line("OK", "round trip", f"{seconds:.1f} s for a one-line request.")


def diagnose(args, out=None):
    """Run every check in order; return the exit code (0: a run can work, 1: it cannot)."""
    report = Report(out)
    for check, text in said(args):
        report.line("INFO", check, text)
    report.line("INFO", "endpoint", f"{args.base_url} (from {source(args, 'base_url')}; the order: "
                f"{ENDPOINT_ORDER}).")
    report.line("INFO", "key", key_said(source(args, 'base_url'), args.base_url))
    found = check_server(report, args)
    if found is None:
        return verdict(report)
    api = check_dialect(report, args, found)
    shown, tools_ok = {}, True
    if found["kind"] == "Ollama":
        shown = check_model_ollama(report, args)
        if shown is None:
            return verdict(report)
        tools_ok = check_capabilities(report, args, shown)
    else:
        check_model_openai(report, args, found)
    check_context(report, args, found, api, shown, lambda: loaded_context(args))
    seconds, busy = probe_tool_call(report, args, api) if tools_ok else (None, False)
    # the abandoned probe may keep the server busy: a second probe would only fail the same way
    if busy:
        report.line("SKIP", "streaming",
                    "not probed: the server may still be working on the abandoned probe.")
        return verdict(report)
    streamed = probe_stream(report, args, api)
    check_round_trip(report, seconds if seconds is not None else streamed)
    return verdict(report)


def verdict(report):
    if report.failed:
        print("Verdict: a run will not work until the FAIL lines are fixed.", file=report.out,
              flush=True)
        return 1
    warned = (f" ({report.warned} WARN line{'s' * (report.warned > 1)} above: read them)"
              if report.warned else "")
    print(f"Verdict: a run can work{warned}.", file=report.out, flush=True)
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="tinyharness doctor",
        description="Check the model server and the model before a run: reachable, which server, "
                    "model pulled, tools/vision/thinking, context length, a real tool call, "
                    "streaming and usage, round trip. Each line says OK, WARN or FAIL, with the "
                    "fix. Exit 0 when a run can work, 1 when not.")
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    add_base_url_flag(parser, "the server's OpenAI-compatible endpoint")
    parser.add_argument("--api", choices=API_CHOICES,
                        default=os.environ.get("TINYHARNESS_API", "auto"),
                        help="the dialect the run will use, as for `tinyharness run` (default "
                             "%(default)s)")
    parser.add_argument("--context-window", type=int, default=None, metavar="TOKENS",
                        help="the window you will pass to `tinyharness run`, if any")
    parser.add_argument("--timeout", type=float, default=180, metavar="SECONDS",
                        help="longest wait for one probe answer (a cold model loads first; default "
                             "%(default)s)")
    return parser


def main(argv=None):
    parser = build_parser()
    problem = apply_defaults(parser, os.getcwd(), warn)  # the defaults file, below flags and env
    args = parser.parse_args(argv)
    if refused := refusal(problem, args):
        parser.error(refused)
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    if not args.timeout > 0:
        parser.error("--timeout must be more than 0")
    if problem := base_url_problem(args.base_url, args.base_url_source):
        parser.error(problem)
    if args.api not in API_CHOICES:
        parser.error(f"--api (or TINYHARNESS_API) must be one of {', '.join(API_CHOICES)}, not "
                     f"{args.api!r}")
    try:
        return diagnose(args)
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
