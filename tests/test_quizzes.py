"""Every stage has a well-formed quiz whose explanations point at real code; the quiz runner works."""
import json
from pathlib import Path

import pytest

from quizzes import quiz
from quizzes.quiz import (QuizError, QuizFormatError, UnknownStage, code_references, find_stage,
                          list_stages, parse_quiz, record_score, resolve_reference, run_quiz)

ROOT = Path(__file__).resolve().parents[1]
STAGES = list_stages(ROOT)


@pytest.fixture(autouse=True)
def progress(tmp_path, monkeypatch):
    """Never touch the learner's real progress file."""
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TINYHARNESS_PROGRESS", str(path))
    return path


# --- the structural test: grows with every stage folder ------------------------------------

@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_stage_has_a_quiz_that_points_at_its_code(stage):
    assert (stage / "README.md").is_file(), f"{stage.name} has no README.md"
    assert (stage / "QUIZ.md").is_file(), f"{stage.name} has no QUIZ.md"
    text = (stage / "QUIZ.md").read_text(encoding="utf-8")
    assert text.lstrip().splitlines()[0].strip() == f"# Quiz: {stage.name}"
    questions = parse_quiz(text)
    assert len(questions) == 3
    for q in questions:
        refs = code_references(q.explanation)
        assert refs, f"question {q.number}: the explanation names no code (`file.py:name`)"
        for file, name in refs:
            assert resolve_reference(stage, file, name), f"question {q.number}: `{file}:{name}` not found"
    assert len({q.answer for q in questions}) > 1, "the three right answers are all the same letter"


# --- the parser ------------------------------------------------------------------------------

def question(n, answer="B", options="ABCD", explanation="Because: see `loop.py:run`."):
    lines = [f"## {n}. Question number {n}?", ""]
    lines += [f"- {letter}) option {letter}" for letter in options]
    lines += ["", f"Answer: {answer}", "", f"Explanation: {explanation}", ""]
    return "\n".join(lines)


def sample(*questions):
    return "# Quiz: m1_fake\n\n" + "\n".join(questions or [question(1), question(2, "A"), question(3, "C")])


def test_parse_a_good_quiz():
    text = sample(question(1), question(2, "a", "ABC"), question(3, "E", "ABCDE", "First line\nsecond `x.py:A.b`."))
    questions = parse_quiz(text)
    assert [q.number for q in questions] == [1, 2, 3]
    first = questions[0]
    assert first.text == "Question number 1?"
    assert first.options == {"A": "option A", "B": "option B", "C": "option C", "D": "option D"}
    assert first.answer == "B"
    assert first.explanation == "Because: see `loop.py:run`."
    assert questions[1].answer == "A"  # lower case accepted
    assert questions[2].explanation == "First line\nsecond `x.py:A.b`."


def test_parse_rejects_a_missing_answer():
    broken = question(2).replace("Answer: B\n", "")
    with pytest.raises(QuizFormatError, match="question 2: missing the 'Answer: X' line"):
        parse_quiz(sample(question(1), broken, question(3)))


def test_parse_rejects_two_questions():
    with pytest.raises(QuizFormatError, match="expected 3 questions.*found 2"):
        parse_quiz(sample(question(1), question(2)))


@pytest.mark.parametrize("options", ["ABD", "BCD", "AB", "ABCDEF"])
def test_parse_rejects_bad_option_letters(options):
    with pytest.raises(QuizFormatError, match="question 3: needs 3-5 options"):
        parse_quiz(sample(question(1), question(2), question(3, "B", options)))


def test_parse_rejects_an_answer_that_is_not_an_option():
    with pytest.raises(QuizFormatError, match="question 1: Answer 'E' is not one of the options ABCD"):
        parse_quiz(sample(question(1, "E"), question(2), question(3)))


def test_parse_rejects_a_missing_title_and_bad_numbering():
    with pytest.raises(QuizFormatError, match="# Quiz:"):
        parse_quiz(sample().replace("# Quiz: m1_fake", "Quiz"))
    with pytest.raises(QuizFormatError, match="question 2 is numbered 5"):
        parse_quiz(sample(question(1), question(5), question(3)))


def test_code_references():
    text = "See `loop.py:run_tool_calls`, `llm.py:Client.chat` and `evals/tasks.py:TASKS`; not `x` or `a.py`."
    assert code_references(text) == [("loop.py", "run_tool_calls"), ("llm.py", "Client.chat"),
                                     ("evals/tasks.py", "TASKS")]


# --- resolve_reference -----------------------------------------------------------------------

def test_resolve_reference(tmp_path):
    (tmp_path / "loop.py").write_text(
        "MAX_TURNS = 8\nlimit: int = 3\n\ndef run():\n    inner = 1\n\n"
        "class Client:\n    model: str = 'x'\n    def chat(self):\n        pass\n", encoding="utf-8")
    for name in ["run", "MAX_TURNS", "limit", "Client", "Client.chat", "Client.model"]:
        assert resolve_reference(tmp_path, "loop.py", name), name
    for name in ["missing", "Client.missing", "run.inner", "MAX_TURNS.x"]:
        assert not resolve_reference(tmp_path, "loop.py", name), name
    assert not resolve_reference(tmp_path, "nofile.py", "run")


# --- stages ----------------------------------------------------------------------------------

def test_find_stage_accepts_short_and_long_names(tmp_path):
    for name in ["m1_loop", "m0_llm", "m10_notastage"]:
        (tmp_path / name).mkdir()
    (tmp_path / "m2_file").write_text("")
    assert [s.name for s in list_stages(tmp_path)] == ["m0_llm", "m1_loop"]
    assert find_stage("m1", tmp_path).name == "m1_loop"
    assert find_stage("m1_loop/", tmp_path).name == "m1_loop"
    with pytest.raises(UnknownStage, match="unknown stage 'm7'; valid stages: m0_llm, m1_loop"):
        find_stage("m7", tmp_path)


# --- run_quiz --------------------------------------------------------------------------------

@pytest.fixture
def stage(tmp_path):
    folder = tmp_path / "m1_fake"
    folder.mkdir()
    (folder / "QUIZ.md").write_text(sample(), encoding="utf-8")  # answers B, A, C
    return folder


def scripted(*replies):
    """An input() that replies from a script, then hits end of input."""
    replies, prompts = list(replies), []

    def fake_input(prompt):
        prompts.append(prompt)
        if not replies:
            raise EOFError
        return replies.pop(0)
    fake_input.prompts = prompts
    return fake_input


def test_run_quiz_scores_explains_and_saves(stage, progress):
    printed = []
    assert run_quiz(stage, input=scripted("b", "A", "D"), output=printed.append) == (2, 3)
    text = "\n".join(printed)
    assert text.count("Right.") == 2
    assert "Wrong: the answer is C) option C" in text
    assert "Explanation: Because: see `loop.py:run`." in text
    assert "Score: 2/3" in text
    saved = json.loads(progress.read_text())["m1_fake"]
    assert (saved["best"], saved["total"], saved["last_score"]) == (2, 3, 2)


def test_run_quiz_asks_again_on_invalid_input(stage):
    printed, fake_input = [], scripted("", "x", "7", "B", "A", "C")
    assert run_quiz(stage, input=fake_input, output=printed.append) == (3, 3)
    assert len(fake_input.prompts) == 6
    assert printed.count("Please type one of A, B, C, D.") == 3


def test_run_quiz_stops_at_end_of_input_without_saving(stage, progress):
    printed = []
    assert run_quiz(stage, input=scripted("B"), output=printed.append) == (1, 3)
    assert "Quiz stopped after 1 of 3 questions; nothing saved." in "\n".join(printed)
    assert not progress.exists()


def test_run_quiz_by_name_keeps_the_best_score(stage, progress):
    run_quiz("m1", input=scripted("B", "A", "C"), output=lambda *a: None, root=stage.parent)
    run_quiz("m1_fake", input=scripted("A", "A", "C"), output=lambda *a: None, root=stage.parent)
    saved = quiz.load_progress()["m1_fake"]
    assert (saved["best"], saved["last_score"]) == (3, 2)


def test_run_quiz_errors_are_messages(stage):
    with pytest.raises(QuizError, match="has no QUIZ.md"):
        run_quiz(stage.parent / "m1_fake" / "nothing", input=scripted())
    (stage / "QUIZ.md").write_text(sample(question(1)), encoding="utf-8")
    with pytest.raises(QuizFormatError, match="m1_fake/QUIZ.md: expected 3 questions"):
        run_quiz(stage, input=scripted())


def test_record_score_and_main_listing(progress, capsys, monkeypatch):
    record_score("m0_llm", 3, 3)
    from quizzes.__main__ import main
    monkeypatch.setattr(quiz, "ROOT", progress.parent)
    (progress.parent / "m0_llm").mkdir()
    (progress.parent / "m1_loop").mkdir()
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "m0_llm   quiz 3/3" in out and "m1_loop  quiz not taken" in out
    assert main(["m9"]) == 2
    assert "error: unknown stage 'm9'" in capsys.readouterr().err
