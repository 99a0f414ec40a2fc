"""The chain diagram's hubs (issue 38): a hub elsewhere than the last leg's end keeps its own location,
and no two nodes are left without a line between them."""
from __future__ import annotations

import re

import pytest

from emissions import figures
from emissions.workspace import chain


def leg(origin: str, destination: str, index: int) -> dict:
    return {"type": "leg", "index": index, "mode": "ROAD", "origin": {"label": origin},
            "destination": {"label": destination}, "distance": {"value": 10}, "emissions": {"value": 1}}


def hub(index: int, location: str | None = None) -> dict:
    element = {"type": "hub", "index": index, "hub_type": "warehouse", "emissions": {"value": 2}}
    if location:
        element["location"] = {"label": location}
    return element


def names(shipment: dict) -> list[str]:
    nodes, _ = chain.nodes_and_edges(shipment)
    return [node["name"].replace("\u2068", "").replace("\u2069", "") for node in nodes]


def test_a_hub_after_a_leg_keeps_its_own_location():
    shipment = {"elements": [leg("Hull", "York", 0), hub(1, "Leeds"), leg("Leeds", "Derby", 2)]}
    assert names(shipment) == ["Hull", "York", "Warehouse · Leeds", "Derby"]


def test_a_hub_at_the_leg_s_destination_or_without_a_location_is_drawn_there():
    assert names({"elements": [leg("Hull", "York", 0), hub(1, "York")]}) == ["Hull", "Warehouse · York"]
    assert names({"elements": [leg("Hull", "York", 0), hub(1)]}) == ["Hull", "Warehouse · York"]


def segments(svg: str) -> list[tuple[float, float]]:
    return sorted((float(y1), float(y2)) for y1, y2 in re.findall(r'<line [^>]*y1="([0-9.]+)" y2="([0-9.]+)"', svg))


def node_centres(svg: str) -> list[float]:
    """Each node's centre, in chain order (a place's circle, a hub's 14-unit square)."""
    return [float(cy) if cy else float(y) + 7 for y, cy in re.findall(
        r'<g class="node [^"]*"[^>]*><title>[^<]*</title>(?:<rect x="7" y="([0-9.]+)"|<circle cx="14" cy="([0-9.]+)")',
        svg)]


@pytest.mark.parametrize("elements", [
    [leg("Hull", "York", 0), hub(1), hub(2), leg("York", "Derby", 3)],
    [leg("Hull", "York", 0), hub(1, "Leeds"), hub(2, "Leeds"), leg("Leeds", "Derby", 3)],
    [hub(0, "Hull"), hub(1), leg("Hull", "York", 2)],
])
def test_the_chain_has_no_gap_between_any_two_nodes(elements):
    shipment = {"elements": elements}
    nodes, _ = chain.nodes_and_edges(shipment)
    svg = chain.chain_svg(shipment, figures.KILOGRAMS)
    centres = node_centres(svg)
    assert len(centres) == len(nodes) and centres == sorted(centres)
    # Each two consecutive nodes joined by exactly one line, a leg's or a dashed handover's, centre to centre.
    assert segments(svg) == [(centres[number], centres[number + 1]) for number in range(len(nodes) - 1)]
