"""python -m m7_eval "TASK": run the agent loop in the current folder (the workspace)."""
import argparse
import os
import sys
from urllib.parse import urlsplit

from .llm import DEFAULT_BASE_URL, DEFAULT_MODEL, Client, LLMError
from .wire import printable
from .hooks import approve_everything, ask_user
from .guards import MAX_SECONDS, MAX_TURNS, Stopped
from .context import CONTEXT_WINDOW
from .edges import NO_ANSWER, Stats
from .loop import run_agent


def usage_problem(args, extra):
    """What makes the command line unusable, found before the first model call (exit 2) rather than
    after the model's work is spent: stray words, a URL requests cannot use, a transcript path that
    cannot be written."""
    if extra:  # `... find the budget` without quotes: only "find" became the task
        task = " ".join([args.task, *extra])
        quote = "" if any(e.startswith("-") for e in extra) else f'; put the task in quotes: "{task}"'
        return f"unrecognized arguments: {' '.join(extra)}{quote}"
    try:  # urlsplit and .port raise ValueError for 'http://[::1' or a port that is not a number up to 65535
        url = urlsplit(args.base_url)
        if url.scheme not in ("http", "https") or not url.hostname or url.port == 0:
            raise ValueError
    except ValueError:
        return (f"--base-url {args.base_url!r} is not an http(s) URL with a host (and a port from 1 to 65535); "
                f"for example --base-url {DEFAULT_BASE_URL}")
    path = args.transcript
    if path is not None:  # open it as the transcript will be, without emptying it (O_NONBLOCK: a FIFO cannot hang us)
        existed = os.path.lexists(path)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK))
        except OSError as e:  # '' or a folder, a missing folder, no permission
            return f"--transcript {path!r} cannot be written ({e.strerror}); for example --transcript run.json"
        if not existed:
            os.remove(path)  # it was only a test: leave nothing behind
    return None


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m m7_eval",
                                     description="Run the agent on TASK, using the current folder as its workspace.",
                                     epilog="exit codes: 0 the model finished, 1 a runtime failure (e.g. no server), "
                                            "2 a usage error, 3 stopped by a limit (not confirmed complete), "
                                            "130 interrupted (Ctrl-C)")
    parser.add_argument("task", help="what the agent should do, in plain words")
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    parser.add_argument("--base-url", default=os.environ.get("TINYHARNESS_BASE_URL", DEFAULT_BASE_URL),
                        help="OpenAI-compatible endpoint (env TINYHARNESS_BASE_URL, default %(default)s)")
    parser.add_argument("--max-turns", type=int, default=MAX_TURNS, help="most model calls in one run (default %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS, metavar="SECONDS",
                        help="stop before the next model call once this long has passed (default %(default)s)")
    parser.add_argument("--transcript", metavar="PATH", help="write the whole conversation as JSON to PATH")
    parser.add_argument("--shell-timeout", type=float, default=60, metavar="SECONDS",
                        help="kill a shell command (and all it started) after this long (default %(default)s)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every write and command that the hooks allow, without asking")
    parser.add_argument("--no-scissors", action="store_true",
                        help="send every tool result whole, however old (for A/B runs)")
    parser.add_argument("--context-window", type=int, default=CONTEXT_WINDOW, metavar="TOKENS",
                        help="the model's context length, for the warnings when it fills (default %(default)s)")
    args, extra = parser.parse_known_args(argv)
    if problem := usage_problem(args, extra):
        parser.error(problem)
    if not args.task.strip():
        parser.error("the task is empty")
    if args.max_turns < 1:
        parser.error("--max-turns must be 1 or more")
    if not args.max_seconds > 0:
        parser.error("--max-seconds must be more than 0")
    if not args.shell_timeout > 0:
        parser.error("--shell-timeout must be more than 0")
    if args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    return args


def main(argv=None):
    args = parse_args(argv)
    sys.stdout.reconfigure(errors="replace")  # a terminal that cannot show a character gets '?', not a crash
    client = Client(args.base_url, args.model, api_key=os.environ.get("TINYHARNESS_API_KEY"))
    stats = Stats()
    echo = lambda text: print(printable(text), flush=True)
    approve = approve_everything if args.yes else lambda prompt: ask_user(printable(prompt))
    try:
        answer = run_agent(args.task, client, os.getcwd(), stats, args.max_turns, echo, args.transcript,
                           args.shell_timeout, approve, args.max_seconds, not args.no_scissors, args.context_window)
        print(printable(answer.strip() or NO_ANSWER))  # an empty answer is said to be one
        return 0
    except LLMError as e:
        print(f"error: {printable(e)}", file=sys.stderr)  # server text: shown, never obeyed
        return 1
    except Stopped as e:
        print(printable(f"Stopped: {e}. The task is NOT confirmed complete."))  # the reason can quote the model
        print(printable(e.done))  # what was done so far, so the user knows where to pick up
        return 3
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` closed the output: the run cannot show its work, so it stops
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # or the exit flush fails again
        print("error: the output was closed (e.g. by `| head`), so the run stopped.", file=sys.stderr)
        return 1
    finally:
        print(stats.line(), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
