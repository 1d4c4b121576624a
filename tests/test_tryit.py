"""Every marked "Try it" block of every stage README runs verbatim and prints what the README quotes
next to it (benchmarks/tryit.py: bash, a fresh HOME, started outside the repository, against the
scripted server the block starts itself)."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks import tryit

BLOCKS = tryit.all_blocks()
OUTPUTS = {}


def output_of(block, tmp_path):
    """The block's output. The first call runs every block, four at a time, each on free ports and in
    a fresh HOME of its own: most of a block's time is waiting for the server it starts."""
    if not OUTPUTS:
        homes = [tmp_path / f"block-{i}" for i in range(len(BLOCKS))]
        with ThreadPoolExecutor(max_workers=4) as pool:
            done = pool.map(lambda pair: tryit.run_block(pair[0], pair[1], own_ports=True).stdout,
                            zip(BLOCKS, homes))
            OUTPUTS.update(zip((b.name for b in BLOCKS), done))
    if block.name not in OUTPUTS:  # a block made up by a test
        OUTPUTS[block.name] = tryit.run_block(block, tmp_path).stdout
    return OUTPUTS[block.name]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_try_it_block_runs_and_shows_what_the_readme_quotes(block, tmp_path):
    output = output_of(block, tmp_path)
    wrong = tryit.problems(block, output)
    assert not wrong, "\n".join(wrong) + "\n--- output ---\n" + output


# COURSE.md, stage rule 8 ("Show, then explain"): a stage's first Try-it plays the failure that
# motivates the stage, then the mechanism holding, both on the learner's first screen (the first 40
# lines of output). Each pair is (what only the failure prints, what only the hold prints).
FIRST_SCREEN = 40
SHOWN = {
    "m1_loop": [('tool_call_id "call_0" matches none', "[stats] turns=5 tool_calls=4")],
    "m3_hooks": [("-> OK: ../m3-old has 1 entry", "-> BLOCKED: '../m3-old' leads to"),
                 ("-> exit status 127", "-> BLOCKED: the command looks like a recursive delete (Remove-Item"),
                 ("-> BLOCKED: the command looks like a recursive delete (rm -r)", "x=rm; $x -rf ../m3-old")],
    "m5_context": [("[context] prompt_tokens fell from", "m5-scissors/summary.md:Testing budget: 300 KM"),
                   ("m5-no-scissors/summary.md:Testing budget: not mentioned", "300 KM for the quarter (week-1.md); Ana signs off above it.")],
    "m8_vision": [("warning: the request with the image cost", "prompt_tokens=1108"),
                  ("[tool] view_image({\"path\": \"blue-red.png\"})", "'tool', 'user', 'assistant']")],
}


@pytest.mark.parametrize("stage", sorted(SHOWN))
def test_the_first_try_it_shows_the_failure_then_the_hold_on_one_screen(stage, tmp_path):
    block = next(b for b in BLOCKS if b.readme.parent.name == stage)
    screen = "\n".join(output_of(block, tmp_path).splitlines()[:FIRST_SCREEN])
    for failure, hold in SHOWN[stage]:
        assert failure in screen and hold in screen, f"{failure!r} then {hold!r}\n--- first screen ---\n{screen}"
        assert screen.index(failure) < screen.index(hold), f"{failure!r} comes after {hold!r}\n{screen}"


@pytest.mark.parametrize("stage", sorted(r.parent.name for r in tryit.readmes()))
def test_every_stage_has_a_try_it_block_that_runs_offline(stage):
    assert any(b.readme.parent.name == stage for b in BLOCKS)


def test_a_quoted_figure_changed_by_one_is_caught(tmp_path):
    block = next(b for b in BLOCKS if any("prompt_tokens=" in span for span in b.expected))
    output = output_of(block, tmp_path)
    assert not tryit.problems(block, output)
    span = next(s for s in block.expected if "prompt_tokens=" in s)
    number = span.split("prompt_tokens=")[1].split()[0]
    changed = span.replace(f"prompt_tokens={number}", f"prompt_tokens={int(number) + 1}")
    block.expected[block.expected.index(span)] = changed
    try:
        assert tryit.problems(block, output) == [f"the README quotes `{changed}`, the output does not have it"]
    finally:
        block.expected[block.expected.index(changed)] = span


def test_fix_rewrites_a_quoted_key_value_from_the_output():
    text = "You should see `turns=5 prompt_tokens=3091` and `exit code 0`."
    output = "[stats] turns=5 tool_calls=4 prompt_tokens=3090 completion_tokens=85\nexit code 0\n"
    assert tryit.fixed_paragraph(text, output) == "You should see `turns=5 prompt_tokens=3090` and `exit code 0`."
    two_runs = output + "[stats] turns=5 tool_calls=4 prompt_tokens=3122\n"
    assert tryit.fixed_paragraph(text, two_runs) == text.replace("3091", "3091")   # ambiguous: left alone


def test_a_block_that_needs_the_repository_folder_fails(tmp_path):
    block = tryit.Block(tryit.ROOT / "m1_loop/README.md", 1, "cat examples/notes.script.json\n",
                        ["list_dir"], (0, 0))
    output = tryit.run_block(block, tmp_path).stdout
    assert tryit.problems(block, output) == ["the README quotes `list_dir`, the output does not have it"]
