"""Stored text holding a bidirectional override can never reorder what is shown beside it (issue 38):
every piece of user text in the workspace and both HTML statements sits in a <bdi>, and in the chain's
SVG (titles and text, which hold no markup) inside U+2068 ... U+2069; the CLI's statement carries its
Content-Security-Policy in a <meta>."""
from __future__ import annotations

import base64
import hashlib
import re

import pytest

from emissions import jsoncodec
from emissions import workspace
from emissions.models import ApiKey, Calculation, Customer, Factor, Organization, Shipment
from emissions.workspace import chain
from conftest import PASSWORD, post_calculation
from helpers import sign_in

RLO = "\u202e"
HOSTILE = f"PO{RLO}-7 86.8"  # as stored before issue 38's text rule: the override never closed


def unisolated(page: str) -> list[str]:
    """The places where the override is shown outside any isolate (what surrounds each)."""
    found = []
    for match in re.finditer(RLO, page):
        before = page[:match.start()]
        in_bdi = before.rfind("<bdi>") > before.rfind("</bdi>")
        in_isolate = before.rfind("\u2068") > before.rfind("\u2069")
        in_tag = before.rfind("<") > before.rfind(">")  # an attribute value, never shown as text
        in_title = before.rfind("<title>") > before.rfind("</title>") and "<svg" not in before[before.rfind("<title>") - 200:]
        if not (in_bdi or in_isolate or in_tag or in_title):
            found.append(page[max(0, match.start() - 60):match.start() + 20])
    return found


@pytest.fixture
def stored(client, acme):
    """A calculation and a shipment, then every human text of them, the customer, the organization, the
    factor and a key rewritten in the database to hold an unclosed override."""
    calculation = post_calculation(client, acme, status=201).json
    calculation["external_reference"] = HOSTILE
    calculation["origin"] = {"label": HOSTILE}
    Calculation.update(external_reference=HOSTILE, body=jsoncodec.dumps(calculation)).execute()
    shipment = client.post_json("/v1/shipments", {
        "customer_reference": "cust-1", "external_reference": "PO-1", "activity_date": "2026-03-01",
        "cargo": {"value": 10, "unit": "tonne"},
        "elements": [{"type": "leg", "mode": "ROAD", "origin": {"label": "Hull"}, "destination": {"label": "York"},
                      "distance": {"value": 60, "unit": "km"}, "factor_reference": "road-default"}]},
        headers=acme.headers("idem-2"), status=201).json
    shipment["external_reference"] = HOSTILE
    shipment["elements"][0]["origin"]["label"] = HOSTILE
    shipment["elements"][0]["destination"]["label"] = HOSTILE
    Shipment.update(external_reference=HOSTILE, body=jsoncodec.dumps(shipment)).execute()
    Customer.update(name=HOSTILE).execute()
    Organization.update(name=HOSTILE).execute()
    Factor.update(name=HOSTILE, source=HOSTILE, region=HOSTILE).execute()
    ApiKey.update(name=HOSTILE).execute()
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    return {"calculation": calculation["id"], "shipment": shipment["id"]}


def test_every_workspace_page_isolates_stored_text(client, stored):
    paths = ["/workspace", "/workspace/calculations", f"/workspace/calculations/{stored['calculation']}",
             "/workspace/shipments", f"/workspace/shipments/{stored['shipment']}", "/workspace/customers",
             "/workspace/customers/cust-1?period=all", "/workspace/customers/cust-1?period=all&format=statement",
             "/workspace/keys", "/workspace/team", "/workspace/audit", "/workspace/webhooks"]
    shown = 0
    for path in paths:
        page = client.get(path).text
        shown += page.count(RLO)
        assert unisolated(page) == [], path
    assert shown > 20


def test_the_chain_isolates_labels_in_its_titles_and_text(client, stored):
    page = client.get(f"/workspace/shipments/{stored['shipment']}").text
    svg = page[page.index("<svg"):page.index("</svg>")]
    for title in re.findall(r"<title>(.*?)</title>", svg) + re.findall(r"<text[^>]*>(.*?)</text>", svg):
        assert title.count("\u2068") == title.count("\u2069")
        if RLO in title:
            assert re.search(f"\u2068[^\u2069]*{RLO}[^\u2069]*\u2069", title), title


def test_a_wrapped_chain_label_closes_its_isolate_on_every_line():
    # Labels wrap instead of being cut; each line is a text chunk of its own, so an isolate the wrap cuts
    # open is closed at the line's end and opened again on the next.
    text = chain.place_name({"label": "x" * 60}) + " · 1.00 kgCO2e"
    lines = chain._lines(text)

    def bare(value: str) -> str:
        return value.replace("\u2068", "").replace("\u2069", "").replace(" ", "")

    assert len(lines) > 2 and bare("".join(lines)) == bare(text)
    assert lines[0].startswith("\u2068") and lines[1].startswith("\u2068")  # the name runs on in its isolate
    for line in lines:
        depth = 0
        for character in line:
            depth += {"\u2068": 1, "\u2069": -1}.get(character, 0)
            assert depth >= 0, line
        assert depth == 0, line


def test_the_cli_statement_isolates_stored_text_and_has_its_policy(stored, emissions, tmp_path):
    output = tmp_path / "statement.html"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--format", "html", "--output", output)
    assert status == 0, err
    page = output.read_text(encoding="utf-8")
    assert RLO in page
    assert unisolated(page) == []
    head = page[:page.index("</head>")]
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', head).group(1)
    assert head.index("Content-Security-Policy") < head.index("<style>")
    style = re.search(r"<style>(.*?)</style>", head, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert policy == (f"default-src 'none'; style-src 'sha256-{digest}'; script-src 'none'; img-src 'none'; "
                      "form-action 'none'; base-uri 'none'")
    assert "<script" not in page

