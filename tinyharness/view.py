"""View: a session or a transcript as one HTML page you can read, scroll and send to someone.

The problem. A transcript is JSON: every tool result is one long string with \\n in it, a cut
result looks like any other, and a 40-turn run is thousands of lines. What went wrong, and where,
is hard to see in it.

The mechanism. `tinyharness view FILE` reads a session (.jsonl, sessions/__init__.py) or a
`--transcript` file (a JSON list of messages) and writes one self-contained HTML page: the user's
turns as a timeline; each model reply with its text, its reasoning folded, its tool calls with their
arguments and, beside each, its result (long results folded with <details>); cut stubs, capped
results, cut replies and compaction summaries marked; `[harness]` messages and the hooks' verdicts
(BLOCKED, DENIED, ERROR) highlighted; the prompt tokens of each model call as a small inline SVG
chart (from the server's counts in a session, else estimated from the messages, and labelled so);
images inline.

Everything in the page comes from the file: the styles are inline, images are data URIs, and a
Content-Security-Policy forbids loading anything else, so opening it makes no network request. There
is no script. Every piece of text is escaped with html.escape: the model's text, the tool results
and the file names are untrusted, and a result holding `<script>` must show as text, never run.

What it cannot do. It shows what the file holds: a transcript has no token counts and no events
(interruptions, compactions) and shows the history after the context policy's cuts; an image given
by URL is not fetched (it is shown as its address). A session of many megabytes (images, long
results) makes a page as large; the browser copes, an e-mail may not. A file of more than 256 MiB
is refused before it is read, and a session line of more than 16 MiB is damage (the page ends
before it), as for every reader of sessions.
"""
import html
import json
import os
import re
import sys
import webbrowser
from pathlib import Path

from .chat.compact import SUMMARY_MARK
from .console import printable
from .context import STUB_PREFIX, estimate_tokens, json_chars
from .filedoor import check_name, open_file, write_text
from .sessions import SessionError, find, message_text, parse_file
from .sessions.checks import message_problem
from .sessions.writer import FORMAT

FOLD_CHARS, FOLD_LINES = 600, 12   # results longer than this are folded
VERDICTS = ("BLOCKED", "DENIED", "ERROR")
DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+")
CUT_REPLY = "[harness] Your last reply was cut off"
CAPPED = "characters omitted by the harness"
# bytes of a session or transcript a page is made from: a bigger one is refused, not held
VIEW_CAP = 256 << 20

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 \
auto;max-width:1100px;padding:16px;color:#1d1d1f;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} .meta{color:#666;margin-bottom:12px}
.turn{border-left:4px solid #4a7bd0;background:#fff;margin:14px 0;padding:8px \
14px;border-radius:4px;box-shadow:0 1px 2px #0002}
.turn h2{font-size:15px;margin:4px 0;color:#4a7bd0}
.msg{margin:8px 0;padding:6px 10px;border-radius:4px}
.user{background:#eef3fc} .assistant{background:#f4f4f4} .system{background:#f0f0f0;color:#555}
.harness{background:#fff4d6;border:1px solid #e0b84a} .summary{background:#e8f6ec;border:1px solid \
#58a56f}
.notice{background:#fdecec;border:1px solid #d46a6a;color:#7a1f1f} \
.info{background:#eef1f5;border:1px solid #b8c2cf;color:#394b5e} .end{color:#888;font-size:12px}
.call{margin:6px 0 6px 12px;border:1px solid #ddd;border-radius:4px;background:#fff;padding:4px 8px}
.call .name{font-family:monospace;font-weight:bold}
.subagent{margin:6px 0 6px 12px;border-left:3px solid #4a7bd0;padding-left:8px}
.result{margin:4px 0 0 12px} .verdict{background:#fdecec;border-left:3px solid \
#c0392b;padding-left:6px}
.cut{background:#f3eefc;border-left:3px solid #8e6bbf;padding-left:6px}
.badge{display:inline-block;font-size:11px;font-weight:bold;padding:0 \
6px;border-radius:8px;margin-right:6px;color:#fff;background:#888}
.badge.verdict-b{background:#c0392b} .badge.cut-b{background:#8e6bbf} \
.badge.harness-b{background:#c8951b}
.badge.summary-b{background:#3f8f57} .badge.notice-b{background:#c0392b} \
.badge.info-b{background:#6b7d92}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,monospace}
details>summary{cursor:pointer;color:#333} img{max-width:400px;border:1px solid \
#ccc;display:block;margin:4px 0}
.chart{background:#fff;padding:6px;border:1px solid #ddd;border-radius:4px} \
.label{color:#666;font-size:12px}
"""


class ViewError(Exception):
    """A file that is neither a session nor a transcript."""


def esc(text):
    return html.escape("" if text is None else str(text), quote=True)


def read_file(path):
    """(title lines, events, warning) of a session or a transcript; a file bigger than VIEW_CAP is
    refused before it is read, and a session is read a line at a time (sessions.read_events'
    caps)."""
    path = Path(path)
    # filedoor.py: a FIFO or a folder is an error, never a hang; no planted link is followed
    try:
        file = open_file(path)
    except OSError as e:
        raise ViewError(f"cannot read {path}: {e.strerror or e}") from None
    with file:
        size = os.fstat(file.fileno()).st_size
        if size > VIEW_CAP:
            raise ViewError(f"{path} is {size:,} bytes, more than the {VIEW_CAP >> 20} MiB a page "
                            "is made from")
        head = file.read(300)
        file.seek(0)
        if head.lstrip()[:1] == b"[":
            return read_transcript(file.read(VIEW_CAP + 1), path)
        if head.lstrip()[:1] == b"{" and FORMAT.encode() in head:
            try:
                session = parse_file(file, path)
            except SessionError as e:
                raise ViewError(str(e)) from None
            h = session.header
            meta = (f"folder {h.get('folder')} · started {h.get('started')} · model "
                    f"{h.get('model')}")
            return ({"title": f"Session {session.id}", "meta": meta}, session.events,
                    session.warning)
    raise ViewError(f"{path} is neither a session (.jsonl with a session header) nor a "
                    "--transcript file (a JSON list of messages)")


def read_transcript(data, path):
    """A --transcript file's messages as message events; a message that fails the session's checks
    ends it there, with a warning, as a damaged session line does."""
    try:
        messages = json.loads(data.decode("utf-8", errors="surrogateescape"))
    except (ValueError, RecursionError) as e:
        raise ViewError(f"{path} is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(messages, list):
        raise ViewError(f"{path} is not a --transcript file (a JSON list of messages)")
    events, warning = [], None
    for number, message in enumerate(messages, 1):
        if problem := message_problem(message):
            warning = (f"warning: {path} has {problem} at message {number}; the page ends "
                       "before it.")
            break
        events.append({"type": message["role"], "message": message})
    return ({"title": f"Transcript {path.name}", "meta": f"{len(messages)} messages"}, events,
            warning)


def is_typed(message):
    return message.get("role") == "user" and not message_text(message).startswith("[harness]")


class RunningEstimate:
    """estimate_tokens(history) kept up to date as the history grows, message by message: measuring
    the whole history again at every model call made a long session's page quadratic in its size."""

    def __init__(self):
        self.history, self.chars = [], 2  # "[]"

    @staticmethod
    def cost(message):  # json_chars of a one-message list, less its brackets
        return json_chars([message]) - 2

    def reset(self, history):
        self.history = list(history)
        self.chars = 2 + sum(self.cost(m) for m in self.history) + 2 * max(0, len(self.history) - 1)

    def append(self, message):
        self.chars += self.cost(message) + (2 if self.history else 0)  # ", " between two
        self.history.append(message)

    def tokens(self):
        return (self.chars + 3) // 4


def token_points(events):
    """(prompt tokens, completion tokens, estimated?) per model call."""
    points, history = [], RunningEstimate()
    for event in events:
        message = event.get("message")
        kind = event.get("type")
        if kind == "compaction":
            replaced = len(event.get("replaced") or [])
            h = history.history
            history.reset(h[:1] + [event.get("summary") or {}] + h[1 + replaced:])
            continue
        if kind == "clear":
            history.reset(history.history[:1])
        if not isinstance(message, dict):
            continue
        if kind == "assistant":
            usage = event.get("usage") or {}
            prompt = usage.get("prompt_tokens")
            if isinstance(prompt, int) and not isinstance(prompt, bool):
                completion = usage.get("completion_tokens")
                points.append((prompt, completion if isinstance(completion, int) else 0, False))
            else:
                points.append((history.tokens(), estimate_tokens([message]), True))
        history.append(message)
    return points


def chart(points):
    """Prompt tokens per model call as bars; the newest reply's completion on top, darker."""
    if not points:
        return ""
    width, height, gap = 760, 120, 2
    top = max(p + c for p, c, _ in points) or 1
    bar = max(2, min(24, (width - 40) // len(points) - gap))
    parts = []
    for i, (prompt, completion, _) in enumerate(points):
        x = 40 + i * (bar + gap)
        ph, ch = height * prompt / top, height * completion / top
        parts.append(f'<rect x="{x}" y="{height - ph - ch + 10:.1f}" width="{bar}" '
                     f'height="{ch:.1f}" fill="#e08a3c"><title>call {i + 1}: {completion} '
                     f'completion tokens</title></rect><rect x="{x}" y="{height - ph + 10:.1f}" '
                     f'width="{bar}" height="{ph:.1f}" fill="#4a7bd0"><title>call {i + 1}: '
                     f'{prompt} prompt tokens</title></rect>')
    estimated = (" (estimated from the messages: characters / 4)" if any(e for _, _, e in points)
                 else "")
    return ('<div class="chart"><div class="label">Tokens per model call: prompt (blue), '
            f'completion (orange); highest {top}{esc(estimated)}</div><svg '
            f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" role="img" '
            f'aria-label="tokens per model call"><line x1="38" y1="{height + 10}" x2="{width}" '
            f'y2="{height + 10}" stroke="#999"/><text x="0" y="20" font-size="10" '
            f'fill="#666">{top}</text>{"".join(parts)}</svg></div>')


def content_html(content):
    """A message's content: text escaped in <pre>, images inline when they are data URIs."""
    if isinstance(content, str):
        return f"<pre>{esc(content)}</pre>" if content else ""
    out = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            out.append(f"<pre>{esc(part.get('text'))}</pre>")
        elif part.get("type") == "image_url":
            url = ((part.get("image_url") or {}).get("url", "")
                   if isinstance(part.get("image_url"), dict) else "")
            if DATA_IMAGE.fullmatch(url or ""):
                out.append(f'<img alt="image" src="{esc(url)}">')
            else:
                out.append(f'<p class="label">(an image at {esc(url[:200])}; not loaded: this page '
                           'loads nothing from the network)</p>')
    return "".join(out)


def folded(text, summary_line=None):
    """Long text inside <details>, its first line and size as the summary."""
    text = "" if text is None else str(text)
    if len(text) <= FOLD_CHARS and text.count("\n") < FOLD_LINES:
        return f"<pre>{esc(text)}</pre>"
    head = summary_line or text.split("\n", 1)[0][:160]
    return (f"<details><summary>{esc(head)} … ({len(text):,} "
            f"characters)</summary><pre>{esc(text)}</pre></details>")


def result_html(message):
    content = message.get("content")
    text = content if isinstance(content, str) else message_text(message)
    badges, cls = [], "result"
    verdict = next((v for v in VERDICTS if text.startswith(v)), None)
    if verdict:
        badges.append(f'<span class="badge verdict-b">{verdict}</span>')
        cls += " verdict"
    if text.startswith(STUB_PREFIX):
        badges.append('<span class="badge cut-b">cut by the context policy</span>')
        cls += " cut"
    elif CAPPED in text:
        badges.append('<span class="badge cut-b">capped</span>')
        cls += " cut"
    images = content_html(content) if isinstance(content, list) else ""
    return f'<div class="{cls}">{"".join(badges)}{folded(text)}{images}</div>'


def subagent_html(messages):
    """A subagent's own turn, folded: its task, its replies with their calls and results, its
    answer."""
    messages = [m for m in messages if isinstance(m, dict)]
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    calls = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    parts = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            parts.append(user_html(message))
        elif role == "assistant":
            parts.append(assistant_html(message, results, False))
    return (f'<details class="subagent"><summary>the subagent\'s turn: {calls} tool calls, '
            f'{len(messages)} messages</summary>{"".join(parts)}</details>')


def call_html(call, result, child=None):
    function = call.get("function") or {}
    try:
        arguments = (json.dumps(json.loads(function.get("arguments") or "{}"), indent=2,
                                ensure_ascii=False))
    except ValueError:
        arguments = str(function.get("arguments"))
    got = result_html(result) if result else '<div class="result label">(no result recorded)</div>'
    inner = subagent_html(child) if child is not None else ""
    return (f'<div class="call"><span class="name">{esc(function.get("name"))}</span> <span '
            f'class="label">{esc(call.get("id"))}</span>{folded(arguments)}{inner}{got}</div>')


def assistant_html(message, results, cut, children=None):
    parts = ['<div class="msg assistant">']
    if cut:
        parts.append('<span class="badge cut-b">cut at the length limit</span>')
    for key in ("reasoning", "reasoning_content", "thinking"):
        if message.get(key):
            parts.append(f"<details><summary>reasoning ({len(str(message[key])):,} "
                         f"characters)</summary><pre>{esc(message[key])}</pre></details>")
    parts.append(content_html(message.get("content")))
    children = list(children or [])  # the subagents of this reply, in the order its task calls ran
    for call in message.get("tool_calls") or []:
        child = (children.pop(0) if children and (call.get("function") or {}).get("name") == "task"
                 else None)
        parts.append(call_html(call, results.pop(call.get("id"), None), child))
    parts.append("</div>")
    return "".join(parts)


def user_html(message):
    text = message_text(message)
    if text.startswith(SUMMARY_MARK):
        return (f'<div class="msg summary"><span class="badge summary-b">compaction summary</span>'
                f'{content_html(message.get("content"))}</div>')
    if text.startswith("[harness]"):
        return (f'<div class="msg harness"><span class="badge harness-b">[harness]</span>'
                f'{content_html(message.get("content"))}</div>')
    return f'<div class="msg user">{content_html(message.get("content"))}</div>'


def compaction_html(event):
    replaced = event.get("replaced") or []
    listed = "".join(f"<li><b>{esc(m.get('role'))}</b>: {esc(message_text(m)[:200])}</li>"
                     for m in replaced if isinstance(m, dict))
    summary = event.get("summary") or {}
    return ('<div class="msg summary"><span class="badge summary-b">compaction summary</span> '
            f'{len(replaced)} messages replaced by a '
            f'summary{content_html(summary.get("content"))}<details><summary>the {len(replaced)} '
            f'messages it replaced</summary><ul>{listed}</ul></details></div>')


def timeline(events):
    """The events as <section class="turn"> blocks, one per message the user typed."""
    sections, current, turn = [], [], 0
    preamble = '<section class="turn" id="turn-0"><h2>Before the first message</h2>'
    current.append(preamble)
    for i, event in enumerate(events):
        kind, message = event.get("type"), event.get("message")
        if kind in ("system", "user", "assistant", "tool") and not isinstance(message, dict):
            continue
        if kind == "user" and is_typed(message):
            sections.append("".join(current) + "</section>")
            turn += 1
            current = [f'<section class="turn" id="turn-{turn}"><h2>Turn {turn}</h2>']
        current += event_html(events, i)
    sections.append("".join(current) + "</section>")
    if sections[0] == preamble + "</section>":
        sections.pop(0)
    return sections, turn


def event_html(events, i):
    """The HTML pieces of one event (an assistant reply takes its results and subagents with it)."""
    event = events[i]
    kind, message = event.get("type"), event.get("message")
    if kind == "system":
        return [(f'<div class="msg system"><details><summary>system prompt</summary>'
                 f'{content_html(message.get("content"))}</details></div>')]
    if kind == "user":
        return [user_html(message)]
    if kind == "assistant":
        return reply_html(events, i)
    if kind == "tool" and not event.get("shown"):
        return [f'<div class="msg">{result_html(message)}</div>']
    if kind == "compaction":
        return [compaction_html(event)]
    if kind == "notice":  # an interruption or an error in red; the harness's routine news quieter
        text = str(event.get("text") or "")
        alarm = (text.startswith(("Interrupted", "error")) or "failed" in text
                 or "kept as it was" in text)
        return [(f'<div class="msg {"notice" if alarm else "info"}"><span class="badge '
                 f'{"notice-b" if alarm else "info-b"}">notice</span><pre>{esc(text)}</pre></div>')]
    if kind == "clear":
        return [('<div class="msg notice"><span class="badge notice-b">/clear</span>'
                 'the conversation was cleared here</div>')]
    if kind == "end":
        return ([(f'<div class="end">session ended ({esc(event.get("reason"))}) '
                  f'{esc(event.get("time"))}</div>')])
    return []


def reply_html(events, i):
    """An assistant reply with the results and subagents that follow it (marked shown, so they are
    not shown again on their own)."""
    results, children, j = {}, [], i + 1
    # a child ends before its result
    while j < len(events) and events[j].get("type") in ("tool", "subagent"):
        if events[j]["type"] == "subagent":
            children.append(events[j].get("messages") or [])
        else:
            found = events[j].get("message") or {}
            results[found.get("tool_call_id")] = found
        events[j] = {**events[j], "shown": True}
        j += 1
    following = events[j].get("message") if j < len(events) else None
    cut = isinstance(following, dict) and message_text(following).startswith(CUT_REPLY)
    pieces = [assistant_html(events[i]["message"], results, cut, children)]
    for leftover in results.values():  # a result whose call is not in this reply
        pieces.append(f'<div class="msg">{result_html(leftover)}</div>')
    return pieces


def render(path):
    """The whole page as a string."""
    info, events, warning = read_file(path)
    events = [dict(e) for e in events if isinstance(e, dict)]
    points = token_points(events)
    sections, turns = timeline(events)
    warn = f'<div class="msg notice">{esc(warning)}</div>' if warning else ""
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta '
            'http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
            'style-src \'unsafe-inline\'"><meta name="viewport" content="width=device-width, '
            f'initial-scale=1"><title>{esc(info["title"])}</title><style>{STYLE}</style></head>'
            f'<body><h1>{esc(info["title"])}</h1><div '
            f'class="meta">{esc(info["meta"])} · {turns} turns · {len(points)} model '
            f'calls</div>{warn}{chart(points)}{"".join(sections)}</body></html>')


def session_path(file):
    """FILE itself when it exists, else the session whose id FILE is (as `tinyharness sessions`
    lists it)."""
    if os.path.lexists(file) or os.sep in file:
        return file
    try:
        return str(find(file))
    except SessionError:
        return file  # reading it says it is missing


def view_command(file, output=None, open_it=False):
    if output is not None:  # a name the page could never have is a usage error, before any work
        try:
            check_name(output)
        except OSError as e:
            print(printable(f"error: -o: {e}"), file=sys.stderr)
            return 2
    file = session_path(file)
    try:
        page = render(file)
    except ViewError as e:
        print(printable(f"error: {e}"), file=sys.stderr)
        return 1
    target = Path(output) if output else Path(file).with_suffix(".html")
    try:
        # filedoor.py; a lone surrogate shows as \udcff
        write_text(target, page, errors="backslashreplace")
    except OSError as e:
        print(printable(f"error: cannot write {target}: {e.strerror or e}"), file=sys.stderr)
        return 1
    print(printable(target))
    if open_it:
        webbrowser.open(target.resolve().as_uri())
    return 0
