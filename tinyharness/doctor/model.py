"""The doctor's model checks: whether the server has it, what it can do, and how much of a
conversation it holds.

The problem. A run can reach the server and still fail on the model: one that cannot call tools
makes every run a failure, and a context shorter than the window the harness plans with is cut
without a word - Ollama over /v1 drops the oldest messages after the system prompt, the task
first.

The mechanism. The server's list of models (/v1/models, Ollama's /api/tags; from an answer of
another shape `listed_models` takes none) says whether it has the model. Ollama's /api/show says
the model's capabilities (tools, vision, thinking) and the length it was trained for; /api/ps the
length a loaded model runs with; llama.cpp's /props its n_ctx. Each is set against the window the
harness will assume (--context-window, or its own choice), and a WARN line names the flag or
setting that makes them agree. The KV cache's size for that window is worked out from the model's
shape, so the user sees what a long window costs.

What it cannot do. It reports what the server says; a server that says nothing (vLLM, an old
Ollama) gets a WARN and the probes in doctor/__init__.py tell the rest. The memory figure is
arithmetic, not a measurement.
"""
from ..context import CONTEXT_WINDOW
from ..llm.ollama import OLLAMA_WINDOW_CAP, capabilities, kv_cache_bytes, model_context_length


def check_capabilities(report, args, shown):
    can = capabilities(shown)
    if can is None:
        report.line("WARN", "tools", f"Ollama does not say what {args.model} can do (an old "
                    "Ollama?); the probe below will tell.")
        return True
    if "tools" in can:
        report.line("OK", "tools", f"{args.model} can call tools.")
    else:
        report.line("FAIL", "tools", f"{args.model} cannot call tools (its capabilities: "
                    f"{', '.join(can)}); the harness needs tool calls.",
                    "choose a model with tool support, e.g. qwen3:8b (`ollama show MODEL` lists a "
                    "model's capabilities).")
    if "vision" in can:
        report.line("OK", "vision", f"{args.model} can see images (--image, view_image).")
    else:
        report.line("WARN", "vision",
                    f"{args.model} cannot see images: --image and view_image will not work.",
                    "for pictures, use a vision model (e.g. qwen2.5vl:7b).")
    if "thinking" in can:
        report.line("OK", "thinking", f"{args.model} can think; --think/--no-think switch it.")
    else:
        report.line("OK", "thinking",
                    f"{args.model} does not think aloud (--think would be refused).")
    return "tools" in can


def check_context(report, args, found, api, shown, loaded_context):
    """The length in force on the server against the window the harness will plan with.
    `loaded_context()`: the length a loaded Ollama model runs with now (asked only over /v1)."""
    if found["kind"] == "Ollama":
        length = model_context_length(shown)
        if api == "ollama":
            window = (args.context_window
                      or (min(length, OLLAMA_WINDOW_CAP) if length else CONTEXT_WINDOW))
            if length and window > length:
                return report.line("WARN", "context", f"the harness will assume {window} tokens "
                                   f"but {args.model} holds {length}.",
                                   f"--context-window {length}")
            return report.line("OK", "context", f"the harness assumes {window} tokens and sends it "
                               "as num_ctx with truncate: false (the model holds "
                               f"{length or 'an unknown number of'}), so nothing is cut "
                               f"silently{memory_cost(shown, window)}.")
        window = args.context_window or CONTEXT_WINDOW
        loaded = loaded_context()
        in_force = (f"{loaded} (loaded now)" if loaded
                    else "Ollama's default (4096 below 24 GiB of video memory)")
        if loaded and loaded >= window:
            return (report.line("OK", "context",
                                f"in force {in_force}; the harness assumes {window}."))
        return report.line("WARN", "context", f"over /v1 the length in force is {in_force}, not "
                           f"settable per request; the harness assumes {window}, and past the "
                           "length in force Ollama silently drops the oldest messages after the "
                           "system prompt (the task first).",
                           f"--api ollama, or start Ollama with OLLAMA_CONTEXT_LENGTH={window}.")
    window = args.context_window or CONTEXT_WINDOW
    n_ctx = found.get("n_ctx")
    if n_ctx is None:
        return report.line("WARN", "context", "the server does not say its context length; the "
                           f"harness assumes {window}.",
                           "check the server's setting (llama.cpp -c, llama-cpp-python --n_ctx, "
                           "vLLM --max-model-len) and pass --context-window to match.")
    if n_ctx < window:
        return report.line("WARN", "context",
                           f"the server holds {n_ctx} tokens; the harness assumes {window}.",
                           f"--context-window {n_ctx}, or start the server with a larger context.")
    report.line("OK", "context", f"the server holds {n_ctx} tokens; the harness assumes {window}.")


def memory_cost(shown, window):
    """'; its KV cache: about 1.1 GiB (...)' for the window, or '' when the model's shape is
    unknown."""
    size = kv_cache_bytes(shown, window)
    if not size:
        return ""
    per_token = kv_cache_bytes(shown, 1)
    return (f"; its KV cache: about {size / 2 ** 30:.2f} GiB ({per_token / 1024:.0f} KiB a token x "
            f"{window}, arithmetic from the model's shape at 16 bits, not measured)")


def check_model_openai(report, args, found):
    models = [m for m in found.get("models") or [] if m]
    if not models or args.model in models:
        report.line("OK", "model", f"{args.model} is listed." if models else
                    f"the server lists no models; {args.model} will be asked for.")
    else:
        report.line("WARN", "model", f"{args.model} is not in the server's list "
                    f"({', '.join(models[:5])}); a server with one model may answer anyway.",
                    f"--model {models[0]}")


def listed_models(answer):
    """The objects in the `models` list of a GET's JSON (get()); none from an answer of another
    shape."""
    body = answer[1] if answer else None
    models = body.get("models") if isinstance(body, dict) else None
    return [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
