"""Eyes: an image in the chat format, where it goes in the conversation, and whether it arrived.

An image is one *part* of a user message, next to text, as a base64 data URI (Ollama's /v1 downloads
nothing; imageload.py loads paths and URLs). A tool message holds only text, so `view_image`'s image
follows in one user message after *all* the turn's results. And a model can answer about an image it
never received, by guessing: the evidence is the bill (`arrival_check`)."""
import base64


def image_part(mime: str, data: bytes) -> dict:
    """One content part carrying an image as a base64 data URI, the shape /v1 servers expect."""
    encoded = base64.b64encode(data).decode('ascii')
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}


# Small models do what the words around them suggest: told nothing, one went looking for
# "image.png" on disk with view_image while it was looking at the attached picture.
ATTACHED_NOTE = ("(The image is already attached to this message and you can see it now. It is not "
                 "a file on disk: do not look for it or call a tool to open it.)")


# exercise(m8): Write user_message_with_image: the first user message as a list of parts, the task
# text followed by ATTACHED_NOTE, then the image part.
def user_message_with_image(text: str, part: dict) -> dict:
    """The first user message with an image attached (--image): the task text, then the image."""
    return {"role": "user",
            "content": [{"type": "text", "text": f"{text}\n\n{ATTACHED_NOTE}"}, part]}


def view_image_result(name: str, mime: str, data: bytes) -> str:
    """The text a view_image call returns: the image itself cannot ride in a tool message."""
    return (f"OK: loaded {name} ({mime}, {len(data)} bytes). It is attached to the next user "
            "message, after the results of this turn's tool calls.")


# exercise(m8): Write image_followup_message: one user message that says which images follow, then
# each name and its image part in call order; refuse empty or mismatched lists.
def image_followup_message(parts: list, names: list) -> dict:
    """The user message carrying the images view_image loaded in one turn. Append it after the
    LAST tool result of the turn: every tool call must be answered by its tool message before
    anything else comes, so an image between two results would break the call/result pairing."""
    if not parts or len(parts) != len(names):
        raise ValueError("image_followup_message needs one name per image part, and at least one")
    content = [{"type": "text", "text": f"[harness] The image(s) you asked for with view_image, "
                                        f"in order: {', '.join(names)}."}]
    for name, part in zip(names, parts):
        content += [{"type": "text", "text": f"{name}:"}, part]
    return {"role": "user", "content": content}


# Did it arrive? A picture costs prompt tokens (Gemma 3 a fixed 256, LLaVA 576, Qwen-VL about one
# per 28x28 pixels), a dropped one nothing. The control is the same request without it, its text
# alone.
# under every vision model's price of a picture, over a text estimate's error
MIN_IMAGE_TOKENS = 32

# exercise(m8): Write arrival_check: warn unless the image clearly raised the prompt's token bill.
def arrival_check(prompt_tokens_with_image, text_only_tokens, min_image_tokens=MIN_IMAGE_TOKENS):
    """A warning (text) when the image evidently never reached the model, else None."""
    if not prompt_tokens_with_image:
        return ("warning: the server reported no prompt_tokens, so we cannot tell whether the "
                "image reached the model.")
    if prompt_tokens_with_image - text_only_tokens >= min_image_tokens:
        return None                                   # paid for: the picture is in the prompt
    return (f"warning: the request with the image cost {prompt_tokens_with_image} prompt tokens, "
            f"about what its text alone costs (~{text_only_tokens}); an image adds at least "
            f"{min_image_tokens}. The image probably never reached the model, so any answer about "
            "it is a guess. Check that the model has vision (`ollama show MODEL` lists it); "
            "Ollama is known to drop images for gemma4 e2b/e4b, while qwen3-vl:8b receives them.")
