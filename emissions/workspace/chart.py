"""The overview's daily chart: bars as SVG drawn on the server, labels as HTML (no script, no library).

The SVG stretches to its box (preserveAspectRatio="none"), so it holds no text: the labels stay
crisp at every width, from a 390 px phone to a wide screen.
"""
from __future__ import annotations

import html

WIDTH, HEIGHT = 300, 100  # the viewBox: one unit of width per tenth of a day slot


def nice_ceiling(value: int) -> int:
    """The axis top: 1, 2, 5 x 10^n at or above value (at least 1)."""
    ceiling = 1
    while True:
        for step in (1, 2, 5):
            if step * ceiling >= value:
                return step * ceiling
        ceiling *= 10


def daily_bars(days) -> str:
    """One bar per day (height: calculations), each with a title giving the date, count and kgCO2e."""
    top = nice_ceiling(max((day.count for day in days), default=0))
    slot = WIDTH / max(1, len(days))
    bar = slot * 0.7
    parts = [f'<div class="chartframe"><span class="charttop">{top}</span>'
             f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" '
             f'aria-label="Calculations per day, last {len(days)} days">',
             f'<line class="grid" x1="0" x2="{WIDTH}" y1="0.5" y2="0.5" vector-effect="non-scaling-stroke"/>',
             f'<line class="grid" x1="0" x2="{WIDTH}" y1="{HEIGHT / 2}" y2="{HEIGHT / 2}" '
             f'vector-effect="non-scaling-stroke"/>']
    for index, day in enumerate(days):
        height = round(HEIGHT * day.count / top, 2)
        label = f"{day.date.strftime('%d %b %Y')}: {day.count} calculation{'' if day.count == 1 else 's'}, " \
                f"{day.kg:,.2f} kgCO2e"
        parts.append(f'<g class="day" data-date="{day.date.isoformat()}" data-count="{day.count}">'
                     f'<title>{html.escape(label)}</title>'
                     f'<rect class="hit" x="{round(index * slot, 2)}" y="0" width="{round(slot, 2)}" height="{HEIGHT}"/>'
                     + (f'<rect class="bar" x="{round(index * slot + (slot - bar) / 2, 2)}" '
                        f'y="{round(HEIGHT - height, 2)}" width="{round(bar, 2)}" height="{height}"/>'
                        if height else "")
                     + "</g>")
    parts.append(f'<line class="axis" x1="0" x2="{WIDTH}" y1="{HEIGHT - 0.5}" y2="{HEIGHT - 0.5}" '
                 'vector-effect="non-scaling-stroke"/></svg>')
    if days:
        middle = days[len(days) // 2]
        parts.append('<div class="chartaxis" aria-hidden="true">'
                     + "".join(f"<span>{day.date.strftime('%d %b')}</span>" for day in (days[0], middle, days[-1]))
                     + "</div>")
    parts.append("</div>")
    return "".join(parts)
