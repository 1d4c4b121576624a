"""m5's picture: prompt tokens per model call of the 40-turn task, as a committed SVG that a test
regenerates byte for byte (benchmarks/context.py --svg, drawn by benchmarks/svgchart.py)."""
import xml.etree.ElementTree as ET

from benchmarks import context, svgchart
from tests.ladder import ROOT

PICTURE = ROOT / "docs" / "m5-context.svg"
SVG = "{http://www.w3.org/2000/svg}"


def test_the_committed_picture_is_what_the_benchmark_draws(tmp_path, capsys):
    drawn = tmp_path / "context.svg"
    assert context.main(["--svg", str(drawn)]) == 0
    assert f"wrote {drawn}" in capsys.readouterr().out
    assert drawn.read_bytes() == PICTURE.read_bytes(), (
        "docs/m5-context.svg is out of date: python -m benchmarks.context --svg docs/m5-context.svg")


def test_the_picture_has_three_runs_of_forty_calls_the_window_and_a_legend():
    svg = ET.fromstring(PICTURE.read_text(encoding="utf-8"))
    lines = svg.findall(f"{SVG}polyline")
    assert len(lines) == 3 and all(len(line.get("points").split()) == 40 for line in lines)
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    for label in ("no scissors", "sliding, the stages", "batch+cap, tinyharness"):
        assert any(t.startswith(label + ": ") for t in texts), label
    assert "window 8,192" in texts and "model call" in texts and "prompt tokens sent" in texts
    # the staircase climbs past the window; the scissors' lines stay under it
    window_y = float(next(line.get("y1") for line in svg.findall(f"{SVG}line") if line.get("stroke-dasharray")))
    lowest = [min(float(p.split(",")[1]) for p in line.get("points").split()) for line in lines]
    assert lowest[0] < window_y < min(lowest[1:])  # SVG's y grows downwards


def test_the_cost_page_and_the_notes_show_it_and_the_readme_links_the_page():
    assert "](m5-context.svg)" in (ROOT / "docs" / "m5-scissors-cost.md").read_text(encoding="utf-8")
    assert "](../docs/m5-scissors-cost.md)" in (ROOT / "m5_context" / "README.md").read_text(encoding="utf-8")
    assert "](docs/m5-context.svg)" in (ROOT / "NOTES.md").read_text(encoding="utf-8")


def test_a_chart_is_the_same_bytes_every_time_and_escapes_its_text():
    series = [svgchart.Series("a < b & c", [1, 2.5, 3], "#000000"), svgchart.Series("d", [0, 0, 1e-9], "red")]
    first = svgchart.line_chart(series, "t \"quoted\"", "x", "y", (svgchart.Line(2, "two"),))
    assert first == svgchart.line_chart(series, "t \"quoted\"", "x", "y", (svgchart.Line(2, "two"),))
    ET.fromstring(first)                                        # well-formed, whatever the labels hold
    assert "a &lt; b &amp; c" in first and "-0.0" not in first


def test_nice_steps():
    assert [svgchart.nice_step(span) for span in (30000, 27315, 40, 7, 1)] == [5000, 5000, 10, 2, 0.2]


def test_an_unwritable_picture_path_is_an_error_without_a_traceback(tmp_path, capsys):
    assert context.main(["--svg", str(tmp_path / "missing" / "context.svg")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write ") and "Traceback" not in err
