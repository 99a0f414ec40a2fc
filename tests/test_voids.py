"""Corrections without rewriting history: voids and replacements (docs/api.md, "Corrections")."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest
import requests

from emissions import jsoncodec
from emissions.models import (Calculation, CustomerPeriodRollup, CustomerRollup, OrganizationPeriodRollup, Shipment,
                              ShipmentHub, UsageCounter, WebhookEndpoint, WebhookEvent)
from emissions.rollups import recount
from tests.conftest import PASSWORD, LiveServer, make_customer, make_key
from helpers import Tables, check_response, post as post_shipment, race, sign_in, worked_example

pytestmark = pytest.mark.on_both
YEAR = "?from=2026-01-01&to=2026-12-31"


def exact(response) -> dict:
    return jsoncodec.loads(response.body)


def calculate(client, persona, key, **overrides) -> dict:
    return exact(client.post_json("/v1/emissions/logistics", _logistics(**overrides), headers=persona.headers(key),
                                  status=201))


def _logistics(**overrides) -> dict:
    from tests.conftest import logistics_body
    return logistics_body(**overrides)


def void(client, persona, kind, record_id, key="void-1", reason="Booked twice", status="*"):
    return client.post_json(f"/v1/{kind}/{record_id}/void", {"reason": reason}, headers=persona.headers(key),
                            status=status)


def analytics(client, persona, query=YEAR) -> dict:
    return exact(client.get(f"/v1/customers/cust-1/emissions{query}", headers=persona.headers()))["analytics"]


def statement(client, persona, query=YEAR) -> dict:
    return exact(client.get(f"/v1/customers/cust-1/statement{query}", headers=persona.headers()))


def usage(persona) -> int:
    return sum(row.count for row in UsageCounter.select().where(UsageCounter.organization == persona.org.id))


def rollup_rows(persona) -> list:
    """Every rollup row of the persona's customer and organization, as stored."""
    rows = [row.__data__ for model in (CustomerRollup, CustomerPeriodRollup)
            for row in model.select().where(model.customer == persona.customer.id)]
    rows += [row.__data__ for row in OrganizationPeriodRollup.select()
             .where(OrganizationPeriodRollup.organization == persona.org.id)]
    # Compared by value (Decimal's ==): a sum taken back may keep more trailing zeros in its text.
    return sorted(({key: value for key, value in row.items() if key != "id"} for row in rows),
                  key=lambda row: repr(sorted((key, str(value)) for key, value in row.items()
                                              if not isinstance(value, Decimal))))


def test_a_voided_calculation_leaves_every_total_to_the_decimal_but_still_counts_in_usage(client, acme):
    kept = calculate(client, acme, "a", cargo={"value": 7.25, "unit": "tonne"}, activity_date="2026-03-01")
    before_any = rollup_rows(acme)
    made = client.post_json("/v1/emissions/logistics", _logistics(cargo={"value": 3.333, "unit": "tonne"},
                                                                  activity_date="2026-04-15"),
                            headers=acme.headers("b"), status=201)
    voided, first_text = exact(made), made.text
    both = analytics(client, acme)
    assert both["emissions"]["value"] == kept["emissions"]["value"] + voided["emissions"]["value"]
    used = usage(acme)

    answer = void(client, acme, "calculations", voided["id"], status=200)
    check_response(answer, "/calculations/{id}/void", "post")
    body = exact(answer)
    assert body["status"] == "voided" and body["voided"]["reason"] == "Booked twice"
    assert body["voided"]["by"].startswith("key_")
    # The stored bytes as they were, but for the status and the voided block after it.
    assert answer.text == first_text.replace('"status":"succeeded"', '"status":"voided","voided":'
                                             + jsoncodec.dumps(body["voided"]), 1)

    after = analytics(client, acme)
    assert after["emissions"]["value"] == kept["emissions"]["value"]
    assert after["activity"]["value"] == kept["activity"]["value"]
    assert after["calculation_count"] == 1
    assert [month["month"] for month in after["by_month"] if month["calculation_count"]] == ["2026-03"]
    assert analytics(client, acme, "?from=2026-04-01&to=2026-04-30")["calculation_count"] == 0
    assert rollup_rows(acme) == before_any  # as if the voided one had never been added
    found = statement(client, acme)
    assert found["totals"]["emissions"]["value"] == kept["emissions"]["value"]
    assert found["totals"]["calculation_count"] == 1
    assert found["voided"] == [{"object": "calculation", "id": voided["id"], "external_reference": "shipment-1",
                                "activity_date": "2026-04-15",
                                "emissions": {"value": voided["emissions"]["value"], "unit": "kgCO2e"},
                                "voided_at": body["voided"]["at"], "reason": "Booked twice", "replaced_by": None}]
    assert usage(acme) == used  # billed as calculated

    assert exact(client.get(f"/v1/calculations/{voided['id']}", headers=acme.headers())) == body
    listed = exact(client.get("/v1/calculations", headers=acme.headers()))["data"]
    assert [item["status"] for item in listed] == ["voided", "succeeded"]

    assert recount.verify().drifted == []
    CustomerRollup.delete().execute()
    CustomerPeriodRollup.delete().execute()
    OrganizationPeriodRollup.delete().execute()
    assert recount.verify().drifted != []
    recount.rebuild()
    assert recount.verify().drifted == []
    assert analytics(client, acme) == after
    assert rollup_rows(acme) == before_any


def test_a_void_replays_byte_for_byte_and_a_second_void_is_a_conflict(client, acme):
    created = calculate(client, acme, "a")
    first = void(client, acme, "calculations", created["id"], key="v1", status=200)
    assert first.headers["Idempotent-Replayed"] == "false"
    again = void(client, acme, "calculations", created["id"], key="v1", status=200)
    assert again.body == first.body and again.headers["Idempotent-Replayed"] == "true"
    reused = void(client, acme, "calculations", created["id"], key="v1", reason="Another reason", status=409)
    assert reused.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    twice = void(client, acme, "calculations", created["id"], key="v2", status=409)
    assert twice.json["error"]["code"] == "ALREADY_VOIDED"
    check_response(twice, "/calculations/{id}/void", "post")
    other = calculate(client, acme, "b")
    elsewhere = void(client, acme, "calculations", other["id"], key="v1", status=409)
    assert elsewhere.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert WebhookEvent.select().where(WebhookEvent.type == "calculation.voided").count() == 1


def test_a_void_needs_its_key_a_reason_under_the_text_rule_and_the_calculate_scope(client, acme, secret):
    created = calculate(client, acme, "a")
    path = f"/v1/calculations/{created['id']}/void"
    missing = client.post_json(path, {"reason": "x"}, headers=acme.headers(), status=400)
    assert missing.json["error"]["code"] == "IDEMPOTENCY_KEY_REQUIRED"
    for body in ({}, {"reason": ""}, {"reason": "two\nlines"}, {"reason": "x", "extra": 1}):
        refused = client.post_json(path, body, headers=acme.headers("k"), status=422)
        assert refused.json["error"]["code"] == "INVALID_REQUEST"
    reader = make_key(acme.org, secret, scopes=["emissions:read"])
    denied = client.post_json(path, {"reason": "x"}, headers={"Authorization": f"Bearer {reader}",
                                                              "Idempotency-Key": "k"}, status=403)
    assert denied.json["error"]["code"] == "INSUFFICIENT_SCOPE"
    assert Calculation.get_by_id(created["id"]).voided_at is None


def test_another_tenant_s_or_environment_s_id_is_the_same_404_as_an_unknown_one(client, acme, globex, secret):
    created = calculate(client, acme, "a")
    unknown = void(client, acme, "calculations", "00000000-0000-4000-8000-000000000000", status=404).json["error"]
    foreign = void(client, globex, "calculations", created["id"], status=404).json["error"]
    live_key = make_key(acme.org, secret, environment="live")
    live = client.post_json(f"/v1/calculations/{created['id']}/void", {"reason": "x"},
                            headers={"Authorization": f"Bearer {live_key}", "Idempotency-Key": "k"}, status=404)
    assert {(e["code"], e["message"]) for e in (unknown, foreign, live.json["error"])} == \
        {("INVALID_REQUEST", "No calculation with this id exists.")}
    assert void(client, acme, "calculations", "not-an-id", status=404).json["error"]["message"] == \
        "No calculation with this id exists."
    assert Calculation.get_by_id(created["id"]).voided_at is None


def test_a_shipment_s_void_voids_its_legs_and_hubs_and_a_leg_is_not_voided_alone(client, acme, library):
    kept = calculate(client, acme, "a")
    before = rollup_rows(acme)
    shipment = exact(post_shipment(client, acme, worked_example(), status=201))
    legs = [element["calculation_id"] for element in shipment["elements"] if element["type"] == "leg"]
    assert "hubs" in analytics(client, acme)
    used = usage(acme)

    refused = void(client, acme, "calculations", legs[1], status=409)
    assert refused.json["error"]["code"] == "SHIPMENT_LEG"
    assert shipment["id"] in refused.json["error"]["message"] and "void" in refused.json["error"]["message"]

    voided = exact(void(client, acme, "shipments", shipment["id"], reason="Wrong container", status=200))
    assert voided["status"] == "voided" and voided["voided"]["reason"] == "Wrong container"
    for leg in legs:
        assert exact(client.get(f"/v1/calculations/{leg}", headers=acme.headers()))["status"] == "voided"
    assert exact(client.get(f"/v1/shipments/{shipment['id']}", headers=acme.headers())) == voided
    assert ShipmentHub.select().where(ShipmentHub.voided_at.is_null()).count() == 0
    after = analytics(client, acme)
    assert "hubs" not in after
    assert after["emissions"]["value"] == kept["emissions"]["value"]
    assert rollup_rows(acme) == before
    found = statement(client, acme)
    assert found["totals"]["shipment_count"] == 0 and found["totals"]["calculation_count"] == 1
    assert [(entry["object"], entry["id"]) for entry in found["voided"]] == [("shipment", shipment["id"])]
    assert [f["reference"] for f in found["factors"]] == ["road-default"]
    assert usage(acme) == used
    event = WebhookEvent.get(WebhookEvent.type == "shipment.voided")
    assert jsoncodec.loads(event.payload)["data"] == voided
    assert recount.verify().drifted == []


def test_two_voids_at_once_void_once(app, acme):
    with LiveServer(app) as server:
        created = requests.post(f"{server.url}/v1/emissions/logistics", data=json.dumps(_logistics()),
                                headers={**acme.headers("a"), "Content-Type": "application/json"}, timeout=30).json()
        body = json.dumps({"reason": "Booked twice"}).encode()
        url = f"{server.url}/v1/calculations/{created['id']}/void"
        answers = race(url, [({**acme.headers(f"void-{n}"), "Content-Type": "application/json"}, body)
                             for n in range(2)])
        other = requests.post(f"{server.url}/v1/emissions/logistics", data=json.dumps(_logistics()),
                              headers={**acme.headers("b"), "Content-Type": "application/json"}, timeout=30).json()
        same_key = race(f"{server.url}/v1/calculations/{other['id']}/void",
                        [({**acme.headers("void-same"), "Content-Type": "application/json"}, body)] * 2)
    # One key sent twice at once: one void, and both answers are its bytes.
    assert [answer.status_code for answer in same_key] == [200, 200]
    assert same_key[0].content == same_key[1].content
    assert sorted(answer.headers["Idempotent-Replayed"] for answer in same_key) == ["false", "true"]
    assert sorted(answer.status_code for answer in answers) == [200, 409]
    assert [answer.json()["error"]["code"] for answer in answers if answer.status_code == 409] == ["ALREADY_VOIDED"]
    assert WebhookEvent.select().where(WebhookEvent.type == "calculation.voided").count() == 2
    assert CustomerRollup.select().where(CustomerRollup.customer == acme.customer.id).count() == 0
    assert recount.verify().drifted == []


def test_the_void_s_event_carries_the_voided_record_and_a_skipped_event_keeps_its_body(client, acme):
    created = calculate(client, acme, "a")  # no endpoint: its succeeded event is skipped, keeping no body
    succeeded = WebhookEvent.get(WebhookEvent.type == "calculation.succeeded")
    assert succeeded.stored_payload == ""
    WebhookEndpoint.create(organization=acme.org, environment="test", url="https://example.test/hook",
                           secret="whsec_test")
    voided = exact(void(client, acme, "calculations", created["id"], status=200))
    event = WebhookEvent.get(WebhookEvent.type == "calculation.voided")
    assert event.delivery_status == "pending"
    assert jsoncodec.loads(event.payload)["data"] == voided
    assert jsoncodec.loads(WebhookEvent.get_by_id(succeeded.id).payload)["data"] == created


def test_a_replacement_voids_what_it_replaces_in_its_own_transaction(client, acme):
    old = calculate(client, acme, "a", cargo={"value": 10, "unit": "tonne"})
    new = calculate(client, acme, "b", cargo={"value": 12, "unit": "tonne"}, replaces=old["id"])
    assert new["replaces"] == old["id"] and new["status"] == "succeeded"
    shown = exact(client.get(f"/v1/calculations/{old['id']}", headers=acme.headers()))
    assert shown["status"] == "voided" and shown["replaced_by"] == new["id"]
    assert shown["voided"]["reason"] == f"replaced by {new['id']}"
    assert analytics(client, acme)["emissions"]["value"] == new["emissions"]["value"]
    assert statement(client, acme)["voided"][0]["replaced_by"] == new["id"]
    replay = client.post_json("/v1/emissions/logistics", _logistics(cargo={"value": 12, "unit": "tonne"},
                                                                     replaces=old["id"]),
                              headers=acme.headers("b"), status=200)
    assert exact(replay) == new
    again = client.post_json("/v1/emissions/logistics", _logistics(replaces=old["id"]), headers=acme.headers("c"),
                             status=409)
    assert again.json["error"]["code"] == "ALREADY_VOIDED"
    assert again.json["error"]["details"] == [{"field": "replaces", "message": "names a voided calculation"}]
    unknown = client.post_json("/v1/emissions/logistics", _logistics(replaces="00000000-0000-4000-8000-000000000000"),
                               headers=acme.headers("d"), status=404)
    assert unknown.json["error"]["details"][0]["field"] == "replaces"
    make_customer(acme.org, "cust-2")
    other = client.post_json("/v1/emissions/logistics", _logistics(customer_reference="cust-2", replaces=new["id"]),
                             headers=acme.headers("e"), status=422)
    assert other.json["error"]["details"] == [{"field": "replaces",
                                               "message": "names a calculation of another customer"}]
    assert Calculation.select().count() == 2
    assert recount.verify().drifted == []


def test_a_shipment_replaces_a_shipment_and_links_both_ways(client, acme, library):
    old = exact(post_shipment(client, acme, worked_example(), key="s1", status=201))
    new = exact(post_shipment(client, acme, worked_example(cargo={"value": 1, "unit": "TEU"}, replaces=old["id"]),
                              key="s2", status=201))
    assert new["replaces"] == old["id"]
    assert Shipment.get_by_id(old["id"]).replaced_by == new["id"]
    assert Shipment.get_by_id(new["id"]).replaces == old["id"]
    assert analytics(client, acme)["emissions"]["value"] == new["totals"]["emissions"]["value"]
    listed = exact(client.get("/v1/shipments", headers=acme.headers()))["data"]
    assert [(item["id"], item["status"]) for item in listed] == [(new["id"], "succeeded"), (old["id"], "voided")]
    leg = next(element["calculation_id"] for element in new["elements"] if element["type"] == "leg")
    by_leg = client.post_json("/v1/emissions/logistics", _logistics(replaces=leg), headers=acme.headers("c"),
                              status=409)
    assert by_leg.json["error"]["code"] == "SHIPMENT_LEG"
    assert recount.verify().drifted == []
    assert Decimal(str(analytics(client, acme)["hubs"]["emissions"]["value"])) > 0


def test_the_printable_statement_lists_the_voided_apart_with_their_reason(client, acme):
    from emissions import workspace
    calculate(client, acme, "a", external_reference="KEPT-1")
    voided = calculate(client, acme, "b", external_reference="WRONG-1")
    void(client, acme, "calculations", voided["id"], reason="Wrong weight \u202e", status=422)
    void(client, acme, "calculations", voided["id"], reason="Wrong weight on the note", status=200)
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    page = client.get("/workspace/customers/cust-1?period=all&format=statement").text
    section = page.split('id="statement-voided"')[1].split("</table>")[0]
    assert "WRONG-1" in section and "Wrong weight on the note" in section and "KEPT-1" not in section
    assert "Voided, not counted" in page


@pytest.fixture
def corrected(client, acme, library):  # noqa: F811 (library is the fixture)
    """A kept calculation, a voided one and a voided shipment (its legs and hubs with it), as GET shows them."""
    kept = calculate(client, acme, "a", external_reference="KEPT-1")
    wrong = calculate(client, acme, "b", external_reference="WRONG-1")
    shipment = exact(post_shipment(client, acme, worked_example(external_reference="WRONG-SHIP"), key="s1",
                                   status=201))
    wrong = exact(void(client, acme, "calculations", wrong["id"], key="v1", reason="Wrong weight on the note",
                       status=200))
    shipment = exact(void(client, acme, "shipments", shipment["id"], key="v2", reason="Booked twice", status=200))
    return kept, wrong, shipment


def test_the_cli_s_html_statement_lists_the_voided_as_the_printable_statement_does(client, acme, corrected,
                                                                                    emissions):
    from emissions import workspace
    kept, wrong, shipment = corrected
    status, page, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                  "--format", "html")
    assert (status, err) == (0, "")
    listed = dict(Tables(page).tables)["statement-voided"]
    assert [[text for text, _ in row] for row in listed] == [
        ["Record", "Reference", "Activity date", "kgCO2e", "Voided", "Reason"],
        *sorted([["calculation", "WRONG-1", wrong["activity_date"], jsoncodec.decimal_text(wrong["emissions"]["value"]),
                  wrong["voided"]["at"][:10], "Wrong weight on the note"],
                 ["shipment", "WRONG-SHIP", shipment["activity_date"],
                  jsoncodec.decimal_text(shipment["totals"]["emissions"]["value"]), shipment["voided"]["at"][:10],
                  "Booked twice"]], key=lambda row: (row[2], row[0] != "calculation"))]
    assert "Voided, not counted" in page and "KEPT-1" not in page.split('id="statement-voided"')[1]
    # The workspace's printable statement says it in the same words (one partial, statement_voided.tpl).
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    printable = client.get("/workspace/customers/cust-1?period=all&format=statement").text

    def section(text: str) -> str:
        return text.split('<section aria-labelledby="voided-title">')[1].split("</section>")[0]
    assert section(printable) == section(page)


def test_the_statement_csv_leaves_the_voided_out_and_adds_up_to_the_totals(client, acme, corrected, emissions,
                                                                           tmp_path):
    import csv
    kept, wrong, shipment = corrected
    path = tmp_path / "statement.csv"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--format", "csv", "--output", str(path))
    assert (status, err) == (0, "")
    rows = list(csv.DictReader(path.open(newline="")))
    assert [(row["calculation_id"], row["shipment_id"]) for row in rows] == [(kept["id"], "")]
    totals = statement(client, acme, "")["totals"]
    assert Decimal(rows[0]["emissions_kgco2e"]) == totals["emissions"]["value"] == kept["emissions"]["value"]
    status, text, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1")
    assert [(entry["object"], entry["id"]) for entry in json.loads(text)["voided"]] == sorted(
        [("calculation", wrong["id"]), ("shipment", shipment["id"])],
        key=lambda entry: (wrong if entry[1] == wrong["id"] else shipment)["activity_date"])


def test_a_void_in_one_serving_process_makes_the_others_forget_what_they_remember():
    """No database: the serving processes' shared memory alone."""
    import os
    from emissions.recent import RecentCalculations
    here, other = RecentCalculations(10), RecentCalculations(10)
    here.remember(1, "test", "calc-a", '{"id":"calc-a","status":"succeeded"}', "key-a", b"raw")
    assert here.body(1, "test", "calc-a") is not None and here.replay(1, "test", "key-a", b"raw") is not None
    other.forget_ids(("calc-b",))  # a void in another process of the same `serve --workers`
    assert here.body(1, "test", "calc-a") is None and here.replay(1, "test", "key-a", b"raw") is None
    here.remember(1, "test", "calc-a", '{"id":"calc-a","status":"succeeded"}')
    child = os.fork()
    if child == 0:  # a forked worker voids
        RecentCalculations(10).forget_ids(("calc-c",))
        os._exit(0)
    assert os.waitpid(child, 0)[1] == 0
    assert here.body(1, "test", "calc-a") is None


def test_a_replacement_whose_record_is_voided_meanwhile_stores_nothing(client, acme, monkeypatch):
    from emissions import models, voids
    old = calculate(client, acme, "a")
    used, rows = usage(acme), rollup_rows(acme)
    checked = voids.replaced

    def voided_after_the_check(*args):
        record = checked(*args)  # then another request voids it, before this write commits
        Calculation.update(voided_at=models.utcnow(), void_reason="elsewhere").where(
            Calculation.id == record.id).execute()
        return record

    monkeypatch.setattr(voids, "replaced", voided_after_the_check)
    refused = client.post_json("/v1/emissions/logistics", _logistics(replaces=old["id"]), headers=acme.headers("b"),
                               status=409)
    assert refused.json["error"]["code"] == "ALREADY_VOIDED"
    assert Calculation.select().count() == 1 and usage(acme) == used and rollup_rows(acme) == rows
    assert WebhookEvent.select().where(WebhookEvent.type == "calculation.voided").count() == 0


def test_a_void_is_reads_then_one_transaction(client, acme, statements):
    created = calculate(client, acme, "a")
    with statements as sent:
        void(client, acme, "calculations", created["id"], status=200)
    begin = sent.index("BEGIN")
    # Before: the key's (unless cached), the record, the key among the calculations' and the shipments'
    # voids, the record's events.
    assert set(sent[:begin]) == {"SELECT"} and 4 <= begin <= 5
    lock = ["SELECT"] if "postgres" in client.app.settings.database_url else []  # the customer, FOR KEY SHARE
    # The record, the body its skipped calculation.succeeded event keeps, the rollup row, the day and month
    # rows; the organization's day row; the empty period rows, the rollup row's edges, the empty rollup rows,
    # the organization's empty day rows; the calculation.voided event.
    assert sent[begin:] == ["BEGIN", *lock, "UPDATE", "UPDATE", "UPDATE", "UPDATE", "UPDATE", "INSERT", "DELETE",
                            "UPDATE", "DELETE", "DELETE", "INSERT", "COMMIT"]


def test_a_retry_of_the_creating_post_after_a_void_answers_the_record_as_it_now_is(client, acme):
    """docs/api.md, "Corrections": one stored body serves every read, the creating POST's replay too."""
    from conftest import post_calculation

    first = post_calculation(client, acme, "created-then-voided", status=201)
    voided = client.post_json(f"/v1/calculations/{first.json['id']}/void", {"reason": "Booked twice"},
                              headers=acme.headers("the-void"), status=200)
    again = post_calculation(client, acme, "created-then-voided", status=200)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.body == voided.body and again.json["status"] == "voided"
