"""Did the picture arrive? Armour for m8's eyes: read it after vision.py.

The problem: a server can drop an image without a word (Ollama did, for gemma4 e2b/e4b) or serve a
model that has no vision at all, and the model still answers, by guessing. Its answer looks the
same.

The mechanism is the lesson's `vision.py:arrival_check`: the request that brings an image must cost
clearly more prompt tokens than its text alone. This file finds the text-only size to compare with:
`ArrivalWatch` runs `arrival_check` on each request that brings a new image, with the previous
request's measured count plus an estimate of only what changed since. `without_images` and
`count_images` let the context estimates count a picture as image tokens, not as its base64 text.

What it cannot do: the text-only count is an estimate, so a close call can go either way; a server
that leaves image tokens out of prompt_tokens makes it warn falsely. It is a warning, not a block.
"""
import json

from .vision import arrival_check


def without_images(messages: list) -> list:
    """The same messages with every image part removed: what the text alone would cost."""
    def strip(message):
        content = message.get("content")
        if not isinstance(content, list):
            return message
        return {**message, "content": [p for p in content
                                       if not (isinstance(p, dict)
                                               and p.get("type") == "image_url")]}
    return [strip(m) for m in messages]


# arrival_check's text-only size: make it as exact as you can. For view_image, the previous
# request's measured prompt_tokens plus an estimate of only the messages added since; for a first
# message, a chars/4 estimate of a long prompt can be off by more than 32 tokens, so measure the
# text-only request once if in doubt. A server that leaves image tokens out of prompt_tokens would
# make the check warn falsely: it is a warning, not a block.


def text_tokens(messages, tools=None) -> int:
    """A request's text without its images, estimated as characters/4 of its JSON (no tokenizer;
    the scripted server counts the same way, a real server only roughly so)."""
    text = (json.dumps(without_images(messages), ensure_ascii=False)
            + json.dumps(tools, ensure_ascii=False))
    return (len(text) + 3) // 4


def count_images(messages) -> int:
    return sum(isinstance(part, dict) and part.get("type") == "image_url"
               for message in messages if isinstance(message.get("content"), list)
               for part in message["content"])


class ArrivalWatch:
    """Runs `arrival_check` on every request that brings a new image, once its usage is known.

    The text-only size is an offset from a measurement: the previous request's prompt_tokens plus
    the estimated change since then (the new messages, less whatever scissors cut). Only the change
    is estimated, so the error stays small. The first request has no measurement before it; there
    the whole text is estimated, which on a real server can be off by more than an image costs.
    The sure test is a control run: the same task without the image, and compare the two bills.
    """

    def __init__(self):
        self.images = 0
        self.measured = None            # (prompt_tokens, text_tokens) of the previous request

    def check(self, messages, tools, usage):
        """Call after each model call with what was sent; returns a warning or None."""
        text, images, prompt_tokens = (text_tokens(messages, tools), count_images(messages),
                                       usage.get("prompt_tokens"))
        warning = None
        if images > self.images:
            expected = text if self.measured is None else self.measured[0] + text - self.measured[1]
            warning = arrival_check(prompt_tokens, expected)
        self.images = images
        self.measured = (prompt_tokens, text) if prompt_tokens else None
        return warning
