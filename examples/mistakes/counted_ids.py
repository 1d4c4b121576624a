"""m1's loop with one line wrong: it answers each call with an id it counted itself.

    python counted_ids.py [the options of python -m m1_loop] "TASK"

A loop that writes `{"role": "tool", "tool_call_id": f"call_{n}", ...}`, numbering the calls it ran
from 0, instead of copying `call["id"]`, the id the server gave the call. The stage is not touched:
this file runs `python -m m1_loop` with its client renumbering the tool messages on their way out,
which is exactly what such a loop sends. The server wrote the ids (the scripted server call_1,
call_2, ...; Ollama call_ plus 8 random characters; OpenAI a longer random string), so a count of
your own matches none of them, and a strict server refuses the request with HTTP 400. Some servers
only pair by position and let it through; the model then reads results under the wrong calls.
"""
import sys

from m1_loop import __main__ as stage
from m1_loop.llm import Client


class CountingClient(Client):
    def chat(self, messages, tools=None, timeout=None):
        counted, sent = 0, []
        for message in messages:
            if message.get("role") == "tool":
                message = {**message, "tool_call_id": f"call_{counted}"}   # the mistake
                counted += 1
            sent.append(message)
        return super().chat(sent, tools, timeout)


if __name__ == "__main__":
    stage.Client = CountingClient
    sys.exit(stage.main())
