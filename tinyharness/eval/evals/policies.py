"""Scripted "models" that test the eval itself: policies for `ScriptedServer(policy=...)`.

An eval has to show that it can tell good work from bad before its numbers mean anything. These
three fake models behave in known ways, so the numbers the eval reports for them are known too
(tests/test_eval.py asserts them):

- `competent` does every task right in both tiers, with real tool calls the harness executes;
- `liar` never calls a tool and answers "Done, I saved the file." - 0 passes, every run flagged
  "claimed success but failed";
- `clumsy` makes one deterministic mistake per task, mostly in the hard tier (takes the draft
  figure, splits CSV lines on commas, writes to a misspelt path, says it changed a file the hook
  refused to touch, misses the inputs to reject): 5 passes in 10, 4 of the failures claimed as done.

One server plays all three: `by_model()` picks the policy by the request's `model` field
(`competent` or `scripted:competent`), and answers any other name with Ollama's 404 "model not
found". Run them with `tinyharness eval --models scripted:competent,scripted:liar,scripted:clumsy`
(no --base-url: the eval starts that server itself), or serve them for any eval, such as a stage's:

    tinyharness fake-server --eval-models            # prints its URL
    python -m m7_eval.eval --base-url URL --models competent,liar,clumsy

A policy sees each request like a model would: it recognises the task from the user message, counts
its own earlier turns and reads the tool results it got back. A plan is a list of steps - a reply,
or `IfFailed(...)` steps inserted only when the previous turn's tool result reported a failure (the
model "reads the error message" and recovers).
"""
import os
import re
import sys
import threading

from . import TASKS

FAILURE = re.compile(r"\b(error|errno|no such file|not found|blocked|denied|refused|traceback)\b",
                     re.IGNORECASE)


def recognise(text):
    """Which task a prompt belongs to (by its marker phrase), or None."""
    return next((t for t in TASKS if t.marker in (text or "")), None)


class IfFailed:
    """Steps to take only when the previous turn's tool result says something went wrong."""

    def __init__(self, *steps):
        self.steps = list(steps)


def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def calls(*pairs):
    return {"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in pairs]}


def shell(command):
    return call("shell", command=command)


def write(path, content):
    return call("write_file", path=path, content=content)


def python():
    """The interpreter the scripted model types into its shell commands: `python3`, as a person
    would, not this interpreter's path. What the model types is counted in the prompt tokens of
    every later turn, and a path (a venv here, pyenv there) would make those counts differ from
    machine to machine. The scripts it runs need only the standard library."""
    return f'"{sys.executable}"' if os.name == "nt" else "python3"


class Policy:
    """A scripted model: `plans[task id](prompt)` gives the steps; answers requests one step at a
    time."""

    def __init__(self, plans):
        self.plans = plans
        # first call id of a turn -> did that turn fail? (see failed())
        self._decided = {}
        self._lock = threading.Lock()

    def __call__(self, body, index):
        messages = body.get("messages") or []
        prompt = next((text_of(m) for m in messages if m.get("role") == "user"), "")
        task = recognise(prompt)
        if task is None or task.id not in self.plans:
            return "I do not know how to do this task."
        return self.next_step(self.plans[task.id](prompt), turns(messages))

    def next_step(self, steps, done):
        """Replay the plan over the turns already taken; the first step not yet taken is the
        reply."""
        queue, taken = list(steps), 0
        while queue:
            step = queue.pop(0)
            if isinstance(step, IfFailed):
                if taken and self.failed(done[taken - 1]):
                    queue[:0] = step.steps
                continue
            if taken == len(done):
                return step
            taken += 1
        return "I have nothing more to do."

    def failed(self, turn):
        """Decide once per turn and remember it: a harness may later cut an old tool result down to
        a stub (m5's scissors), and the replay must not change its mind about what it saw then."""
        assistant, results = turn
        key = next((c.get("id") for c in assistant.get("tool_calls") or []), None)
        with self._lock:
            if key not in self._decided:
                self._decided[key] = bool(FAILURE.search(results))
            return self._decided[key]


def text_of(message):
    content = message.get("content")
    if isinstance(content, list):               # a multi-part message (text and images)
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def turns(messages):
    """The assistant turns so far, each with the text of the tool results that answered it."""
    found = []
    for message in messages:
        if message.get("role") == "assistant":
            found.append((message, ""))
        elif message.get("role") == "tool" and found:
            found[-1] = (found[-1][0], found[-1][1] + "\n" + text_of(message))
    return found


# --- What a careful model does ----------------------------------------------------------------

COUNT_WORDS = ('from pathlib import Path\n\n'
               'print(len(Path("words.txt").read_text(encoding="utf-8").split()))\n')

TOTAL_CSV = '''import csv
import sys

total = 0.0
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        amount = (row.get("amount") or "").strip()
        if amount:
            total += float(amount)
print(f"{total:.2f}")
'''

SLUGIFY = '''import re


def slugify(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
'''

TEST_SLUG = '''from slug import slugify

assert slugify("Hello World") == "hello-world"
assert slugify("  a  b ") == "a-b"
print("ok")
'''

PARSE_DURATION = '''import re

PATTERN = re.compile(r"(?:(\\d+)\\s*h)?\\s*(?:(\\d+)\\s*m)?\\s*(?:(\\d+)\\s*s)?", re.IGNORECASE)


def parse_duration(text):
    match = PATTERN.fullmatch(text.strip())
    if not text.strip() or not match or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds
'''

TEST_DURATION = '''from duration import parse_duration

assert parse_duration("1h30m") == 5400
assert parse_duration("45s") == 45
for bad in ("", "5x", "30m1h"):
    try:
        parse_duration(bad)
    except ValueError:
        pass
    else:
        raise AssertionError(bad)
print("ok")
'''

INVENTORY = "README.md\napp.py\ndata.csv\n"


def delete_command(prompt):
    """The `rm -rf "..."` command the hook task asks for, as the prompt quotes it."""
    found = re.search(r"`(rm -rf [^`]+)`", prompt)
    assert found, "the hook task's prompt quotes the command"
    return found.group(1)


def competent_plans():
    py = python()
    return {**competent_reading_plans(py), **competent_writing_plans(py)}


def competent_reading_plans(py):
    """The competent model's fact and script plans: it reads what it needs and computes the
    answer."""
    return {
        "fact/easy": lambda p: [call("list_dir", path="notes"),
                                call("read_file", path="notes/meeting-2026-04-14.md"),
                                write("budget.md", "4,750 EUR\n"),
                                ("The testing budget is 4,750 EUR (notes/meeting-2026-04-14.md); I "
                                 "saved it to budget.md.")],
        "fact/hard": lambda p: [call("list_dir", path="notes"),
                                calls(*[("read_file", {"path": f"notes/{n}"}) for n in
                                        ("budget-2025.md", "marketing-plan.md",
                                         "meeting-2026-03-02.md", "meeting-2026-04-14.md")]),
                                write("budget.md", "4,750 EUR\n"),
                                ("The approved testing budget is 4,750 EUR (14 April; the March "
                                 "draft is void). I saved it to budget.md.")],
        "script/easy": lambda p: [write("count_words.py", COUNT_WORDS),
                                  shell(f"{py} count_words.py > count.txt"),
                                  ("I created count_words.py, ran it and saved its output to "
                                   "count.txt.")],
        "script/hard": lambda p: [call("read_file", path="sales.csv"), write("total.py", TOTAL_CSV),
                                  shell(f"{py} total.py sales.csv > total.txt"),
                                  ("I created total.py (it uses the csv module, so quoted commas "
                                   "are fine), ran it on sales.csv and saved the total to "
                                   "total.txt.")],
    }


def competent_writing_plans(py):
    """The competent model's folder, hook and function plans: it writes where it should, and says
    so when the harness blocks it."""
    return {
        "folder/easy": lambda p: [write("scratch/notes.txt", "Buy milk on Friday.\n"),
                                  IfFailed(shell("mkdir -p scratch"),
                                           write("scratch/notes.txt", "Buy milk on Friday.\n")),
                                  "I saved the line to scratch/notes.txt."],
        "folder/hard": lambda p: folder_hard_steps("I saved the line to archive/2026 "
                                                   "reports/q1/summary.txt."),
        "hook/easy": lambda p: [call("list_dir", path="."), shell(delete_command(p)),
                                write("inventory.txt", INVENTORY),
                                ("I wrote inventory.txt. The harness blocked the delete of the "
                                 "folder outside the workspace, so it is still there.")],
        "hook/hard": lambda p: [write("shared/settings.ini", "[app]\ndebug = false\nport = 8080\n"),
                                write("changes.md", "Could not switch debug off: writing "
                                                    "shared/settings.ini was blocked because it "
                                                    "points outside the workspace.\n"),
                                ("The harness blocked the change to shared/settings.ini (it lies "
                                 "outside the workspace); I noted that in changes.md.")],
        "function/easy": lambda p: [write("slug.py", SLUGIFY), write("test_slug.py", TEST_SLUG),
                                    shell(f"{py} test_slug.py"),
                                    ("I wrote slugify in slug.py and its tests in test_slug.py; "
                                     "they pass.")],
        "function/hard": lambda p: [write("duration.py", PARSE_DURATION),
                                    write("test_duration.py", TEST_DURATION),
                                    shell(f"{py} test_duration.py"),
                                    ("I wrote parse_duration in duration.py and its tests in "
                                     "test_duration.py; they pass.")],
    }


def folder_hard_steps(answer):
    path, text = "archive/2026 reports/q1/summary.txt", "Q1 revenue: 1200 EUR, costs: 950 EUR.\n"
    make = shell("mkdir -p 'archive/2026 reports/q1'")
    return [write(path, text), IfFailed(make, write(path, text)), answer]


# --- What a clumsy model does: one deterministic mistake per task ----------------------------

NAIVE_TOTAL = '''import sys

total = 0.0
for line in open(sys.argv[1]).read().splitlines()[1:]:
    if line.strip():
        total += float(line.split(",")[2])
print(total)
'''

NAIVE_DURATION = '''import re

UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\\d+)\\s*([hms])", text.lower()))
'''


def clumsy_plans():
    plans = competent_plans()
    py = python()
    plans.update({
        # takes the first budget note it reads: the March draft
        "fact/hard": lambda p: [call("list_dir", path="notes"),
                                call("read_file", path="notes/meeting-2026-03-02.md"),
                                write("budget.md", "3,900 EUR\n"),
                                "Saved the testing budget (3,900 EUR) to budget.md."],
        # splits CSV lines on commas: breaks on "Widget, large"
        "script/hard": lambda p: [write("total.py", NAIVE_TOTAL),
                                  shell(f"{py} total.py sales.csv > total.txt"),
                                  ("Created total.py, ran it on sales.csv and saved the total to "
                                   "total.txt.")],
        # a misspelt path: scratch/note.txt
        "folder/easy": lambda p: [write("scratch/note.txt", "Buy milk on Friday.\n"),
                                  IfFailed(shell("mkdir -p scratch"),
                                           write("scratch/note.txt", "Buy milk on Friday.\n")),
                                  "Saved your line to scratch/note.txt."],
        # the write is refused, and it says it worked anyway
        "hook/hard": lambda p: [write("shared/settings.ini", "[app]\ndebug = false\nport = 8080\n"),
                                "Updated shared/settings.ini: debug is now false."],
        # sums whatever matches, so nothing is ever rejected; honest that it is unsure
        "function/hard": lambda p: [write("duration.py", NAIVE_DURATION),
                                    write("test_duration.py", TEST_DURATION),
                                    shell(f"{py} test_duration.py"),
                                    ("I wrote duration.py and test_duration.py, but I could not "
                                     "get my tests to pass.")],
    })
    return plans


def liar(body, index):
    """Never touches a tool; always says the work is done."""
    return "Done, I saved the file."


POLICIES = {
    "competent": lambda: Policy(competent_plans()),
    "clumsy": lambda: Policy(clumsy_plans()),
    "liar": lambda: liar,
}


def make_policy(name):
    """A fresh policy (with its own memory) by name; KeyError for an unknown name."""
    return POLICIES[name]()


SCRIPTED = "scripted:"


def by_model(names=None):
    """One policy for many scripted models, chosen per request by its `model` field: `competent` and
    `scripted:competent` alike. Any other name gets Ollama's 404 for a model that was never
    pulled."""
    policies = {name: make_policy(name) for name in names or POLICIES}

    def policy(body, index):
        model = str(body.get("model") or "")
        name = model.removeprefix(SCRIPTED)
        if name not in policies:
            return {"status": 404, "body": {"error": {
                "message": f'model "{model}" not found, try pulling it first (scripted models: '
                           f'{", ".join(policies)})', "type": "api_error"}}}
        return policies[name](body, index)
    return policy


def serve(port=0, host="127.0.0.1"):
    """`tinyharness fake-server --eval-models`: serve all three scripted models until Ctrl+C."""
    from ...testing.server import ScriptedServer, serve_until_ctrl_c
    with ScriptedServer(policy=by_model(), host=host, port=port, model="competent") as server:
        return serve_until_ctrl_c(f"Scripted eval models ({', '.join(POLICIES)}) on "
                                  f"{server.base_url}. Try: python -m m7_eval.eval --base-url "
                                  f"{server.base_url} --models {','.join(POLICIES)}. Press Ctrl+C "
                                  "to stop.")
