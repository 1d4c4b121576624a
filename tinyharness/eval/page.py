"""The eval's page: its results as bars, in one HTML file beside the JSON.

The problem. An eval of real models runs for an hour and ends in two Markdown tables of numbers.
Which model passes most, which one spends the most tokens or the most time for it, and on which
task each one fails, is a comparison the eye makes faster from bars than from columns of figures.

The mechanism. `render(report)` turns the report that `tinyharness eval --out FILE.json` writes
(eval.make_report) into one page, written beside it as FILE.html: the overall table with three bars
per model (and setting) - the pass rate, the mean tokens per run (prompt and completion stacked),
the mean seconds per run - then a grid of passes per task and tier, then every run with its
verdict and reason, folded. The bars are plain <div>s sized by CSS: the page has no script, its
styles are inline, and a Content-Security-Policy forbids loading anything, so it opens offline and
can be mailed as it is. Every piece of text is escaped with html.escape: model names, setting names
and reasons are input, and a model named `<script>` must show as text, never run.

What it cannot do. It shows the report, not the runs: no transcripts (keep the run folders with
`--keep` and open a transcript with `tinyharness view`). Token and seconds bars are scaled to the
largest value in their column, so they compare rows of one eval, not two evals; a run without a
`[stats]` line has no tokens and draws no bar.
"""
import html
import json
import sys
from pathlib import Path

from ..filedoor import write_text

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 \
auto;max-width:1100px;padding:16px;color:#1d1d1f;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 6px} \
.meta,.note{color:#666;font-size:12px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;width:100%}
th,td{padding:5px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:middle}
th{background:#f0f2f5;font-size:12px;color:#444} td.num{text-align:right;white-space:nowrap}
.name{font-family:ui-monospace,monospace;word-break:break-all}
.track{background:#eef0f3;border-radius:3px;height:14px;min-width:160px;display:flex;\
overflow:hidden}
.bar{height:14px} .pass{background:#3f8f57} .prompt{background:#4a7bd0} \
.completion{background:#9fbbe8}
.secs{background:#d08a2e} .label{font-size:12px;color:#333;margin-top:2px;white-space:nowrap}
.cell{text-align:center;font-weight:bold;border-radius:3px;padding:2px 6px}
.all{background:#d4eddb;color:#1e5a30} .some{background:#fbecc8;color:#6b4d07} \
.none{background:#f7d6d6;color:#7a1f1f}
.FAIL{color:#b03030;font-weight:bold} .PASS{color:#2f7a46;font-weight:bold} \
.flag{color:#b03030;font-size:12px}
details>summary{cursor:pointer;margin:22px 0 6px;font-size:16px;font-weight:bold}
"""


def esc(value):
    return html.escape(str(value), quote=True)


def number(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def share(value, largest):
    """A bar's width in percent of its column's largest value (0 for none)."""
    return 0 if not value or not largest else max(0.0, min(100.0, 100 * value / largest))


def bar(parts, label):
    """One track holding coloured segments [(css class, percent)], its figures written under it."""
    segments = ("".join(f'<div class="bar {cls}" '
                        f'style="width:{width:.1f}%"></div>' for cls, width in parts if width))
    return f'<div class="track">{segments}</div><div class="label">{esc(label)}</div>'


def tokens(row):
    """Mean prompt + completion tokens per run, as the label shows them (the sum of the rounded
    parts)."""
    prompt, completion = row.get("mean_prompt_tokens"), row.get("mean_completion_tokens")
    return (None if prompt is None and completion is None else round(prompt or 0)
            + round(completion or 0))


def overall_table(rows, who):
    """One row per model (and setting): passes, and bars for pass rate, tokens and seconds."""
    most_tokens = max((tokens(r) or 0 for r in rows), default=0)
    most_seconds = max((r.get("mean_seconds") or 0 for r in rows), default=0)
    head = "".join(f"<th>{esc(h)}</th>" for h in who
                   + ["pass rate", "easy", "hard", "tokens per run",
                                                         "seconds per run", "claimed but failed"])
    body = "".join(overall_row(r, who, most_tokens, most_seconds) for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def overall_row(r, who, most_tokens, most_seconds):
    total = tokens(r)
    token_label = "no token counts" if total is None else (
        f"{number(total)} ({number(r.get('mean_prompt_tokens'))} prompt + "
        f"{number(r.get('mean_completion_tokens'))} completion)")
    passes = (bar([("pass", 100 * r["pass_rate"])], f"{r['passes']}/{r['runs']} passed, "
                                                    f"{100 * r['pass_rate']:.0f}%"))
    spent = bar([("prompt", share(r.get("mean_prompt_tokens"), most_tokens)),
                 ("completion", share(r.get("mean_completion_tokens"), most_tokens))], token_label)
    took = bar([("secs", share(r.get("mean_seconds"), most_seconds))],
               f"{number(r.get('mean_seconds'), 1)} s ({number(r.get('total_seconds'), 1)} s in "
               "all)")
    cells = [f'<td class="name">{esc(r[k])}</td>' for k in who] + [
        f"<td>{passes}</td>", f'<td class="num">{esc(r.get("easy_passes", "-"))}</td>',
        f'<td class="num">{esc(r.get("hard_passes", "-"))}</td>', f"<td>{spent}</td>",
        f"<td>{took}</td>", f'<td class="num">{esc(r.get("claimed_but_failed", 0))}</td>']
    return "<tr>" + "".join(cells) + "</tr>"


def who_of(row, who):
    return " / ".join(str(row[k]) for k in who)


def task_grid(per_task, who):
    """Tasks and tiers down, models (and settings) across, each cell its passes: where each one
    fails."""
    columns = list(dict.fromkeys(who_of(r, who) for r in per_task))
    tasks = list(dict.fromkeys((r["task"], r["tier"]) for r in per_task))
    found = {(who_of(r, who), r["task"], r["tier"]): r for r in per_task}
    head = ("<th>task</th><th>tier</th>"
            + "".join(f'<th class="name">{esc(c)}</th>' for c in columns))
    rows = []
    for task, tier in tasks:
        cells = []
        for column in columns:
            r = found.get((column, task, tier))
            if r is None:
                cells.append("<td></td>")
                continue
            kind = "all" if r["passes"] == r["runs"] else ("none" if not r["passes"] else "some")
            cells.append(f'<td><div class="cell {kind}">{r["passes"]}/{r["runs"]}</div></td>')
        rows.append(f"<tr><td>{esc(task)}</td><td>{esc(tier)}</td>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def run_table(runs, who):
    """Every run, its verdict and the judge's reason: folded, it is long."""
    head = "".join(f"<th>{esc(h)}</th>" for h in ["#"] + who
                   + ["task", "tier", "repeat", "verdict", "seconds",
                                                                 "turns", "reason"])
    rows = []
    for n, r in enumerate(runs, 1):
        verdict = "PASS" if r.get("passed") else "FAIL"
        flag = ' <span class="flag">(claimed success)</span>' if r.get("claimed_but_failed") else ""
        cells = [f'<td class="num">{n}</td>'] + [
            f'<td class="name">{esc(r.get(k))}</td>' for k in who] + [
            (f"<td>{esc(r.get('task'))}</td><td>{esc(r.get('tier'))}</td><td "
             f"class=\"num\">{esc(r.get('repeat'))}</td>"),
            (f'<td class="{verdict}">{verdict}</td><td '
             f'class="num">{number(r.get("seconds"), 1)}</td>'),
            f'<td class="num">{esc(r.get("turns") if r.get("turns") is not None else "-")}</td>',
            f"<td>{esc(r.get('reason'))}{flag}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return ("<details><summary>Every run "
            f"({len(runs)})</summary><table><tr>{head}</tr>{''.join(rows)}</table></details>")


def render(report):
    """The whole page, from the eval's JSON report, as a string."""
    info, overall = report.get("eval", {}), report.get("overall", [])
    who = ["model"] + (["setting"] if len(info.get("settings") or {}) > 1 else [])
    runs = report.get("runs", [])
    meta = (f"harness {info.get('harness')} · {len(runs)} runs · tier {info.get('tier')} · "
            f"tasks {', '.join(map(str, info.get('tasks') or []))} · "
            f"repeat {info.get('repeat')} · at most {info.get('max_turns')} turns and "
            f"{number(info.get('timeout'))} s per run")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src '
            '\'unsafe-inline\'">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Eval: {esc(', '.join(map(str, info.get('models') or [])))}</title>"
            f"<style>{STYLE}</style></head><body>"
            f'<h1>Eval results</h1><div class="meta">{esc(meta)}</div>'
            f"<h2>Per model</h2>{overall_table(overall, who)}"
            '<p class="note">Pass rate: runs whose end state passed the check. Tokens and seconds: '
            'means per run '
            '(tokens as the server counted them: prompt, then completion); bars are scaled to the '
            'largest value in '
            'their column. Claimed but failed: the final answer said the work was done, the end '
            'state said no.</p>'
            f"<h2>Per task</h2>{task_grid(report.get('per_task', []), who)}"
            f"{run_table(runs, who)}</body></html>")


def write_report(out, report, say):
    """The report as JSON at `out` and as a page beside it; the exit code (1 when either cannot be
    written)."""
    try:
        # filedoor.py: no link followed, temp and rename
        write_text(out, json.dumps(report, indent=2))
    except OSError as e:
        print(f"error: could not write {out}: {e.strerror or e}", file=sys.stderr)
        return 1
    say(f"[eval] results written to {out}")
    page = page_path(out)
    try:
        write_text(page, render(report))
    except OSError as e:
        print(f"error: could not write {page}: {e.strerror or e}", file=sys.stderr)
        return 1
    say(f"[eval] page written to {page}")
    return 0


def page_path(out):
    """The HTML page beside the JSON: results.json -> results.html."""
    return Path(out).with_suffix(".html")
