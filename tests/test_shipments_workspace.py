"""The workspace's shipments: the list, and one chain drawn as server-side SVG with a bar per element."""
from __future__ import annotations

import re

import pytest

from emissions import workspace
from tests.conftest import LiveServer, PASSWORD
from helpers import post, sign_in, worked_example


@pytest.fixture
def drawn(client, acme, globex, library):  # noqa: F811
    """acme's worked example and globex's one-leg shipment, and acme's workspace user signed in."""
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    mine = post(client, acme, worked_example(), status=201).json
    theirs = post(client, globex, worked_example(elements=worked_example()["elements"][:1]), status=201).json
    sign_in(client)
    return mine, theirs


def test_the_list_shows_the_environments_shipments_with_their_chain(client, drawn):
    mine, theirs = drawn
    page = client.get("/workspace/shipments")
    assert f'href="/workspace/shipments/{mine["id"]}"' in page.text and "Road → Sea → Hub → Road" in page.text
    assert theirs["id"] not in page.text
    assert 'href="/workspace/shipments" aria-current="page"' in page.text


def test_a_shipment_is_drawn_as_nodes_and_legs_with_a_bar_per_element(client, drawn):
    mine, _ = drawn
    page = client.get(f"/workspace/shipments/{mine['id']}")
    svg = re.search(r'<svg class="chain".*?</svg>', page.text, re.S).group(0)
    # Factory, Shanghai, the terminal at Felixstowe (the hub where the sea leg arrives), the warehouse.
    assert len(re.findall(r'<g class="node place"', svg)) == 3 and len(re.findall(r'<g class="node hub"', svg)) == 1
    assert re.findall(r'<g class="leg mode-(\w+)" data-index="(\d)"', svg) == [("road", "0"), ("sea", "1"),
                                                                              ("road", "3")]
    # One unit on the page, from its largest figure (the total, 9,936.55 kgCO2e): tonnes in the cards, the chain
    # and the bars alike (issue 32 found 8,856.45 kgCO2e in the chain beside 8.86 t CO2e in the bars).
    assert "Container terminal · \u2068GBFXT\u2069 · 0.03 t CO2e" in svg  # the place's name isolated
    assert "Sea · 22,399 km · 8.86 t CO2e" in svg
    assert "kgCO2e" not in svg
    assert "9.94 t CO2e" in page.text
    bars = re.search(r'<ol class="elementbars".*?</ol>', page.text, re.S).group(0)
    assert re.findall(r'<li data-index="(\d)"', bars) == ["0", "1", "2", "3"]
    assert re.findall(r'<span class="num">([^<]*)</span>', bars) == ["0.12", "8.86", "0.03", "0.93"]
    assert "t CO2e" in page.text.split('id="bars-title"')[1].split("</div>")[0]  # the unit, once, in the head
    # The widths are SVG attributes (the page's CSP refuses an inline style): the sea leg is the largest.
    widths = [float(width) for width in re.findall(r'<rect class="fill" width="([0-9.]+)"', bars)]
    assert widths[1] == 100 and all(0 < width < 100 for width in widths[:1] + widths[2:])
    assert "style=" not in page.text


def test_another_organizations_shipment_is_a_404(client, drawn):
    _, theirs = drawn
    assert client.get(f"/workspace/shipments/{theirs['id']}", status=404)
    assert client.get("/workspace/shipments/not-an-id", status=404)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_chain_fits_the_screen_in_chromium(app, client, drawn, width, browser):
    mine, _ = drawn
    with LiveServer(app) as server:
        context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            page.goto("/workspace/login")
            page.fill("#email", "ops@acme.example")
            page.fill("#password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url("**/workspace")
            page.goto("/workspace/shipments")
            page.locator("#shipments tbody a").first.click()
            page.wait_for_url(f"**/workspace/shipments/{mine['id']}")
            chain = page.locator("svg.chain")
            assert chain.is_visible() and page.locator("#bars li").count() == 4
            box = chain.bounding_box()
            assert 0 < box["width"] <= width and box["height"] > 100
            assert page.evaluate("document.documentElement.scrollWidth") <= width
        finally:
            context.close()
