"""The overview's daily chart: bars as SVG drawn on the server, labels as HTML (no script, no library).

The SVG stretches to its box (preserveAspectRatio="none"), so it holds no text: the labels stay
crisp at every width, from a 390 px phone to a wide screen.
"""
from __future__ import annotations

import html

from .. import figures

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
             f'aria-label="Calculations per activity day, last {len(days)} days">',
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


MODE_NAMES = {"ROAD": "Road", "SEA": "Sea", "AIR": "Air", "RAIL": "Rail", "HUB": "Hubs"}


def monthly_stacked(months) -> str:
    """One bar per activity month, stacked by mode (hubs a part of their own), each part with a title;
    months and the legend as HTML below. The axis and the titles write amounts in one unit, from the largest
    month."""
    if not months:
        return '<p class="muted">No emissions in this period.</p>'
    largest = max(max(month.kg for month in months), 0)
    top = nice_ceiling(int(-(-largest // 1))) if largest else 1
    co2e_text = figures.co2e_unit(largest).text
    slot = WIDTH / len(months)
    bar = slot * (0.6 if len(months) > 1 else 0.3)
    parts = [f'<div class="chartframe"><span class="charttop">{html.escape(co2e_text(top))}</span>'
             f'<svg class="chart monthly" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" '
             f'aria-label="Emissions per activity month, stacked by mode">',
             f'<line class="grid" x1="0" x2="{WIDTH}" y1="0.5" y2="0.5" vector-effect="non-scaling-stroke"/>']
    for index, month in enumerate(months):
        floor = float(HEIGHT)
        parts.append(f'<g class="month" data-month="{month.month}" data-kg="{month.kg}">')
        for mode in MODE_NAMES:
            kg = month.by_mode.get(mode)
            if not kg:
                continue
            height = HEIGHT * float(kg) / top
            floor -= height
            label = f"{month.month} · {MODE_NAMES[mode]}: {co2e_text(kg)}"
            left = round(index * slot + (slot - bar) / 2, 2)
            parts.append(f'<rect class="part mode-{mode.lower()}" data-mode="{mode}" x="{left}" '
                         f'y="{round(floor, 2)}" width="{round(bar, 2)}" height="{round(height, 2)}">'
                         f'<title>{html.escape(label)}</title></rect>')
        parts.append("</g>")
    parts.append(f'<line class="axis" x1="0" x2="{WIDTH}" y1="{HEIGHT - 0.5}" y2="{HEIGHT - 0.5}" '
                 'vector-effect="non-scaling-stroke"/></svg>')
    parts.append('<div class="chartmonths" aria-hidden="true">'
                 + "".join(f"<span>{month.month}</span>" for month in months) + "</div>")
    used = [mode for mode in MODE_NAMES if any(month.by_mode.get(mode) for month in months)]
    parts.append('<ul class="legend">' + "".join(
        f'<li><span class="swatch mode-{mode.lower()}"></span>{MODE_NAMES[mode]}</li>' for mode in used) + "</ul>")
    parts.append("</div>")
    return "".join(parts)
