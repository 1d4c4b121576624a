"""Each quiz's "Predict" question ends with a command that confirms the key's answer. Run every such
command as a learner would paste it (bash, a fresh HOME, from the repository's folder, against the
scripted server the command starts itself) and check that its output shows the key's answer.

Only two things are changed in a command: the scripted server's fixed port becomes a free one (so
the commands can run side by side), and its /tmp/ folders move into the test's own folder. A command
that runs one of the suite's own tests (`python -m pytest tests/...`) is left to the suite.
"""
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks import tryit
from quizzes.quiz import list_stages, load_quiz
from tests.ladder import ROOT

QUIZ_PORT = "8765"  # the port every confirm command's scripted server listens on

# (stage, question): what the output must hold for the key's answer to be what really happens
EVIDENCE = {
    ("m0_llm", 3): ["Could not connect to the model server at http://127.0.0.1:9/v1", "`ollama serve`", "exit 1"],
    ("m1_loop", 1): ["Stopped: reached --max-turns 3. The task is NOT confirmed complete.", "exit 3"],
    ("m1_loop", 3): ["error: KeyError: 'shell'", "I created it and saved the note", "exit 0"],
    ("m2_tools", 2): ["m1: ''", "m2: 'OK: empty.txt is empty (0 characters)'"],
    ("m2_tools", 3): ["ERROR: timed out after 2 s", "The loop never ended", "exit 0"],
    ("m5_context", 1): ['tool [cut by the harness: read_file("meeting-2026-11-02.md") returned 291 characters',
                        'assistant  {"text": "Testing budget: 300 KM (meeting-2026-11-02.md, 2 Nov)."}',
                        "\nTesting budget: 300 KM (meeting-2026-11-02.md, 2 Nov).\n"],
    ("m6_verify", 2): ["OK: wrote 52 characters to area.py\n\n[harness] area.py was written, but Python cannot "
                       "compile it:", 'File "area.py", line 2'],
    ("m7_eval", 2): ["| model | passed | pass rate | easy | hard |", "| competent | 10/10 | 100% | 5/5 | 5/5 |",
                     "| clumsy | 5/10 | 50% | 4/5 | 1/5 |"],
    ("m7_eval", 3): ["clumsy hook/hard #1: FAIL - changes.md was not written  (claimed success)"],
    ("m8_vision", 1): ["about what its text alone costs", "The image probably never reached the model"],
}


def confirms():
    """(stage, question number, command) of every confirm command that is not a run of the suite."""
    return [(stage.name, q.number, q.confirm) for stage in list_stages(ROOT) for q in load_quiz(stage)
            if q.confirm and "pytest" not in q.confirm]


CONFIRMS = confirms()
OUTPUTS = {}


def run(confirm, home):
    """The command's output: run from the repository's folder, on a free port, /tmp/ moved into home."""
    stage, number, command = confirm
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    code = f"cd {shlex.quote(str(ROOT))}\n" + command.replace("/tmp/", f"{home}/tmp/")
    code = code.replace(QUIZ_PORT, str(tryit.free_ports(1)[0]))
    block = tryit.Block(ROOT / stage / "QUIZ.md", number, code, [], (0, 0))
    return tryit.run_block(block, home).stdout


def output_of(confirm, request):
    """The first call runs the commands of every selected test, four at a time (most of their time is
    waiting on a server); a later call finds its output ready."""
    if confirm[:2] not in OUTPUTS:
        wanted = {confirm[:2]} | {(item.callspec.params["stage"], item.callspec.params["number"])
                                  for item in request.session.items
                                  if "stage" in getattr(getattr(item, "callspec", None), "params", {})
                                  and item.path.name == Path(__file__).name}
        todo = [c for c in CONFIRMS if c[:2] in wanted and c[:2] not in OUTPUTS]
        homes = [request.getfixturevalue("tmp_path_factory").mktemp("confirm") for _ in todo]
        with ThreadPoolExecutor(max_workers=4) as pool:
            OUTPUTS.update(zip([c[:2] for c in todo], pool.map(run, todo, homes)))
    return OUTPUTS[confirm[:2]]


@pytest.mark.parametrize("stage, number", [c[:2] for c in CONFIRMS])   # the stage apart: --stage selects it
def test_a_confirm_command_shows_the_answer_of_the_key(stage, number, request):
    confirm = next(c for c in CONFIRMS if c[:2] == (stage, number))
    assert confirm[:2] in EVIDENCE, f"{stage} question {number}: say in EVIDENCE what its command shows"
    output = output_of(confirm, request)
    wrong = [f"the output shows {sign!r}" for sign in tryit.FAILURE_SIGNS if sign in output]
    wrong += [f"the output lacks {text!r}" for text in EVIDENCE[confirm[:2]] if text not in output]
    assert not wrong, "\n".join(wrong) + "\n--- output ---\n" + output


def test_the_m1_run_that_claims_success_leaves_no_scratch_folder(request):
    confirm = next(c for c in CONFIRMS if c[:2] == ("m1_loop", 3))
    output = output_of(confirm, request)
    assert output.rstrip().endswith("exit 0"), output   # the `ls` after it listed nothing


def test_the_m1_run_stopped_by_its_turn_budget_leaves_no_budget_file(request):
    confirm = next(c for c in CONFIRMS if c[:2] == ("m1_loop", 1))
    output = output_of(confirm, request)
    assert "write_file" not in output and "budget.md" not in output.split("exit 3")[-1], output   # `ls` lists no budget.md


def test_every_confirm_command_has_its_evidence():
    assert set(EVIDENCE) == {c[:2] for c in CONFIRMS}
