"""A shipment's chain as SVG drawn on the server (no script, no library), and its bars per element.

The chain runs top to bottom, so that it keeps one layout from a 390 px phone to a wide screen:
places and hubs are nodes, legs are the edges between them, labelled with mode, distance and kgCO2e.
"""
from __future__ import annotations

import html
from decimal import Decimal

from .. import figures

WIDTH = 320  # the drawing is shown at this size (smaller only on a screen narrower than 320 px)
TOP = 18
LINE = 17  # between two lines of text, which the stylesheet sets at 13 px (readable on a phone)
# A line's width in ems of a sans-serif font: from x=30, 21 ems of 13 px end inside WIDTH, so a longer
# label wraps onto further lines instead of being cut (the server cannot measure the font; these are
# generous widths: a capital or m is wider than a digit, a digit than an i).
LINE_EMS = 21
NARROW, WIDE, WIDEST = set(" .,:;'!|ilj()[]·-"), set("ABCDEFGHKNOPQRSUVXYZmw&%@"), set("MW")
ISOLATES = set("\u2068\u2069")  # drawn at no width
HUB_NAMES = {"transshipment": "Transshipment", "storage_and_transshipment": "Storage and transshipment",
             "warehouse": "Warehouse", "liquid_bulk_terminal": "Liquid bulk terminal",
             "container_terminal": "Container terminal"}


FIRST_STRONG_ISOLATE, POP_DIRECTIONAL_ISOLATE = "\u2068", "\u2069"


def isolated(text: str) -> str:
    """The text as a bidirectional isolate: text stored with an override (U+202E) cannot reorder the
    figures after it, in an SVG title or text, which hold no <bdi>."""
    return FIRST_STRONG_ISOLATE + text + POP_DIRECTIONAL_ISOLATE


def place_name(place: dict | None) -> str:
    """How a place reads: its label, else its code, IATA or UN/LOCODE (isolated), else its coordinates."""
    if not place:
        return "—"
    for name in ("label", "code", "iata", "locode"):
        if name in place:
            return isolated(str(place[name]))
    return f"{place['latitude']}, {place['longitude']}"


def _ems(text: str) -> float:
    return sum(0 if c in ISOLATES else 0.3 if c in NARROW else 0.95 if c in WIDEST else 0.8 if c in WIDE else 0.6
               for c in text)


def _lines(text: str) -> list[str]:
    """The text wrapped at LINE_EMS, between words where it can be (a word too long is broken)."""
    lines, line = [], ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if _ems(candidate) <= LINE_EMS:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        for character in word:
            if _ems(line + character) > LINE_EMS:
                lines.append(line)
                line = ""
            line += character
    return _closed(lines + [line] if line or not lines else lines)


def _closed(lines: list[str]) -> list[str]:
    """Each line with its own isolates closed: a line is a text chunk of its own (a tspan placed by x), so an
    isolate wrapped open is closed at the line's end and opened again on the next."""
    closed, open_isolates = [], 0
    for line in lines:
        line = FIRST_STRONG_ISOLATE * open_isolates + line
        open_isolates = max(0, line.count(FIRST_STRONG_ISOLATE) - line.count(POP_DIRECTIONAL_ISOLATE))
        closed.append(line + POP_DIRECTIONAL_ISOLATE * open_isolates)
    return closed


def _number(value, places: int = 2) -> str:
    return figures.number_text(value, places)


def unit_of(shipment: dict) -> figures.Co2eUnit:
    """The page's one emissions unit, from its largest figure (the shipment's total)."""
    return figures.co2e_unit(shipment["totals"]["emissions"]["value"],
                             *(element["emissions"]["value"] for element in shipment["elements"]))


def _text(x: int, first_baseline: float, lines: list[str], css_class: str = "") -> str:
    """A text of one or more lines (tspans), its first baseline at first_baseline."""
    spans = "".join(f'<tspan x="{x}" dy="{0 if number == 0 else LINE}">{html.escape(line)}</tspan>'
                    for number, line in enumerate(lines))
    attributes = f' class="{css_class}"' if css_class else ""
    return f'<text{attributes} y="{first_baseline}">{spans}</text>'


def nodes_and_edges(shipment: dict) -> tuple[list[dict], list[dict]]:
    """The chain's nodes (places and hubs, in order) and its legs as edges between consecutive nodes."""
    nodes: list[dict] = []
    edges: list[dict] = []
    for element in shipment["elements"]:
        if element["type"] == "hub":
            name = HUB_NAMES[element["hub_type"]]
            where = place_name(element.get("location")) if element.get("location") else ""
            if nodes and nodes[-1]["kind"] == "place" and where in ("", nodes[-1]["name"]):
                # the hub at the place the last leg reached (a hub elsewhere is a node of its own)
                nodes[-1].update(kind="hub", name=f"{name} · {nodes[-1]['name']}", element=element)
            else:
                nodes.append({"kind": "hub", "name": f"{name} · {where}" if where else name, "element": element})
            continue
        if not nodes:
            nodes.append({"kind": "place", "name": place_name(element["origin"]), "element": None})
        edges.append({"from": len(nodes) - 1, "element": element})
        nodes.append({"kind": "place", "name": place_name(element["destination"]), "element": None})
    return nodes, edges


def chain_svg(shipment: dict, unit: figures.Co2eUnit | None = None) -> str:
    """The SVG of the chain, each node and edge with a title giving its full text; emissions in `unit`
    (the page's); labels wrap, never cut."""
    unit = unit or unit_of(shipment)
    nodes, edges = nodes_and_edges(shipment)
    edge_from = {edge["from"]: edge for edge in edges}
    legs, node_parts, y, bottom = [], [], TOP, TOP
    for number, node in enumerate(nodes):
        hub = node["kind"] == "hub"
        figure = unit.text(node["element"]["emissions"]["value"]) if hub else ""
        text = node["name"] + (f" · {figure}" if hub else "")
        lines = _lines(node["name"]) + (_lines(figure) if hub else [])  # a hub's figure on a line of its own
        shape = (f'<rect x="7" y="{y - 7}" width="14" height="14"/>' if hub
                 else f'<circle cx="14" cy="{y}" r="6"/>')
        index = f' data-index="{node["element"]["index"]}"' if hub else ""
        node_part = (f'<g class="node {node["kind"]}"{index}><title>{html.escape(text)}</title>{shape}'
                     f'{_text(30, y + 4.5, lines)}</g>')
        node_parts.append(node_part)
        below = bottom = y + 4.5 + LINE * (len(lines) - 1)  # the node's last baseline
        edge = edge_from.get(number)
        if edge is None:
            next_y = below + LINE + 12
            if number < len(nodes) - 1:
                # Consecutive nodes no leg joins (a hub after a hub, or a hub elsewhere than the leg's end)
                # are joined by a handover line, so the chain has no gap.
                legs.append(f'<line class="handover" x1="14" x2="14" y1="{y}" y2="{next_y}"/>')
            y = next_y
            continue
        leg = edge["element"]
        label = (f"{leg['mode'].title()} · {_number(leg['distance']['value'], 0)} km · "
                 f"{unit.text(leg['emissions']['value'])}")
        label_lines = _lines(label)
        first = below + LINE + 10
        next_y = first + LINE * (len(label_lines) - 1) + LINE + 10
        legs.append(f'<g class="leg mode-{leg["mode"].lower()}" data-index="{leg["index"]}">'
                     f'<title>{html.escape(label)}</title>'
                     f'<line x1="14" x2="14" y1="{y}" y2="{next_y}"/>{_text(30, first, label_lines, "edge")}</g>')
        y = next_y
    height = round(bottom + TOP)
    return (f'<svg class="chain" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
            f'aria-label="Transport chain of {len(shipment["elements"])} elements">'
            + "".join(legs) + "".join(node_parts) + "</svg>")  # legs first: the nodes' shapes cover their ends


def element_bars(shipment: dict) -> list[dict]:
    """Per element: its label, kgCO2e and the bar's width in percent of the largest element."""
    largest = max((Decimal(str(element["emissions"]["value"])) for element in shipment["elements"]),
                  default=Decimal(0))
    bars = []
    for element in shipment["elements"]:
        value = Decimal(str(element["emissions"]["value"]))
        if element["type"] == "leg":
            label = f"{element['mode'].title()}: {place_name(element['origin'])} → {place_name(element['destination'])}"
        else:
            label = HUB_NAMES[element["hub_type"]]
        bars.append({"index": element["index"], "label": label, "kg": value,
                     "width": round(float(value / largest * 100), 2) if largest > 0 else 0.0})
    return bars
