"""A shipment's chain as SVG drawn on the server (no script, no library), and its bars per element.

The chain runs top to bottom, so that it keeps one layout from a 390 px phone to a wide screen:
places and hubs are nodes, legs are the edges between them, labelled with mode, distance and kgCO2e.
"""
from __future__ import annotations

import html
from decimal import Decimal

WIDTH = 320
STEP = 64  # vertical distance between two nodes
TOP = 18
LABEL_LENGTH = 38
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


def _short(text: str) -> str:
    if len(text) <= LABEL_LENGTH:
        return text
    short = text[:LABEL_LENGTH - 1] + "…"
    # an isolate cut open is closed again, or it would swallow what follows
    return short + POP_DIRECTIONAL_ISOLATE * (short.count(FIRST_STRONG_ISOLATE) - short.count(POP_DIRECTIONAL_ISOLATE))


def _number(value, places: int = 2) -> str:
    return f"{Decimal(str(value)):,.{places}f}"


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


def chain_svg(shipment: dict) -> str:
    """The SVG of the chain, each node and edge with a title giving its full text."""
    nodes, edges = nodes_and_edges(shipment)
    height = TOP * 2 + STEP * (len(nodes) - 1)
    parts = [f'<svg class="chain" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-label="Transport chain of {len(shipment["elements"])} elements">']
    # Consecutive nodes no leg joins (a hub after a hub, or a hub elsewhere than the leg's end) are
    # joined by a handover line, so the chain has no gap.
    for start in sorted(set(range(len(nodes) - 1)) - {edge["from"] for edge in edges}):
        y = TOP + STEP * start
        parts.append(f'<line class="handover" x1="14" x2="14" y1="{y}" y2="{y + STEP}"/>')
    for edge in edges:
        leg, y = edge["element"], TOP + STEP * edge["from"]
        label = (f"{leg['mode'].title()} · {_number(leg['distance']['value'], 0)} km · "
                 f"{_number(leg['emissions']['value'])} kgCO2e")
        parts.append(f'<g class="leg mode-{leg["mode"].lower()}" data-index="{leg["index"]}">'
                     f'<title>{html.escape(label)}</title>'
                     f'<line x1="14" x2="14" y1="{y}" y2="{y + STEP}"/>'
                     f'<text class="edge" x="30" y="{y + STEP / 2 + 4}">{html.escape(label)}</text></g>')
    for number, node in enumerate(nodes):
        y = TOP + STEP * number
        hub = node["kind"] == "hub"
        detail = ""
        if hub:
            detail = f" · {_number(node['element']['emissions']['value'])} kgCO2e"
        text = node["name"] + detail
        shape = (f'<rect x="7" y="{y - 7}" width="14" height="14"/>' if hub
                 else f'<circle cx="14" cy="{y}" r="6"/>')
        index = f' data-index="{node["element"]["index"]}"' if hub else ""
        parts.append(f'<g class="node {node["kind"]}"{index}><title>{html.escape(text)}</title>{shape}'
                     f'<text x="30" y="{y + 4}">{html.escape(_short(text))}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


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
                     "width": float(value / largest * 100) if largest else 0.0})
    return bars
