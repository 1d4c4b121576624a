"""python -m m0_llm "prompt": send one message to the model and print its reply."""
import argparse
import os
import sys

from .llm import DEFAULT_BASE_URL, DEFAULT_MODEL, Client, LLMError
from .wire import printable


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m m0_llm", description="Send one prompt to the model and print the reply.")
    parser.add_argument("prompt", help="what to ask the model")
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    parser.add_argument("--base-url", default=os.environ.get("TINYHARNESS_BASE_URL", DEFAULT_BASE_URL),
                        help="OpenAI-compatible endpoint (env TINYHARNESS_BASE_URL, default %(default)s)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.stdout.reconfigure(errors="replace")  # a terminal that cannot show a character gets '?', not a crash
    client = Client(args.base_url, args.model, api_key=os.environ.get("TINYHARNESS_API_KEY"))
    try:
        message, usage, finish_reason = client.chat([{"role": "user", "content": args.prompt}])
        print(printable(message["content"]), flush=True)
    except LLMError as e:
        print(f"error: {printable(e)}", file=sys.stderr)  # server text: shown, never obeyed
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` closed the output before the reply could be shown
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # or the exit flush fails again
        print("error: the output was closed (e.g. by `| head`), so the reply could not be shown.", file=sys.stderr)
        return 1
    if finish_reason == "length":
        print(f"note: the reply was cut at the length limit (max_tokens={client.max_reply_tokens}).", file=sys.stderr)
    elif not message["content"].strip():
        print("note: the model sent an empty answer.", file=sys.stderr)
    # "?" when the server sent no count: a 0 would look measured
    print(f"[stats] prompt_tokens={usage.get('prompt_tokens', '?')} "
          f"completion_tokens={usage.get('completion_tokens', '?')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
