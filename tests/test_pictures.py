"""The course's pictures (COURSE.md, stage rule 6): the loop and the message list (m1), stubs (m5),
the image relay (m8). Each is a committed SVG that `python -m benchmarks.pictures` draws; a test
regenerates it and compares the bytes, and each stage README shows its own."""
import xml.etree.ElementTree as ET

import pytest

from benchmarks import pictures
from tests.ladder import ROOT

SVG = "{http://www.w3.org/2000/svg}"
SHOWN_BY = {"m1-loop.svg": "m1_loop", "m1-messages.svg": "m1_loop", "m5-stubs.svg": "m5_context",
            "m8-relay.svg": "m8_vision"}


def texts(name):
    return [t.text for t in ET.fromstring((ROOT / "docs" / name).read_text(encoding="utf-8")).iter(f"{SVG}text")]


@pytest.mark.parametrize("name", sorted(pictures.PICTURES))
def test_the_committed_picture_is_what_the_code_draws(name):
    drawn = pictures.PICTURES[name]()
    assert drawn == pictures.PICTURES[name](), "the same input must give the same bytes"
    assert drawn.encode("utf-8") == (ROOT / "docs" / name).read_bytes(), (
        f"docs/{name} is out of date: python -m benchmarks.pictures")


def test_every_committed_picture_is_drawn_by_a_command_a_test_reruns():
    # the four diagrams here, and the m5 measurement that tests/test_context_picture.py regenerates
    assert sorted(p.name for p in (ROOT / "docs").glob("*.svg")) == sorted([*pictures.PICTURES, "m5-context.svg"])


@pytest.mark.parametrize("name", sorted(pictures.PICTURES))
def test_each_stage_readme_shows_its_picture(name):
    assert f"](../docs/{name})" in (ROOT / SHOWN_BY[name] / "README.md").read_text(encoding="utf-8")


def test_main_writes_every_picture_and_an_unwritable_folder_is_one_line(tmp_path, capsys):
    assert pictures.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(pictures.PICTURES)
    assert pictures.main(["--out", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write ") and "Traceback" not in err


def test_the_message_list_pairs_every_call_with_one_result_by_a_servers_id():
    messages = pictures.notes_conversation()
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results and len(set(calls)) == len(calls)
    assert not any(call_id.startswith("call_") and call_id[5:].isdigit() for call_id in calls)  # not the fallback
    shown = texts("m1-messages.svg")
    assert all(any(t.startswith(f"{call_id}: ") for t in shown) and any(t.startswith(f"{call_id} <- ") for t in shown)
               for call_id in calls)


def test_the_stubs_are_the_stages_own():
    from m5_context.context import STUB_PREFIX, sliding_scissors
    after = sliding_scissors(pictures.long_conversation())
    stubbed = [m["content"] for m in after if m.get("content", "").startswith(STUB_PREFIX)]
    assert len(stubbed) == 3
    shown = " ".join(texts("m5-stubs.svg"))
    assert all(stub.split(";")[0] in shown for stub in stubbed)


def test_the_relay_sends_the_picture_after_all_results():
    roles = [m["role"] for m in pictures.relay_messages()]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    assert pictures.relay_messages()[-1]["content"][-1]["type"] == "image_url"


def test_text_is_cut_to_its_box_and_escaped():
    assert pictures.fit("a" * 100, 10 * pictures.CHAR) == "aaaaaaa..."
    assert pictures.wrap("one two three four", 9 * pictures.CHAR, 2) == ["one two", "three ..."]
    svg = pictures.Svg(10, 10, "a < b & c")
    ET.fromstring(svg.text())
    assert "a &lt; b &amp; c" in svg.text()


def test_the_loop_picture_draws_the_calls_the_loop_makes():
    # m1's loop asks through edges.ask and runs each call through edges.run (the exercise needs both): a
    # picture that drew client.chat sent the learner to the wrong call
    import ast
    import re
    tree = ast.parse((ROOT / "m1_loop" / "loop.py").read_text(encoding="utf-8"))
    loop = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run_agent")
    code = "\n".join(ast.unparse(statement) for statement in loop.body[1:])  # the body, its docstring aside
    called = set(re.findall(r"\b(\w+\.\w+)\(", code))
    drawn = set(re.findall(r"\b(\w+\.\w+)\(", " ".join(texts("m1-loop.svg"))))
    assert {"edges.ask", "edges.run"} <= drawn and drawn <= called, f"drawn {sorted(drawn)}, called {sorted(called)}"
