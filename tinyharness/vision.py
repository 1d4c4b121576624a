"""Eyes: an image in the chat format, and where it goes in the conversation.

The chat format has no image message. An image is one *part* of a user message, next to text:

    {"role": "user", "content": [
        {"type": "text", "text": "What colour is the left half?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo..."}}]}

Three facts shape the lesson:
- Ollama's /v1 takes images only as base64 data URIs of PNG, JPEG or WebP; it does not download
  http(s) URLs. So the harness loads the bytes itself (imageload.py: paths, URLs, checks).
- A tool message holds only text. `view_image` answers with a short text, and the image follows in
  one user message placed after *all* tool results of the turn (`image_followup_message`).
- A model can answer a question about an image it never received: by guessing. The evidence is
  the bill, because an image costs prompt tokens (arrival.py compares the counts).
"""
import base64


def data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(mime: str, data: bytes) -> dict:
    """One content part carrying an image, the shape /v1 servers expect."""
    return {"type": "image_url", "image_url": {"url": data_uri(mime, data)}}


# Small models do what the words around them suggest: told nothing, one went looking for
# "image.png" on disk with view_image while it was looking at the attached picture.
ATTACHED_NOTE = ("(The image is already attached to this message and you can see it now. It is not a "
                 "file on disk: do not look for it or call a tool to open it.)")


# exercise(m8): Write user_message_with_image: the first user message as a list of parts, the task text followed by ATTACHED_NOTE, then the image part.
def user_message_with_image(text: str, part: dict) -> dict:
    """The first user message with an image attached (--image): the task text, then the image."""
    return {"role": "user", "content": [{"type": "text", "text": f"{text}\n\n{ATTACHED_NOTE}"}, part]}


def view_image_result(name: str, mime: str, data: bytes) -> str:
    """The text a view_image call returns: the image itself cannot ride in a tool message."""
    return (f"OK: loaded {name} ({mime}, {len(data)} bytes). It is attached to the next user "
            "message, after the results of this turn's tool calls.")


# exercise(m8): Write image_followup_message: one user message that says which images follow, then each name and its image part in call order; refuse empty or mismatched lists.
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
