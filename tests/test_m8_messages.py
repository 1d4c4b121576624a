"""m8's exercise functions, called directly on the stage's module: the message shapes a picture travels
in, the refusal the exercise asks for, and the arrival check. Parametrised with m8_vision, so
`tinyharness course check m8 --mine DIR` runs them on the learner's copy (tests/exercise_check.py makes
`m8_vision` import from there) in its first pass, before the end-to-end runs of tests/test_m8_vision.py.
"""
import importlib

import pytest

from tests.ladder import FINAL, stages_from

PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def vision(stage):
    return importlib.import_module("tinyharness.vision" if stage == FINAL else f"{stage}.vision")


@pytest.mark.parametrize("stage", stages_from("m8"))
def test_the_followup_message_refuses_lists_that_do_not_pair_up(stage):
    # The harness has a bug if the names and the pictures of a turn do not pair up: say so, never guess.
    for parts, names in (([], []), ([PART], []), ([], ["a.png"]), ([PART], ["a.png", "b.png"]),
                         ([PART, PART], ["a.png"])):
        with pytest.raises(ValueError):
            vision(stage).image_followup_message(parts, names)
    message = vision(stage).image_followup_message([PART, PART], ["a.png", "b.png"])
    texts = [part.get("text") for part in message["content"]]
    assert message["role"] == "user" and texts[0].startswith("[harness]") and "a.png, b.png" in texts[0]
    assert message["content"][1:] == [{"type": "text", "text": "a.png:"}, PART, {"type": "text", "text": "b.png:"}, PART]


@pytest.mark.parametrize("stage", stages_from("m8"))
def test_the_arrival_check_reads_the_bill(stage):
    # A picture costs tokens; a dropped one nothing. The text alone is the control.
    check = vision(stage).arrival_check
    assert check(1058, 800) is None and check(80 + 32, 80) is None        # paid for: it arrived
    dropped = check(89, 80)                                               # the article's 89 against 80
    assert dropped.startswith("warning:") and "89 prompt tokens" in dropped and "guess" in dropped
    assert check(80 + 31, 80) is not None and check(100, 100, min_image_tokens=0) is None
    assert "cannot tell" in check(0, 80) and "cannot tell" in check(None, 80)
