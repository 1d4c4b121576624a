"""A line chart as a self-contained SVG, with the standard library only.

A lesson told in numbers ("21k prompt tokens with scissors, 74k without") is easier to believe as a
picture: one line per run, the model calls along the bottom, the prompt size up the side. This
module draws such a picture as plain SVG text (axes, ticks, labels, a legend, dashed reference
lines), so it opens in any browser and renders on GitHub, and needs no plotting library.

The output is deterministic: the same series give the same bytes (fixed number formatting, no
timestamps, no random ids), so a test can regenerate a committed picture and compare it byte for
byte. What it cannot do: anything but lines on linear axes; pick the colours yourself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


@dataclass(frozen=True)
class Series:
    label: str           # in the legend
    values: list[float]  # y for x = 1, 2, 3, ...
    color: str           # any SVG colour


@dataclass(frozen=True)
class Line:
    """A dashed horizontal reference line across the plot, labelled at its right end."""
    y: float
    label: str
    color: str = "#555555"


def nice_step(span: float, ticks: int = 6) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks over `span`."""
    raw = span / max(1, ticks)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def number(value: float) -> str:
    """A coordinate: one decimal, never '-0.0', the same text on every machine."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def thousands(value: float) -> str:
    """A tick label: 12,000 rather than 12000.0."""
    return f"{value:,.0f}"


def line_chart(series: list[Series], title: str, x_label: str, y_label: str, lines: tuple[Line, ...] = (),
               subtitle: str = "", width: int = 800, height: int = 460) -> str:
    """The SVG text of a line chart of `series` (x = 1..n)."""
    left, right, top, bottom = 96, 150, 64 if subtitle else 46, 58
    plot_w, plot_h = width - left - right, height - top - bottom
    x_max = max(len(s.values) for s in series)
    y_top = max([v for s in series for v in s.values] + [line.y for line in lines])
    y_step = nice_step(y_top)
    y_max = math.ceil(y_top / y_step) * y_step

    def x_at(i):  # i is 1-based
        return left + (i - 1) / max(1, x_max - 1) * plot_w

    def y_at(v):
        return top + plot_h - v / y_max * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="{FONT}" font-size="13">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{left}" y="26" font-size="16" font-weight="bold" fill="#222222">{escape(title)}</text>']
    if subtitle:
        out.append(f'<text x="{left}" y="46" fill="#555555">{escape(subtitle)}</text>')
    # grid and y ticks
    steps = round(y_max / y_step)
    for k in range(steps + 1):
        v = k * y_step
        y = number(y_at(v))
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{left - 8}" y="{y}" dy="4" text-anchor="end" fill="#444444">{thousands(v)}</text>')
    # x ticks: 1, then every multiple of a round step
    x_step = max(1, int(nice_step(x_max, 8)))
    for i in [1] + list(range(x_step, x_max + 1, x_step)):
        x = number(x_at(i))
        out.append(f'<line x1="{x}" y1="{number(top + plot_h)}" x2="{x}" y2="{number(top + plot_h + 5)}" stroke="#444444"/>')
        out.append(f'<text x="{x}" y="{number(top + plot_h + 20)}" text-anchor="middle" fill="#444444">{i}</text>')
    # axes and their labels
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{number(top + plot_h)}" stroke="#444444"/>')
    out.append(f'<line x1="{left}" y1="{number(top + plot_h)}" x2="{left + plot_w}" y2="{number(top + plot_h)}" '
               f'stroke="#444444"/>')
    out.append(f'<text x="{number(left + plot_w / 2)}" y="{height - 14}" text-anchor="middle" '
               f'fill="#222222">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(24 {number(top + plot_h / 2)}) rotate(-90)" text-anchor="middle" '
               f'fill="#222222">{escape(y_label)}</text>')
    # reference lines, labelled in the right margin
    for line in lines:
        y = number(y_at(line.y))
        out.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" stroke="{line.color}" '
                   f'stroke-width="1.5" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{left + plot_w + 8}" y="{y}" dy="4" fill="{line.color}">{escape(line.label)}</text>')
    # the series, each labelled at its last point
    for s in series:
        points = " ".join(f"{number(x_at(i))},{number(y_at(v))}" for i, v in enumerate(s.values, 1))
        out.append(f'<polyline points="{points}" fill="none" stroke="{s.color}" stroke-width="2.5" '
                   f'stroke-linejoin="round"/>')
        for i, v in enumerate(s.values, 1):
            out.append(f'<circle cx="{number(x_at(i))}" cy="{number(y_at(v))}" r="2.5" fill="{s.color}"/>')
    out += legend(series, left + 14, top + 12)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def legend(series: list[Series], x: int, y: int) -> list[str]:
    """A boxed legend at (x, y): a short line of each series' colour, then its label."""
    row, width = 22, 18 + max(len(s.label) for s in series) * 7.0 + 40
    out = [f'<rect x="{x}" y="{y}" width="{number(width)}" height="{len(series) * row + 10}" fill="#ffffff" '
           f'fill-opacity="0.92" stroke="#cccccc"/>']
    for k, s in enumerate(series):
        cy = y + 16 + k * row
        out.append(f'<line x1="{x + 10}" y1="{cy}" x2="{x + 38}" y2="{cy}" stroke="{s.color}" stroke-width="3"/>')
        out.append(f'<text x="{x + 46}" y="{cy}" dy="4" fill="#222222">{escape(s.label)}</text>')
    return out
