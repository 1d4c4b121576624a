"""Three questions per stage: read a stage's QUIZ.md and its key, ask in a shuffled order, score, remember.

QUIZ.md (every stage folder has one) holds the questions only, so reading it gives nothing away:

    # Quiz: m1_loop

    (an optional paragraph)

    ## 1. Who writes the `id` of a tool call?

    - A) The model
    - B) The serving layer
    - C) The harness
    - D) The HTTP library

The answers live out of sight, in quizzes/keys/<stage folder>.json, next to the stage folders:

    {"stage": "m1_loop", "questions": [
      {"answer": "B",
       "misconceptions": {"A": "what a learner who picks A believes", "C": "...", "D": "..."},
       "explanation": "Why, pointing at the code: `llm.py:Client.chat`.",
       "confirm": "a command that shows the answer (only on the 'predict what happens' question)"},
      ...]}

Exactly three questions, 3-5 options lettered A, B, C... in order. Every attempt shows the options in a
new order, lettered afresh, so a remembered letter is worth nothing; answers are mapped back to the key.
A code reference in an explanation is a backticked `file.py:name` (or `file.py:Class.method`).

A question whose text starts "Predict:" asks what the stage's Try-it will show, so it is worth most
before the learner has seen it: `--before` asks those questions alone and keeps their answers in the
progress file (under "quiz_before"); the next attempt without `--before` asks only the others and
records the whole quiz. The runner cannot tell whether the Try-it was run in between; the stage's
README says when to take which half.
"""
from __future__ import annotations

import ast
import datetime
import json
import os
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root, next to the stages
PROGRESS_FILE = ".tinyharness-progress.json"
BEFORE = "quiz_before"  # the progress file's record of `--before` halves waiting for the rest
BEFORE_HELP = ("only the questions that predict what the stage's Try-it shows, to take before you run "
               "it; the same command without --before then asks the rest and records the whole quiz")
KEYS_FOLDER = Path("quizzes") / "keys"      # relative to the folder that holds the stages
QUESTIONS = 3
LETTERS = "ABCDE"

HEADING = re.compile(r"## (\d+)\.\s+(.+)")
OPTION = re.compile(r"- ([A-Za-z])\)\s+(.+)")
REFERENCE = re.compile(r"`([\w./-]+\.py):([A-Za-z_][\w.]*)`")


class QuizError(Exception):
    """Something the learner should read, not a traceback."""


class QuizFormatError(QuizError):
    """QUIZ.md or its key does not follow the format above."""


class UnknownStage(QuizError):
    """No stage folder by that name."""


@dataclass
class Question:
    number: int
    text: str
    options: dict[str, str]  # letter -> text, in the order of QUIZ.md
    answer: str = ""         # the letter of the right option, from the key
    explanation: str = ""
    misconceptions: dict[str, str] = field(default_factory=dict)  # wrong letter -> the belief behind it
    confirm: str = ""        # a command that shows the answer ('predict what happens' questions)


class Score(tuple):
    """(right, total), as run_quiz always returned, plus `finished`: False when the quiz was stopped."""

    finished: bool

    def __new__(cls, right: int, total: int, finished: bool = True):
        score = super().__new__(cls, (right, total))
        score.finished = finished
        return score


# --- reading the questions and the key --------------------------------------------------------

def parse_quiz(text: str) -> list[Question]:
    """The questions of a QUIZ.md, without answers. A closing <details> block is not read."""
    lines = text.splitlines()
    if not next((line for line in lines if line.strip()), "").startswith("# Quiz:"):
        raise QuizFormatError("the first line must be '# Quiz: <stage>'")
    sections: list[tuple] = []  # (heading match, lines below it)
    for line in lines:
        if line.lstrip().startswith("<details"):
            break  # answers for readers of the file, at the very end: the runner has the key
        if line.startswith("## "):
            heading = HEADING.fullmatch(line.strip())
            if not heading:
                raise QuizFormatError(f"bad heading {line!r}: expected '## N. question'")
            sections.append((heading, []))
        elif sections:
            sections[-1][1].append(line)
    if len(sections) != QUESTIONS:
        raise QuizFormatError(f"expected {QUESTIONS} questions ('## N. ...'), found {len(sections)}")
    return [_parse_question(n, heading, body) for n, (heading, body) in enumerate(sections, 1)]


def _parse_question(expected: int, heading: re.Match, body: list[str]) -> Question:
    where = f"question {expected}"
    if int(heading[1]) != expected:
        raise QuizFormatError(f"{where} is numbered {heading[1]}; questions go 1, 2, 3")
    text, options = [heading[2].strip()], {}
    for line in body:
        stripped = line.strip()
        if stripped.startswith("<!--") or stripped.lower().startswith(("answer:", "explanation:")):
            if not stripped.startswith("<!--"):
                raise QuizFormatError(f"{where}: answers and explanations go in the key, not in QUIZ.md")
        elif option := OPTION.fullmatch(stripped):
            if option[1] in options:
                raise QuizFormatError(f"{where}: option {option[1]}) repeated")
            options[option[1]] = option[2].strip()
        elif stripped and not options:  # more question text (e.g. a code line)
            text.append(line.rstrip())
        elif stripped:
            raise QuizFormatError(f"{where}: unexpected line {stripped!r}")
    letters = "".join(options)
    if not 3 <= len(options) <= 5 or letters != LETTERS[: len(options)]:
        raise QuizFormatError(
            f"{where}: needs 3-5 options '- A) ...' lettered A, B, C... in order, got {letters or 'none'}")
    return Question(expected, "\n".join(text), options)


def key_path(stage_dir) -> Path:
    stage_dir = Path(stage_dir)
    return stage_dir.parent / KEYS_FOLDER / f"{stage_dir.name}.json"


def apply_key(questions: list[Question], key: dict) -> list[Question]:
    """Fill in answer, explanation, misconceptions and confirm from a key; checks they fit."""
    entries = key.get("questions") if isinstance(key, dict) else None
    if not isinstance(entries, list) or len(entries) != len(questions):
        raise QuizFormatError(f"the key needs a 'questions' list of {len(questions)} entries")
    for q, entry in zip(questions, entries):
        where = f"key of question {q.number}"
        if not isinstance(entry, dict):
            raise QuizFormatError(f"{where}: expected an object")
        answer = str(entry.get("answer", "")).upper()
        if answer not in q.options:
            raise QuizFormatError(f"{where}: answer {answer!r} is not one of the options {''.join(q.options)}")
        explanation = str(entry.get("explanation", "")).strip()
        if not explanation:
            raise QuizFormatError(f"{where}: missing the explanation")
        q.answer, q.explanation = answer, explanation
        q.misconceptions = dict(entry.get("misconceptions") or {})
        q.confirm = str(entry.get("confirm", "")).strip()
    return questions


def load_quiz(stage_dir) -> list[Question]:
    """The questions of a stage folder with their key applied."""
    stage_dir = Path(stage_dir)
    quiz_file, keys = stage_dir / "QUIZ.md", key_path(stage_dir)
    if not quiz_file.is_file():
        raise QuizError(f"{stage_dir.name} has no QUIZ.md yet")
    try:
        questions = parse_quiz(quiz_file.read_text(encoding="utf-8"))
    except QuizFormatError as e:
        raise QuizFormatError(f"{stage_dir.name}/QUIZ.md: {e}") from None
    try:
        key = json.loads(keys.read_text(encoding="utf-8"))
    except OSError:
        raise QuizError(f"{stage_dir.name} has no answer key ({KEYS_FOLDER.as_posix()}/{keys.name})") from None
    except ValueError as e:
        raise QuizFormatError(f"{KEYS_FOLDER.as_posix()}/{keys.name} is not valid JSON: {e}") from None
    try:
        return apply_key(questions, key)
    except QuizFormatError as e:
        raise QuizFormatError(f"{KEYS_FOLDER.as_posix()}/{keys.name}: {e}") from None


# --- code references in explanations ----------------------------------------------------------

def code_references(explanation: str) -> list[tuple[str, str]]:
    """The backticked `file.py:name` references, in order."""
    return REFERENCE.findall(explanation)


def resolve_reference(stage_dir, file: str, dotted_name: str) -> bool:
    """Is `dotted_name` (name, or Class.method) defined at the top of stage_dir/file?"""
    try:
        body = ast.parse((Path(stage_dir) / file).read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError):
        return False
    for part in dotted_name.split("."):
        node = _definitions(body).get(part)
        if node is None:
            return False
        body = node.body if isinstance(node, ast.ClassDef) else []  # Class.method
    return True


def _definitions(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


# --- stages and progress ----------------------------------------------------------------------

def list_stages(root=None) -> list[Path]:
    """The stage folders m0_llm/, m1_loop/, ... that exist, in order."""
    folders = [p for p in Path(root or ROOT).glob("m[0-9]_*") if p.is_dir()]
    return sorted(folders, key=lambda p: int(p.name[1]))


def find_stage(name: str, root=None) -> Path:
    """Accepts the folder name (m1_loop) or its short form (m1)."""
    stages = list_stages(root)
    wanted = str(name).rstrip("/\\")
    for stage in stages:
        if wanted in (stage.name, stage.name.split("_")[0]):
            return stage
    valid = ", ".join(s.name for s in stages) or "none found"
    raise UnknownStage(f"unknown stage {name!r}; valid stages: {valid} (or the short form, like m1)")


def progress_file() -> Path:
    return Path(os.environ.get("TINYHARNESS_PROGRESS") or ROOT / PROGRESS_FILE)


def load_progress(path=None) -> dict:
    """{stage folder name: {"best", "total", "last_score", "last_date"}}; entries of another shape are dropped."""
    try:
        data = json.loads(Path(path or progress_file()).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not taken yet, or unreadable: start afresh
        return {}
    if not isinstance(data, dict):
        return {}
    return {stage: entry for stage, entry in data.items() if isinstance(entry, dict)
            and isinstance(entry.get("best"), int) and isinstance(entry.get("total"), int)}


def _read_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def record_score(stage: str, score: int, total: int, path=None) -> dict:
    """Update this stage's entry; everything else in the file (the exercises' record) is kept as it is."""
    path = Path(path or progress_file())
    best = max(score, load_progress(path).get(stage, {}).get("best", 0))
    entry = {"best": best, "total": total, "last_score": score,
             "last_date": datetime.date.today().isoformat()}
    data = _read_file(path)
    data[stage] = entry
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return entry


def load_before(stage: str, path=None) -> dict[int, bool]:
    """The predictions of a `--before` half still waiting for the rest: {question number: right}."""
    half = _read_file(Path(path or progress_file())).get(BEFORE)
    half = half.get(stage) if isinstance(half, dict) else None
    if not isinstance(half, dict):
        return {}
    return {int(n): right for n, right in half.items() if str(n).isdigit() and isinstance(right, bool)}


def save_before(stage: str, answers: dict[int, bool] | None, path=None) -> None:
    """Keep a stage's `--before` half (None: drop it, the quiz is whole); the rest of the file is kept."""
    path = Path(path or progress_file())
    data = _read_file(path)
    halves = given if isinstance(given := data.get(BEFORE), dict) else {}
    if answers is None and stage not in halves:
        return
    halves.pop(stage, None)
    if answers is not None:
        halves[stage] = {str(n): right for n, right in answers.items()}
    data[BEFORE] = halves
    if not halves:
        del data[BEFORE]
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def passed(entry: dict | None) -> bool:
    """A quiz is passed once a finished attempt got every question right."""
    if not entry:
        return False
    return entry["total"] > 0 and entry["best"] >= entry["total"]


def progress_label(entry: dict | None) -> str:
    if not entry:
        return "quiz not taken"
    return f"quiz {entry['best']}/{entry['total']}" + (" passed" if passed(entry) else "")


# --- asking -----------------------------------------------------------------------------------

def shuffled(question: Question, rng: random.Random) -> list[str]:
    """The original letters of the options in the order this attempt shows them."""
    order = list(question.options)
    rng.shuffle(order)
    return order


def is_prediction(question: Question) -> bool:
    """A 'Predict: ...' question: the stage's Try-it shows its answer, so it is asked before it."""
    return question.text.startswith("Predict")


def run_quiz(stage, input=input, output=print, progress_path=None, root=None, rng=None,
             before=False) -> Score:
    """Ask the questions of `stage` (a name like m1, or a folder path); returns (right, total).

    The options come in a new order on every attempt (`rng`, a random.Random, fixes it for tests).
    End of input (Ctrl-D) stops the quiz: the result has `finished` False and nothing is saved.
    Ctrl-C says that nothing was saved and raises KeyboardInterrupt again.
    `before` asks only the 'Predict' questions and keeps their answers; the next attempt without it
    asks the rest and records the whole quiz.
    """
    stage_dir = Path(stage) if isinstance(stage, os.PathLike) else find_stage(stage, root)
    questions = load_quiz(stage_dir)
    total, name = len(questions), stage_dir.name
    earlier = {} if before else {n: right for n, right in load_before(name, progress_path).items()
                                 if any(q.number == n for q in questions)}
    asked = [q for q in questions if (is_prediction(q) if before else q.number not in earlier)]
    output(_heading(name, total, asked, earlier, before))
    answers = _ask_each(asked, rng or random.Random(), input, output)
    half = before and len(asked) < total
    score = sum(answers.values()) + sum(earlier.values())
    if len(answers) < len(asked):  # stopped: nothing saved
        return Score(score, len(asked) if half else total, finished=False)
    if half:
        save_before(name, answers, progress_path)
        output(f"\nPredictions: {score}/{len(asked)} right, kept. After the Try-it, take the quiz "
               f"again without --before: it asks the other {total - len(asked)}.")
        return Score(score, len(asked))
    entry = record_score(name, score, total, progress_path)
    save_before(name, None, progress_path)
    output(f"\nScore: {score}/{total} (best so far: {entry['best']}/{total}).")
    return Score(score, total)


def _heading(name, total, asked, earlier, before) -> str:
    if before and len(asked) < total:
        return (f"Quiz: {name}, its {len(asked)} of {total} questions that predict what the Try-it shows: "
                "take them before you run it. Type a letter and Enter (Ctrl-D stops).")
    if earlier:
        return (f"Quiz: {name}, the {len(asked)} of {total} questions left (answered before the Try-it: "
                f"{sum(earlier.values())}/{len(earlier)} right). Type a letter and Enter (Ctrl-D stops).")
    return f"Quiz: {name}, {total} questions. Type a letter and Enter (Ctrl-D stops)."


def _ask_each(questions, rng, input, output) -> dict[int, bool]:
    """Ask each question in turn: {number: answered right}, without the rest after an end of input."""
    answers = {}
    for done, q in enumerate(questions):
        order = shuffled(q, rng)
        shown = dict(zip(LETTERS, order))  # the letter on screen -> the letter in QUIZ.md and the key
        output(f"\n{q.number}. {q.text}")
        for letter, original in shown.items():
            output(f"   {letter}) {q.options[original]}")
        try:
            choice = _ask(shown, input, output)
        except KeyboardInterrupt:
            output(f"\nQuiz interrupted after {done} of {len(questions)} questions; nothing saved.")
            raise
        if choice is None:
            output(f"\nQuiz not finished: stopped after {done} of {len(questions)} questions; nothing saved.")
            break
        answers[q.number] = shown[choice] == q.answer
        _explain(q, choice, shown, order, output)
    return answers


def _explain(q: Question, choice: str, shown: dict[str, str], order: list[str], output) -> None:
    if shown[choice] == q.answer:
        output("Right.")
    else:
        output(f"Wrong: the answer is {LETTERS[order.index(q.answer)]}) {q.options[q.answer]}")
        if q.misconceptions.get(shown[choice]):  # the belief behind the option picked, and what is true
            output(f"Why not {choice}): {q.misconceptions[shown[choice]]}")
    output(f"Explanation: {q.explanation}")
    if q.confirm:
        output("See for yourself, from the repository's folder:")
        for line in q.confirm.splitlines():
            output(f"    {line}")


def _ask(shown: dict[str, str], input, output) -> str | None:
    """Read until the reply is one of the letters on screen; None at end of input."""
    letters = ", ".join(shown)
    while True:
        try:
            reply = input(f"Your answer ({letters}): ")
        except EOFError:
            return None
        letter = reply.strip().rstrip(")").upper()
        if letter in shown:
            return letter
        output(f"Please type one of {letters}.")


def take_quiz(stage: str, root=None, input=input, output=print, before=False) -> int:
    """run_quiz for a command line. Exit codes: 0 finished (whatever the score: the progress file and
    `tinyharness course list` show it), 1 not finished (end of input) or the quiz cannot be read,
    2 unknown stage, 130 Ctrl-C. Only a finished quiz is recorded."""
    try:
        result = run_quiz(stage, input=input, output=output, root=root, before=before)
    except KeyboardInterrupt:
        return 130
    except UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (QuizError, OSError) as e:  # OSError: the progress file could not be written
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0 if result.finished else 1
