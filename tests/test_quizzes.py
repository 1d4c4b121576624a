"""The quizzes: well-formed, keys out of sight, no giveaways, every code reference real; and the runner."""
import ast
import functools
import json
import random
import re
import shlex
from pathlib import Path

import pytest

from quizzes import quiz
from quizzes.quiz import (QuizError, QuizFormatError, UnknownStage, code_references, find_stage,
                          list_stages, load_quiz, parse_quiz, record_score, resolve_reference, run_quiz,
                          take_quiz)

ROOT = Path(__file__).resolve().parents[1]
STAGES = list_stages(ROOT)
QUIZZES = {stage.name: load_quiz(stage) for stage in STAGES}
ALL = [(name, q) for name, questions in QUIZZES.items() for q in questions]


@pytest.fixture(autouse=True)
def progress(tmp_path, monkeypatch):
    """Never touch the learner's real progress file."""
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TINYHARNESS_PROGRESS", str(path))
    return path


# --- the texts: one test per rule, over all stages ------------------------------------------

@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_stage_has_a_quiz_with_a_key(stage):
    assert (stage / "README.md").is_file(), f"{stage.name} has no README.md"
    text = (stage / "QUIZ.md").read_text(encoding="utf-8")
    assert text.lstrip().splitlines()[0].strip() == f"# Quiz: {stage.name}"
    questions = QUIZZES[stage.name]
    assert len(questions) == 3
    for q in questions:
        assert len(q.options) == 4, f"question {q.number}: four options, so a guess is worth 1/4"
        assert code_references(q.explanation), f"question {q.number}: the explanation names no code"
        assert set(q.misconceptions) == set(q.options) - {q.answer}, \
            f"question {q.number}: the key must say which misconception each wrong option stands for"
        assert all(len(m) > 20 for m in q.misconceptions.values())
    predicts = [q.number for q in questions if q.text.startswith("Predict")]
    assert predicts, "at least one 'Predict: ...' question per stage"
    assert [q.number for q in questions if q.confirm] == predicts, \
        "each 'Predict' question's key, and only theirs, gives a command that confirms the answer"


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_quiz_md_shows_no_answers(stage):
    text = (stage / "QUIZ.md").read_text(encoding="utf-8").split("<details")[0]
    assert not re.search(r"(?im)^\s*(answer|explanation)\s*:", text)
    for q in QUIZZES[stage.name]:   # an explanation pasted into an option would give it away
        assert max(len(option) for option in q.options.values()) <= 70, \
            f"question {q.number}: an option of more than 70 characters is carrying an explanation"


def test_each_letter_is_the_answer_five_to_nine_times():
    counts = {letter: sum(q.answer == letter for _, q in ALL) for letter in "ABCD"}
    assert len(ALL) == 27 and all(5 <= n <= 9 for n in counts.values()), counts


def wrong_lengths(q):
    return [len(text) for letter, text in q.options.items() if letter != q.answer]


def test_the_right_option_is_seldom_the_longest_and_never_by_much():
    longest = [f"{name} {q.number}" for name, q in ALL if len(q.options[q.answer]) > max(wrong_lengths(q))]
    assert len(longest) <= 9, longest
    for name, q in ALL:
        assert len(q.options[q.answer]) <= 1.3 * max(wrong_lengths(q)), f"{name} question {q.number}"


def test_picking_the_longest_option_scores_at_most_a_third():
    # the reviewer who always picks the longest option (a tie split evenly between the longest ones)
    expected = 0.0
    for _, q in ALL:
        top = max(len(text) for text in q.options.values())
        tied = [letter for letter, text in q.options.items() if len(text) == top]
        expected += (q.answer in tied) / len(tied)
    assert expected / len(ALL) <= 1 / 3, f"{expected:.2f} of {len(ALL)}"


SHUFFLES = 20


def picks(q, order, choose):
    """The option a test-wise guesser picks: the first one shown among those of the chosen length."""
    length = choose(len(q.options[letter]) for letter in order)
    return next(letter for letter in order if len(q.options[letter]) == length)


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
@pytest.mark.parametrize("choose", [max, min], ids=["longest", "shortest"])
def test_always_picking_the_longest_or_the_shortest_option_scores_at_most_one(stage, choose):
    # Each stage is taken on its own, so a stage whose right options are all the longest is not hidden
    # by the others; each attempt shuffles the options as run_quiz does, which decides between equal lengths.
    questions = QUIZZES[stage.name]
    for seed in range(SHUFFLES):
        rng = random.Random(seed)
        right = sum(picks(q, quiz.shuffled(q, rng), choose) == q.answer for q in questions)
        assert right <= 1, (f"always picking the {'longest' if choose is max else 'shortest'} option scores "
                            f"{right}/3 on shuffle {seed}: make a right option neither, or another wrong one so")


COPIED_WORDS = 6  # a run of words this long, the same in an option and the README, is copied text


def words(text):
    """The words of a text, lower-cased: whitespace, punctuation and Markdown's backticks do not count."""
    return re.findall(r"\w+(?:['.]\w+)*", text.lower())


def copied_from(option, readme):
    """The runs of COPIED_WORDS or more words of an option that stand word for word in the README."""
    found, option_words, text = [], words(option), f" {' '.join(words(readme))} "
    for start in range(len(option_words) - COPIED_WORDS + 1):
        run = " ".join(option_words[start:start + COPIED_WORDS])
        if f" {run} " in text:
            found.append(run)
    return found


def test_copied_from_finds_a_sentence_of_the_readme_whatever_its_case_and_spacing():
    readme = "The budget is checked *between* turns.\nA call that never returns\n never ends its turn."
    assert copied_from("Because a call that   NEVER returns never ends", readme)
    assert copied_from("The budget is checked between `turns`", readme)
    assert not copied_from("A call that never returns is ended", readme + " A call that never")
    assert not copied_from("The budget is checked", readme)      # five words: a phrase, not a sentence


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_no_option_repeats_a_sentence_of_the_readme(stage):
    # An option the learner can match against the lesson's own words (or the output its Try-it
    # printed) asks for recognition, not understanding: say it in other words.
    readme = (stage / "README.md").read_text(encoding="utf-8")
    copied = [f"question {q.number} {letter}) {run!r}" for q in QUIZZES[stage.name]
              for letter, option in q.options.items() for run in copied_from(option, readme)]
    assert not copied, "options that repeat the README word for word:\n" + "\n".join(copied)


# --- every code reference resolves ------------------------------------------------------------

NOT_OURS = {  # fields of the chat-completions format, an environment variable, the standard library,
    # and the function the model writes in m6's story (tests/test_m6_verify.py): nothing to look up here
    "finish_reason", "tool_calls", "tool_call_id", "prompt_tokens", "cached_tokens", "image_url",
    "TINYHARNESS_BASE_URL", "os.killpg", "calendar.isleap", "subprocess.run", "Path.resolve", "is_leap_year"}
SUBCOMMANDS = {"run", "demo", "fake-server", "course", "eval"}


@functools.cache   # the tests folder is parsed once, not once per stage
def defined_names(folder):
    """Every function, class, assigned name and dict key string in the .py files under folder."""
    names = set()
    for path in Path(folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


def stage_texts(name):
    """(text, where) pairs: the question, its options, its explanation and its confirming command."""
    for q in QUIZZES[name]:
        yield q.text, f"question {q.number}"
        yield from ((text, f"question {q.number} option") for text in q.options.values())
        yield q.explanation, f"question {q.number} explanation"
    yield (ROOT / name / "QUIZ.md").read_text(encoding="utf-8"), "QUIZ.md"


def commands(name):
    """Every command a learner is told to run: the confirm lines and backticked commands."""
    for q in QUIZZES[name]:
        yield from q.confirm.splitlines()
    for text, _ in stage_texts(name):
        yield from (c for c in re.findall(r"`([^`]+)`", text)
                    if c.startswith(("python -m ", "tinyharness ", "pytest ")))


def command_problem(line, stage):
    """Why one line of a command does not resolve in this repository, or None."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    parts, words = [], []
    for token in lexer:  # split at ; && | & outside quotes
        if set(token) <= set(";&|"):
            parts, words = parts + [words], []
        else:
            words.append(token)
    for words in parts + [words]:
        if words[:3] == ["python", "-m", "pytest"]:
            for arg in (w for w in words[3:] if w.startswith("tests/")):
                path, _, test = arg.partition("::")
                if not (ROOT / path).is_file():
                    return f"{path} does not exist"
                function, _, params = test.partition("[")
                if function and f"def {function}(" not in (ROOT / path).read_text(encoding="utf-8"):
                    return f"{function} is not in {path}"
                if params and not any(params.startswith(s.name) for s in STAGES):
                    return f"{params} does not start with a stage name"
        elif words[:2] == ["python", "-m"]:
            module = words[2].replace(".", "/")
            target = ROOT / module
            if not ((target / "__main__.py").is_file() or target.with_suffix(".py").is_file()):
                return f"no module {words[2]}"
            source = (target / "__main__.py" if target.is_dir() else target.with_suffix(".py")).read_text()
            missing = [w for w in words[3:] if w.startswith("--") and f'"{w}"' not in source]
            if missing:
                return f"{words[2]} has no {missing}"
        elif words[:1] == ["tinyharness"]:
            if words[1] not in SUBCOMMANDS:
                return f"no subcommand {words[1]}"
            cli = "".join((ROOT / "tinyharness" / name).read_text() for name in ("cli.py", "parsers.py", "flags.py"))
            missing = [w for w in words[2:] if w.startswith("--") and f'"{w}"' not in cli]
            if missing:
                return f"tinyharness {words[1]} has no {missing}"
            if "--script" in words and not (ROOT / words[words.index("--script") + 1]).is_file():
                return f"no script {words[words.index('--script') + 1]}"
    return None


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_every_code_reference_resolves(stage):
    names = defined_names(stage) | defined_names(ROOT / "tests") | NOT_OURS
    problems = []
    for text, where in stage_texts(stage.name):
        for file, name in code_references(text):
            if not (resolve_reference(stage, file, name) or resolve_reference(ROOT, file, name)):
                problems.append(f"{where}: `{file}:{name}`")
        for token in re.findall(r"`([^`\s]+)`", text):
            if re.fullmatch(r"[\w./-]+\.(py|json|md)", token):
                scenario = any(token in q.text for q in QUIZZES[stage.name])  # a file the story's model writes
                if not ((stage / token).exists() or (ROOT / token).exists() or scenario):
                    problems.append(f"{where}: no file `{token}`")
            elif re.fullmatch(r"[A-Za-z_][\w.]*(\(.*\))?", token) and ("_" in token or "(" in token):
                name = token.split("(")[0]
                if name.split(".")[-1] not in names and name not in names:
                    problems.append(f"{where}: `{token}` is not defined in {stage.name} or the tests")
    for line in commands(stage.name):
        if problem := command_problem(line, stage):
            problems.append(f"command {line!r}: {problem}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_a_confirm_block_waits_for_its_server_and_starts_from_a_fresh_folder(stage):
    # Pasted as it is, the run's first request raced the server started with `&` one line above and
    # lost ("Could not connect"); a folder left by the last attempt changes what the run does.
    for q in QUIZZES[stage.name]:
        lines = q.confirm.splitlines()
        for line, following in zip(lines, lines[1:]):
            if line.rstrip().endswith("&"):
                assert following.startswith("sleep "), f"question {q.number}: nothing waits for `{line}`"
        for folder in re.findall(r"mkdir -p (\S+)", q.confirm):
            assert f"rm -rf {folder}" in q.confirm, f"question {q.number}: {folder} may hold the last attempt"


def test_command_check_catches_a_typo():
    assert command_problem("python -m m0_llm --base-urll x hi", STAGES[0]) is not None
    assert command_problem("tinyharness fake-server --script examples/missing.json", STAGES[0])
    assert command_problem("python -m pytest -q tests/test_m4_guards.py::test_nope", STAGES[0])
    assert command_problem("python -m m0_llm --base-url http://127.0.0.1:9/v1 \"hi\"; echo $?", STAGES[0]) is None


# --- the parser and the key -------------------------------------------------------------------

def question(n, options="ABCD"):
    lines = [f"## {n}. Question number {n}?", ""]
    lines += [f"- {letter}) option {letter}{n}" for letter in options]
    return "\n".join(lines + [""])


def sample(*questions):
    return "# Quiz: m1_fake\n\nAn intro paragraph.\n\n" + "\n".join(
        questions or [question(1), question(2), question(3)])


def key(*answers, confirm=""):
    return {"stage": "m1_fake", "questions": [
        {"answer": a, "explanation": f"Because {a}: see `loop.py:run`.", "misconceptions": {}, "confirm": confirm}
        for a in answers]}


def test_parse_a_good_quiz():
    text = sample(question(1), question(2, "ABC"), question(3, "ABCDE")) + "\n<details>\n## 9. not read\n"
    questions = parse_quiz(text)
    assert [q.number for q in questions] == [1, 2, 3]
    assert questions[0].text == "Question number 1?"
    assert questions[0].options == {"A": "option A1", "B": "option B1", "C": "option C1", "D": "option D1"}
    assert questions[0].answer == ""  # the answers are in the key


def test_parse_rejects_an_answer_in_quiz_md():
    with pytest.raises(QuizFormatError, match="question 2: answers and explanations go in the key"):
        parse_quiz(sample(question(1), question(2) + "\nAnswer: B\n", question(3)))


def test_parse_rejects_two_questions():
    with pytest.raises(QuizFormatError, match="expected 3 questions.*found 2"):
        parse_quiz(sample(question(1), question(2)))


@pytest.mark.parametrize("options", ["ABD", "BCD", "AB", "ABCDEF"])
def test_parse_rejects_bad_option_letters(options):
    with pytest.raises(QuizFormatError, match="question 3: needs 3-5 options"):
        parse_quiz(sample(question(1), question(2), question(3, options)))


def test_parse_rejects_a_missing_title_and_bad_numbering():
    with pytest.raises(QuizFormatError, match="# Quiz:"):
        parse_quiz(sample().replace("# Quiz: m1_fake", "Quiz"))
    with pytest.raises(QuizFormatError, match="question 2 is numbered 5"):
        parse_quiz(sample(question(1), question(5), question(3)))


def test_code_references():
    text = "See `loop.py:run_tool_calls`, `llm.py:Client.chat` and `evals/tasks.py:TASKS`; not `x` or `a.py`."
    assert code_references(text) == [("loop.py", "run_tool_calls"), ("llm.py", "Client.chat"),
                                     ("evals/tasks.py", "TASKS")]


def test_resolve_reference(tmp_path):
    (tmp_path / "loop.py").write_text(
        "MAX_TURNS = 8\nlimit: int = 3\n\ndef run():\n    inner = 1\n\n"
        "class Client:\n    model: str = 'x'\n    def chat(self):\n        pass\n", encoding="utf-8")
    for name in ["run", "MAX_TURNS", "limit", "Client", "Client.chat", "Client.model"]:
        assert resolve_reference(tmp_path, "loop.py", name), name
    for name in ["missing", "Client.missing", "run.inner", "MAX_TURNS.x"]:
        assert not resolve_reference(tmp_path, "loop.py", name), name
    assert not resolve_reference(tmp_path, "nofile.py", "run")


def test_find_stage_accepts_short_and_long_names(tmp_path):
    for name in ["m1_loop", "m0_llm", "m10_notastage"]:
        (tmp_path / name).mkdir()
    (tmp_path / "m2_file").write_text("")
    assert [s.name for s in list_stages(tmp_path)] == ["m0_llm", "m1_loop"]
    assert find_stage("m1", tmp_path).name == "m1_loop"
    assert find_stage("m1_loop/", tmp_path).name == "m1_loop"
    with pytest.raises(UnknownStage, match="unknown stage 'm7'; valid stages: m0_llm, m1_loop"):
        find_stage("m7", tmp_path)


# --- run_quiz and take_quiz -------------------------------------------------------------------

@pytest.fixture
def stage(tmp_path):
    folder = tmp_path / "m1_fake"
    folder.mkdir()
    (folder / "QUIZ.md").write_text(sample(), encoding="utf-8")
    keys = tmp_path / "quizzes" / "keys"
    keys.mkdir(parents=True)
    (keys / "m1_fake.json").write_text(json.dumps(key("B", "A", "C", confirm="tinyharness demo")))
    return folder


class Learner:
    """An input() that answers by the text of an option (found on screen, whatever its letter now),
    then hits end of input. Records what was printed."""

    def __init__(self, *wanted):
        self.wanted, self.printed, self.prompts = list(wanted), [], []

    def output(self, text=""):
        self.printed.append(text)

    def input(self, prompt):
        self.prompts.append(prompt)
        if not self.wanted:
            raise EOFError
        wanted = self.wanted.pop(0)
        if isinstance(wanted, BaseException):
            raise wanted
        shown = [line.strip() for line in self.printed if re.match(r"\s+[A-E]\) ", line)][-4:]
        return next((line[0] for line in shown if line[3:] == wanted), wanted)

    @property
    def text(self):
        return "\n".join(self.printed)


def take(stage, learner, **options):
    return run_quiz(stage, input=learner.input, output=learner.output, **options)


def test_run_quiz_scores_explains_and_saves(stage, progress):
    learner = Learner("option B1", "option A2", "option D3")
    assert take(stage, learner) == (2, 3)
    assert learner.text.count("Right.") == 2
    assert re.search(r"Wrong: the answer is [A-D]\) option C3", learner.text)
    assert "Explanation: Because B: see `loop.py:run`." in learner.text
    assert learner.text.count("See for yourself, from the repository's folder:\n    tinyharness demo") == 3
    assert "Why not" not in learner.text                    # the sample key names no misconception
    assert "Score: 2/3" in learner.text
    saved = json.loads(progress.read_text())["m1_fake"]
    assert (saved["best"], saved["total"], saved["last_score"]) == (2, 3, 2)


def test_a_wrong_answer_shows_the_misconception_behind_it(stage):
    entries = key("B", "A", "C")
    entries["questions"][0]["misconceptions"] = {"D": "You thought D; in fact B."}
    (stage.parent / "quizzes" / "keys" / "m1_fake.json").write_text(json.dumps(entries))
    learner = Learner("option D1", "option A2", "option A3")
    take(stage, learner)
    assert re.search(r"Why not [A-D]\): You thought D; in fact B\.", learner.text)
    assert learner.text.count("Why not") == 1


def test_each_option_is_shown_on_its_own_line_as_letter_and_text(stage):
    learner = Learner()
    take(stage, learner, rng=random.Random(1))
    shown = [line for line in learner.printed if re.fullmatch(r"   [A-D]\) option [A-D]1", line)]
    assert [line[3] for line in shown] == list("ABCD")
    assert sorted(line[-2] for line in shown) == list("ABCD")


def test_the_options_are_shuffled_on_every_attempt(stage):
    orders = set()
    for seed in range(12):
        learner = Learner("option B1", "option A2", "option C3")
        assert take(stage, learner, rng=random.Random(seed)) == (3, 3)  # answers map back, whatever the order
        orders.add(tuple(line[-2] for line in learner.printed if re.fullmatch(r"   [A-D]\) option [A-D]1", line)))
    assert len(orders) > 3
    assert len({order.index("B") for order in orders}) > 1  # the right letter moves


def test_run_quiz_asks_again_on_invalid_input(stage):
    learner = Learner("", "x", "7", "option B1", "option A2", "option C3")
    assert take(stage, learner) == (3, 3)
    assert len(learner.prompts) == 6
    assert learner.printed.count("Please type one of A, B, C, D.") == 3


def test_end_of_input_stops_without_saving(stage, progress):
    learner = Learner("option B1")
    result = take(stage, learner)
    assert result == (1, 3) and not result.finished
    assert "Quiz not finished: stopped after 1 of 3 questions; nothing saved." in learner.text
    assert not progress.exists()


def test_exit_codes_finished_stopped_and_interrupted(stage, progress, capsys):
    def exit_code(*answers):
        learner = Learner(*answers)
        return take_quiz(str(stage.name), root=stage.parent, input=learner.input, output=learner.output)
    assert exit_code("option B1") == 1                     # end of input: not finished
    assert exit_code("option B1", KeyboardInterrupt()) == 130
    assert not progress.exists()                           # neither is recorded
    assert exit_code("option A1", "option A2", "option A3") == 0   # finished, 1/3: the score is recorded
    assert quiz.load_progress()["m1_fake"]["best"] == 1
    assert exit_code("m9") == 1 and "m1_fake has no" not in capsys.readouterr().err


def test_run_quiz_by_name_keeps_the_best_score(stage, progress):
    take("m1", Learner("option B1", "option A2", "option C3"), root=stage.parent)
    take("m1_fake", Learner("option A1", "option A2", "option C3"), root=stage.parent)
    saved = quiz.load_progress()["m1_fake"]
    assert (saved["best"], saved["last_score"]) == (3, 2)


def test_run_quiz_errors_are_messages(stage):
    with pytest.raises(QuizError, match="has no QUIZ.md"):
        run_quiz(stage / "nothing", input=Learner().input)
    (stage.parent / "quizzes" / "keys" / "m1_fake.json").write_text(json.dumps(key("B", "E", "C")))
    with pytest.raises(QuizFormatError, match="m1_fake.json: key of question 2: answer 'E' is not one of"):
        run_quiz(stage, input=Learner().input)
    (stage.parent / "quizzes" / "keys" / "m1_fake.json").unlink()
    with pytest.raises(QuizError, match="has no answer key"):
        run_quiz(stage, input=Learner().input)
    (stage / "QUIZ.md").write_text(sample(question(1)), encoding="utf-8")
    with pytest.raises(QuizFormatError, match="m1_fake/QUIZ.md: expected 3 questions"):
        run_quiz(stage, input=Learner().input)


def test_record_score_and_main_listing(progress, capsys, monkeypatch):
    record_score("m0_llm", 3, 3)
    from quizzes.__main__ import main
    monkeypatch.setattr(quiz, "ROOT", progress.parent)
    (progress.parent / "m0_llm").mkdir()
    (progress.parent / "m1_loop").mkdir()
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "m0_llm   quiz 3/3 passed" in out and "m1_loop  quiz not taken" in out
    assert main(["m9"]) == 2
    assert "error: unknown stage 'm9'" in capsys.readouterr().err


def test_recording_a_score_keeps_the_rest_of_the_file(progress):
    progress.write_text(json.dumps({"exercises": {"m3_hooks": "2026-01-02"}, "m0_llm": {"best": 2, "total": 3}}))
    record_score("m0_llm", 1, 3)
    data = json.loads(progress.read_text())
    assert data["exercises"] == {"m3_hooks": "2026-01-02"}
    assert (data["m0_llm"]["best"], data["m0_llm"]["last_score"]) == (2, 1)


def test_a_hand_edited_progress_file_is_read_safely(progress):
    progress.write_text(json.dumps({"m0_llm": "3/3", "m1_loop": {"best": 3, "total": 3}, "m2": {"best": "x"}}))
    assert quiz.load_progress() == {"m1_loop": {"best": 3, "total": 3}}
    assert quiz.passed(quiz.load_progress()["m1_loop"]) and not quiz.passed(None)


# --- two halves: the predictions before the Try-it, the rest after it ----------------------------

def predictions_at(stage, *numbers):
    """The sample quiz with the questions of these numbers turned into 'Predict: ...' questions."""
    text = sample()
    for n in numbers:
        text = text.replace(f"## {n}. Question number {n}?", f"## {n}. Predict: number {n}?")
    (stage / "QUIZ.md").write_text(text, encoding="utf-8")


def test_the_predictions_come_before_the_try_it_and_the_rest_after(stage, progress):
    predictions_at(stage, 1, 3)                       # the key: B, A, C
    before = Learner("option B1", "option A3")
    result = take(stage, before, before=True)
    assert result == (1, 2) and result.finished
    assert "1. Predict: number 1?" in before.text and "3. Predict: number 3?" in before.text
    assert "Question number 2" not in before.text      # not a prediction: it waits for the Try-it
    assert "without --before" in before.text            # says how to take the rest
    assert "m1_fake" not in quiz.load_progress()        # no score yet: two of three asked
    after = Learner("option A2")
    assert take(stage, after) == (2, 3)                 # B1 right, A3 wrong, A2 right
    assert "Question number 2" in after.text and "Predict" not in after.text
    assert "Score: 2/3" in after.text
    saved = quiz.load_progress()["m1_fake"]
    assert (saved["best"], saved["total"]) == (2, 3)
    assert quiz.BEFORE not in json.loads(progress.read_text())   # the kept half is used up
    again = Learner()                                   # the halves were used up: all three again
    take(stage, again)
    assert "1. Predict: number 1?" in again.text


def test_a_before_half_stopped_midway_keeps_nothing(stage, progress):
    predictions_at(stage, 1, 3)
    result = take(stage, Learner("option B1"), before=True)
    assert result == (1, 2) and not result.finished
    assert not progress.exists()
    whole = Learner()
    take(stage, whole)
    assert "1. Predict: number 1?" in whole.text        # nothing was kept, so nothing is skipped


def test_a_quiz_of_predictions_only_is_whole_before_the_try_it(stage, progress):
    predictions_at(stage, 1, 2, 3)
    assert take(stage, Learner("option B1", "option A2", "option C3"), before=True) == (3, 3)
    assert quiz.passed(quiz.load_progress()["m1_fake"])


@pytest.mark.parametrize("command", [["course", "quiz", "m2", "--before"], ["m2", "--before"]],
                         ids=["tinyharness", "python -m quizzes"])
def test_both_command_lines_take_the_before_half(command, monkeypatch, capsys):
    # m2's first question is a judgement, its second a prediction: --before starts at the second
    assert not QUIZZES["m2_tools"][0].text.startswith("Predict")
    assert QUIZZES["m2_tools"][1].text.startswith("Predict")
    monkeypatch.setattr("builtins.input", lambda prompt="": (_ for _ in ()).throw(EOFError))
    if command[0] == "course":
        from tinyharness.cli import main
    else:
        from quizzes.__main__ import main
    assert main(command) == 1                           # stopped at the first question: not finished
    out = capsys.readouterr().out
    assert "\n2. Predict:" in out and "\n1. " not in out


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_the_readme_asks_for_the_predictions_before_the_try_it(stage):
    # A prediction made after the Try-it printed its answer is a memory test: the README says, at the
    # top of "Try it", to take the quiz's first half now.
    text = (stage / "README.md").read_text(encoding="utf-8")
    assert "\n## Try it\n" in text, f"{stage.name}/README.md has no '## Try it' section"
    top = text.split("\n## Try it\n", 1)[1].split("<!-- try-it -->", 1)[0]
    assert f"`tinyharness course quiz {stage.name.split('_')[0]} --before`" in top
