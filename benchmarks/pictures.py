"""The course's pictures, boxes and arrows as self-contained SVG, with the standard library only.

    python -m benchmarks.pictures [--out DIR]     # writes the SVGs into docs/ (or DIR)

Four ideas are easier to see than to read (COURSE.md, stage rule 6): the loop (m1), the message
list and its id pairs (m1), stubs replacing old results (m5) and the image relayed after all the
turn's results (m8). The m5 and m8 pictures are drawn from what the stage's own code returns
(`m5_context.context.sliding_scissors`, `m8_vision.vision.image_followup_message`), so a change of
the stub or the relay changes the picture, and tests/test_pictures.py, which regenerates each and
compares the bytes, says so. The output is deterministic: integer coordinates, no timestamps, no
random ids. What it cannot do: lay anything out by itself; every box is placed here by hand. The
fifth picture, docs/m5-context.svg, is a measurement rather than a diagram: `python -m benchmarks.context
--svg FILE` draws it (tests/test_context_picture.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # the stages are imported from the checkout, wherever this runs from

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
CHAR = 7.3          # the width of one monospace character at size 12, near enough for laying out
COLOURS = {"system": "#eeeeee", "user": "#dbe9f6", "assistant": "#fde9c9", "tool": "#dcefd8",
           "stub": "#f6d5d5", "note": "#ffffff"}
PAIRS = ["#c0392b", "#2471a3", "#7d3c98", "#b9770e"]   # one colour per call id


class Svg:
    """An SVG drawing: add shapes, then `text()` gives the document."""

    def __init__(self, width: int, height: int, title: str):
        self.width, self.height, self.parts = width, height, []
        self.label(width // 2, 28, title, size=17, anchor="middle", weight="bold")

    def box(self, x, y, w, h, fill="#ffffff", stroke="#555555", dashed=False, rx=6):
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        self.parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}" '
                          f'stroke="{stroke}" stroke-width="1.5"{dash}/>')

    def label(self, x, y, text, size=13, anchor="start", weight="normal", mono=False, fill="#222222"):
        family = MONO if mono else FONT
        self.parts.append(f'<text x="{x}" y="{y}" font-family="{family}" font-size="{size}" '
                          f'font-weight="{weight}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>')

    def arrow(self, points, colour="#444444", width=1.6):
        path = " ".join(f"{x},{y}" for x, y in points)
        self.parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{width}" '
                          f'marker-end="url(#head)"/>')

    def diamond(self, cx, cy, w, h, fill):
        points = f"{cx},{cy - h // 2} {cx + w // 2},{cy} {cx},{cy + h // 2} {cx - w // 2},{cy}"
        self.parts.append(f'<polygon points="{points}" fill="{fill}" stroke="#555555" stroke-width="1.5"/>')

    def text(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}">\n'
                '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
                'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444444"/></marker></defs>\n'
                f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>\n')
        return head + "\n".join(self.parts) + "\n</svg>\n"


def wrap(text: str, width: float, lines: int) -> list:
    """Text in at most `lines` lines of what fits `width` pixels of monospace, the last one cut with '...'."""
    words, room, out = " ".join(str(text).split()).split(" "), int(width // CHAR), [""]
    for word in words:
        if out[-1] and len(out[-1]) + 1 + len(word) > room and len(out) < lines:
            out.append("")
        out[-1] = f"{out[-1]} {word}".strip()
    return [*out[:-1], fit(out[-1], width)]


def fit(text: str, width: float) -> str:
    """One line of text cut to what fits `width` pixels of monospace, marked with '...' when cut."""
    text = " ".join(str(text).split())
    room = int(width // CHAR)
    return text if len(text) <= room else text[:max(0, room - 3)] + "..."


def content_text(message) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " + ".join(p["text"] if p.get("type") == "text" else "[image]" for p in content)
    return content or ""


def call_text(call) -> str:
    return f'{call["id"]}: {call["function"]["name"]}({call["function"]["arguments"]})'


# --- m1: the loop ----------------------------------------------------------------------------------

def loop_picture() -> str:
    """m1's run_agent as a flow: ask, append, stop when there are no calls, else answer each call by its id."""
    svg = Svg(800, 470, "The loop (m1_loop/loop.py:run_agent)")
    svg.box(230, 50, 340, 40, COLOURS["user"])
    svg.label(400, 75, "messages = [system prompt, user: the task]", anchor="middle")
    svg.arrow([(400, 90), (400, 124)])
    svg.box(230, 126, 340, 52, COLOURS["assistant"])
    svg.label(400, 148, "message = edges.ask(messages, SCHEMAS)", anchor="middle", size=12, mono=True)
    svg.label(400, 167, "messages.append(message)", anchor="middle", size=12, mono=True)
    svg.arrow([(400, 178), (400, 206)])
    svg.diamond(400, 240, 220, 64, "#ffffff")
    svg.label(400, 245, "tool calls in it?", anchor="middle")
    svg.arrow([(510, 240), (596, 240)])
    svg.label(553, 232, "no", anchor="middle", weight="bold")
    svg.box(598, 214, 180, 52, "#e8f6e8")
    svg.label(688, 236, "done: its content", anchor="middle")
    svg.label(688, 254, "is the answer", anchor="middle")
    svg.arrow([(400, 272), (400, 308)])
    svg.label(410, 294, "yes", weight="bold")
    svg.box(90, 310, 620, 62, COLOURS["tool"])
    svg.label(400, 333, "for call in message[\"tool_calls\"]: result = edges.run(call, run_tool, workspace)",
              anchor="middle", size=12, mono=True)
    svg.label(400, 355, 'messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})',
              anchor="middle", size=12, mono=True)
    svg.arrow([(90, 341), (62, 341), (62, 152), (228, 152)])
    svg.label(72, 232, "next turn", weight="bold")
    svg.label(72, 250, "(a new model call)", size=12)
    svg.box(170, 400, 460, 48, "#ffffff", dashed=True)
    svg.label(400, 420, "after max_turns (8) model calls with calls still coming:", anchor="middle", size=12)
    svg.label(400, 438, "raise Stopped, exit 3: not confirmed complete", anchor="middle", size=12)
    return svg.text()


# --- m1: the message list and its id pairs --------------------------------------------------------

def call(call_id, name, **arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def notes_conversation() -> list:
    """The notes task as the message list grows, with ids as a server writes them (never the harness)."""
    first, second, third = call("call_7f3a9c", "list_dir", path="."), call("call_b21e04", "read_file", path="ideas.md"), \
        call("call_c9d850", "read_file", path="meeting-2026-11-02.md")
    write = call("call_e4a113", "write_file", path="budget.md", content="# Testing budget ...")
    return [
        {"role": "system", "content": "You are an agent working in a folder. Use the tools ..."},
        {"role": "user", "content": "Find the testing budget in my notes and save it to budget.md."},
        {"role": "assistant", "content": "", "tool_calls": [first]},
        {"role": "tool", "tool_call_id": "call_7f3a9c", "content": "ideas.md\nmeeting-2026-11-02.md\nrecipes.md"},
        {"role": "assistant", "content": "", "tool_calls": [second, third]},
        {"role": "tool", "tool_call_id": "call_b21e04", "content": "# Ideas\n- a cheaper test rig ..."},
        {"role": "tool", "tool_call_id": "call_c9d850", "content": "# Team meeting, 2 November ... 300 KM ..."},
        {"role": "assistant", "content": "", "tool_calls": [write]},
        {"role": "tool", "tool_call_id": "call_e4a113", "content": "OK: wrote 96 characters to budget.md"},
        {"role": "assistant", "content": "The testing budget is 300 KM. I saved it to budget.md."},
    ]


def message_rows(svg, messages, x, y, width, colours=None, row=34, gap=6):
    """Draw the messages as a column of numbered boxes from (x, y). Returns {call id: [y of the call,
    y of its result]}, the top of each box, and the y below the last."""
    ids, tops, colours = {}, [], colours or {}
    for number, message in enumerate(messages, 1):
        role, calls = message["role"], message.get("tool_calls") or []
        room = width - 112
        text = f'{message["tool_call_id"]} <- {content_text(message)}' if role == "tool" else content_text(message)
        shown = wrap(text, room, 2 if message.get("_stub") or isinstance(message.get("content"), list) else 1)
        height, base = row + 18 * max(0, len(calls) - 1, 0 if calls else len(shown) - 1), y + row // 2 + 5
        svg.box(x, y, width, height, COLOURS["stub"] if message.get("_stub") else COLOURS[role])
        svg.label(x + 8, base, f"{number}", size=12, weight="bold")
        svg.label(x + 32, base, role, size=12, weight="bold")
        if calls:
            for i, c in enumerate(calls):
                svg.label(x + 104, base + 18 * i, fit(call_text(c), room), size=12, mono=True,
                          fill=colours.get(c["id"], "#222222"))
                ids.setdefault(c["id"], [None, None])[0] = base - 4 + 18 * i
        else:
            for i, line in enumerate(shown):
                svg.label(x + 104, base + 18 * i, line, size=12, mono=True,
                          fill=colours.get(message.get("tool_call_id"), "#222222"))
            if role == "tool":
                ids.setdefault(message["tool_call_id"], [None, None])[1] = base - 4
        tops.append(y)
        y += height + gap
    return ids, tops, y


def messages_picture() -> str:
    """The message list of the notes task: every tool message answers one call, by the call's id."""
    messages = notes_conversation()
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    colours = {call_id: PAIRS[i % len(PAIRS)] for i, call_id in enumerate(ids)}
    svg = Svg(860, 470, "The message list: each result answers its call by the server's id (m1)")
    pairs, _, bottom = message_rows(svg, messages, 110, 50, 730, colours)
    for i, call_id in enumerate(ids):
        top, end = pairs[call_id]
        x = 96 - 16 * (i % 3)
        svg.parts.append(f'<polyline points="108,{top} {x},{top} {x},{end} 108,{end}" fill="none" '
                         f'stroke="{colours[call_id]}" stroke-width="2"/>')
    svg.label(110, bottom + 20, "The server gives each call its id; the harness copies it into tool_call_id. Every "
                                "call is answered before the next", size=12)
    svg.label(110, bottom + 38, "model call; a missing or unmatched result makes a request that strict servers refuse. "
                                "No tool calls (10): done.", size=12)
    svg.height = bottom + 56
    return svg.text()


# --- m5: stubs replace old results ----------------------------------------------------------------

def long_conversation() -> list:
    """Four reads of long notes and a short save_note result: what the scissors see before the next call."""
    names = ["notes/a.md", "notes/b.md", "notes/c.md", "notes/d.md"]
    messages = [{"role": "system", "content": "You are an agent working in a folder. Use the tools ..."},
                {"role": "user", "content": "Summarise every note into SUMMARY.md."}]
    for i, name in enumerate(names):
        call_id = f"call_{'5e1b7a 9d04c2 a3f816 c70e59'.split()[i]}"
        messages += [{"role": "assistant", "content": "", "tool_calls": [call(call_id, "read_file", path=name)]},
                     {"role": "tool", "tool_call_id": call_id, "content": f"# {name}\n" + "a line of notes\n" * (60 + 25 * i)}]
    messages += [{"role": "assistant", "content": "", "tool_calls": [call("call_f2b640", "save_note", text="a: ...")]},
                 {"role": "tool", "tool_call_id": "call_f2b640", "content": "OK: noted in agent_notes.md"}]
    return messages


def stubs_picture() -> str:
    """The same message list before and after m5's scissors, with the stage's own stubs."""
    from m5_context.context import STUB_PREFIX, sliding_scissors
    before = long_conversation()
    after = [{**m, "_stub": True} if m.get("content", "").startswith(STUB_PREFIX) else m
             for m in sliding_scissors(before)]
    kept = [str(n) for n, (old, new) in enumerate(zip(before, after), 1) if old["role"] == "tool" and not new.get("_stub")]
    svg = Svg(1040, 0, "Scissors (m5): old results over 200 characters become stubs before each model call")
    svg.label(20, 64, "what the loop held: every result whole", weight="bold")
    svg.label(460, 64, "what sliding_scissors returns: the model is sent this", weight="bold")
    _, _, left = message_rows(svg, [short(m) for m in before], 20, 76, 410, row=22, gap=4)
    _, _, bottom = message_rows(svg, [short(m) for m in after], 460, 76, 560, row=22, gap=4)
    svg.arrow([(432, 200), (457, 200)])
    bottom = max(left, bottom)
    svg.label(20, bottom + 22, "Kept whole: the system prompt, the task, every assistant message with its calls' "
                               "arguments, results of 200 characters or fewer", size=12)
    svg.label(20, bottom + 40, f"and the newest two results (here {' and '.join(kept[-2:])}). A stub is written "
                               "once and sent with the same bytes every turn after; it says how to get the text back.",
              size=12)
    svg.height = bottom + 56
    return svg.text()


def short(message):
    """A tool result shown as its length, or as the stub text itself."""
    if message.get("role") != "tool" or message.get("_stub"):
        return message
    return {**message, "content": f"{len(message['content']):,} characters: {message['content']}"}


# --- m8: the image relay --------------------------------------------------------------------------

def relay_messages() -> list:
    """One turn that calls view_image and list_dir, in the order m8's loop sends it."""
    from m8_vision.vision import image_followup_message, view_image_result
    png = b"\x89PNG\r\n\x1a\n" + bytes(48205)   # a chart of 48,213 bytes
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo..."}}
    return [
        {"role": "user", "content": "What does the chart in this folder show?"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_4d2e81", "view_image", path="chart.png"),
                                                            call("call_90ab3f", "list_dir", path=".")]},
        {"role": "tool", "tool_call_id": "call_4d2e81", "content": view_image_result("chart.png", "image/png", png)},
        {"role": "tool", "tool_call_id": "call_90ab3f", "content": "chart.png\ndata.csv"},
        image_followup_message([part], ["chart.png"]),
    ]


def relay_picture() -> str:
    """The picture travels in a user message after ALL the turn's tool results (m8_vision/loop.py)."""
    messages = relay_messages()
    colours = {"call_4d2e81": PAIRS[0], "call_90ab3f": PAIRS[1]}
    svg = Svg(900, 400, "The image relay (m8): a tool result is text, the picture follows all the results")
    _, tops, bottom = message_rows(svg, messages, 40, 50, 800, colours)
    svg.arrow([(840, tops[2] + 17), (866, tops[2] + 17), (866, tops[4] + 17), (842, tops[4] + 17)], colour=PAIRS[0])
    svg.box(202, tops[4] + 26, 16, 14, "#d62728", rx=0)     # the picture itself, after "[image]" on the
    svg.box(218, tops[4] + 26, 16, 14, "#1f77b4", rx=0)     # second line: red left, blue right
    svg.label(40, bottom + 22, "view_image loads the picture and returns a short text (3); the loop sends the "
                               "picture in one user message (5)", size=12)
    svg.label(40, bottom + 40, "after the last result of the turn (4), never between two results: every call "
                               "is answered first, by its id.", size=12)
    svg.box(40, bottom + 58, 800, 36, "#ffffff", dashed=True)
    svg.label(52, bottom + 81, "wrong: assistant, tool (3), user with the picture, tool (4): the pairing is "
                               "broken, and a strict server refuses the request", size=12, fill=PAIRS[0])
    svg.height = bottom + 112
    return svg.text()


PICTURES = {"m1-loop.svg": loop_picture, "m1-messages.svg": messages_picture,
            "m5-stubs.svg": stubs_picture, "m8-relay.svg": relay_picture}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pictures", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs"), help="the folder to write the SVGs into (default: docs/)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    for name, draw in PICTURES.items():
        try:
            (out / name).write_text(draw(), encoding="utf-8")
        except OSError as e:
            print(f"error: cannot write {out / name}: {e.strerror}", file=sys.stderr)
            return 1
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
