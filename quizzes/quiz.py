"""Three questions per stage: parse a stage's QUIZ.md, ask, score, remember.

The format of QUIZ.md (every stage folder has one):

    # Quiz: m1_loop

    ## 1. Who writes the `id` of a tool call?

    - A) The model
    - B) The serving layer
    - C) The harness

    Answer: B

    Explanation: Why, pointing at the code: `llm.py:Client.chat`.

Exactly three questions, 3-5 options lettered A, B, C... in order. A code reference
is a backticked `file.py:name` (or `file.py:Class.method`) in that stage's folder.
"""
from __future__ import annotations

import ast
import datetime
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root, next to the stages
PROGRESS_FILE = ".tinyharness-progress.json"
QUESTIONS = 3
LETTERS = "ABCDE"

HEADING = re.compile(r"## (\d+)\.\s+(.+)")
OPTION = re.compile(r"- ([A-Za-z])\)\s+(.+)")
ANSWER = re.compile(r"Answer:\s*(\S*)")
REFERENCE = re.compile(r"`([\w./-]+\.py):([A-Za-z_][\w.]*)`")


class QuizError(Exception):
    """Something the learner should read, not a traceback."""


class QuizFormatError(QuizError):
    """QUIZ.md does not follow the format above."""


class UnknownStage(QuizError):
    """No stage folder by that name."""


@dataclass
class Question:
    number: int
    text: str
    options: dict[str, str]  # letter -> text, in order
    answer: str
    explanation: str


def parse_quiz(text: str) -> list[Question]:
    lines = text.splitlines()
    if not next((line for line in lines if line.strip()), "").startswith("# Quiz:"):
        raise QuizFormatError("the first line must be '# Quiz: <stage>'")
    sections = []  # (heading match, lines below it)
    for line in lines:
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
    text, options, answer, explanation = [heading[2].strip()], {}, None, None
    for line in body:
        stripped = line.strip()
        if explanation is not None:  # the explanation runs to the next question
            explanation.append(stripped)
        elif option := OPTION.fullmatch(stripped):
            if option[1] in options or answer is not None:
                raise QuizFormatError(f"{where}: option {option[1]}) repeated or after the Answer")
            options[option[1]] = option[2].strip()
        elif found := ANSWER.fullmatch(stripped):
            answer = found[1].upper()
        elif stripped.startswith("Explanation:"):
            explanation = [stripped.removeprefix("Explanation:").strip()]
        elif stripped and not options:  # more question text (e.g. a code line)
            text.append(line.rstrip())
        elif stripped:
            raise QuizFormatError(f"{where}: unexpected line {stripped!r}")
    letters = "".join(options)
    if not 3 <= len(options) <= 5 or letters != LETTERS[: len(options)]:
        raise QuizFormatError(
            f"{where}: needs 3-5 options '- A) ...' lettered A, B, C... in order, got {letters or 'none'}")
    if answer is None:
        raise QuizFormatError(f"{where}: missing the 'Answer: X' line (before 'Explanation:')")
    if answer not in options:
        raise QuizFormatError(f"{where}: Answer {answer!r} is not one of the options {letters}")
    if not explanation or not "".join(explanation):
        raise QuizFormatError(f"{where}: missing the 'Explanation:' paragraph")
    return Question(expected, "\n".join(text), options, answer, "\n".join(explanation).strip())


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
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


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
    """{stage folder name: {"best", "total", "last_score", "last_date"}}"""
    try:
        data = json.loads(Path(path or progress_file()).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not taken yet, or unreadable: start afresh
        return {}
    return data if isinstance(data, dict) else {}


def record_score(stage: str, score: int, total: int, path=None) -> dict:
    path = Path(path or progress_file())
    progress = load_progress(path)
    best = max(score, progress.get(stage, {}).get("best", 0))
    entry = {"best": best, "total": total, "last_score": score,
             "last_date": datetime.date.today().isoformat()}
    progress[stage] = entry
    path.write_text(json.dumps(progress, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return entry


def progress_label(entry: dict | None) -> str:
    return f"quiz {entry['best']}/{entry['total']}" if entry else "quiz not taken"


def run_quiz(stage, input=input, output=print, progress_path=None, root=None) -> tuple[int, int]:
    """Ask the questions of `stage` (a name like m1, or a folder path); returns (score, total).

    End of input (Ctrl-D) stops the quiz: the score so far is returned and nothing is saved.
    """
    stage_dir = Path(stage) if isinstance(stage, os.PathLike) else find_stage(stage, root)
    quiz_file = stage_dir / "QUIZ.md"
    if not quiz_file.is_file():
        raise QuizError(f"{stage_dir.name} has no QUIZ.md yet")
    try:
        questions = parse_quiz(quiz_file.read_text(encoding="utf-8"))
    except QuizFormatError as e:
        raise QuizFormatError(f"{stage_dir.name}/QUIZ.md: {e}") from None
    score, total = 0, len(questions)
    output(f"Quiz: {stage_dir.name}, {total} questions. Type a letter and Enter (Ctrl-D stops).")
    for q in questions:
        output(f"\n{q.number}. {q.text}")
        for letter, text in q.options.items():
            output(f"   {letter}) {text}")
        choice = _ask(q.options, input, output)
        if choice is None:
            output(f"\nQuiz stopped after {q.number - 1} of {total} questions; nothing saved.")
            return score, total
        if choice == q.answer:
            score += 1
            output("Right.")
        else:
            output(f"Wrong: the answer is {q.answer}) {q.options[q.answer]}")
        output(f"Explanation: {q.explanation}")
    entry = record_score(stage_dir.name, score, total, progress_path)
    output(f"\nScore: {score}/{total} (best so far: {entry['best']}/{total}).")
    return score, total


def _ask(options: dict[str, str], input, output) -> str | None:
    """Read until the reply is one of the option letters; None at end of input."""
    letters = ", ".join(options)
    while True:
        try:
            reply = input(f"Your answer ({letters}): ")
        except (EOFError, KeyboardInterrupt):
            return None
        letter = reply.strip().rstrip(")").upper()
        if letter in options:
            return letter
        output(f"Please type one of {letters}.")


def take_quiz(stage: str, root=None, input=input, output=print) -> int:
    """run_quiz for a command line: errors become one message on stderr and an exit code."""
    try:
        run_quiz(stage, input=input, output=output, root=root)
    except UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (QuizError, OSError) as e:  # OSError: the progress file could not be written
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
