"""The calculations a process remembers: never another tenant's, never more than asked, never stale."""
from __future__ import annotations

import json
import uuid

import pytest
from webtest import TestApp

from emissions import jsoncodec
from emissions.app import create_app
from emissions.recent import RecentCalculations
from conftest import logistics_body, make_key, post_calculation

pytestmark = pytest.mark.on_both


def test_a_remembered_calculation_is_still_a_404_for_another_organization_or_environment(client, acme, globex,
                                                                                        secret):
    calculation_id = post_calculation(client, acme, "remembered", status=201).json["id"]
    client.get(f"/v1/calculations/{calculation_id}", headers=acme.headers(), status=200)
    live = make_key(acme.org, secret, environment="live")
    unknown = client.get(f"/v1/calculations/{uuid.uuid4()}", headers=globex.headers(), status=404).json["error"]
    for headers in (globex.headers(), {"Authorization": f"Bearer {live}"}):
        error = client.get(f"/v1/calculations/{calculation_id}", headers=headers, status=404).json["error"]
        assert (error["code"], error["message"]) == (unknown["code"], unknown["message"])


def test_a_remembered_key_is_not_shared_with_another_organization(client, acme, globex):
    first = post_calculation(client, acme, "shared-key", status=201).json
    other = post_calculation(client, globex, "shared-key", status=201).json
    assert other["id"] != first["id"]
    assert post_calculation(client, globex, "shared-key", status=200).json == other


def test_a_changed_payload_under_a_remembered_key_is_409(client, acme):
    post_calculation(client, acme, "remembered-409", status=201)
    response = post_calculation(client, acme, "remembered-409", status=409, distance={"value": 99, "unit": "km"})
    assert response.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_what_one_instance_made_another_reads_and_replays_from_the_database(client, config, acme):
    created = post_calculation(client, acme, "made-elsewhere", status=201)
    other = TestApp(create_app(config))  # its own memory: it never saw the calculation
    assert other.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers(), status=200).body == created.body
    replay = post_calculation(other, acme, "made-elsewhere", status=200)
    assert replay.body == created.body
    assert replay.headers["Idempotent-Replayed"] == "true"


def remember(recent: RecentCalculations, number: int) -> None:
    recent.remember(1, "test", f"calc-{number}", f"body-{number}", f"key-{number}", f"bytes-{number}".encode())


def test_past_its_size_the_oldest_are_forgotten_first():
    recent = RecentCalculations(size=2)
    for number in range(3):
        remember(recent, number)
    assert recent.body(1, "test", "calc-0") is None
    assert recent.replay(1, "test", "key-0", b"bytes-0") is None
    assert [recent.body(1, "test", f"calc-{n}") for n in (1, 2)] == ["body-1", "body-2"]
    assert recent.replay(1, "test", "key-2", b"bytes-2") == "body-2"


def test_only_the_very_bytes_remembered_with_a_key_replay_from_memory():
    recent = RecentCalculations(size=10)
    remember(recent, 1)
    assert recent.replay(1, "test", "key-1", b"bytes-1 ") is None
    assert recent.replay(1, "test", "key-2", b"bytes-1") is None
    assert recent.replay(2, "test", "key-1", b"bytes-1") is None
    assert recent.replay(1, "live", "key-1", b"bytes-1") is None


def test_size_zero_remembers_nothing():
    recent = RecentCalculations(size=0)
    remember(recent, 1)
    assert recent.body(1, "test", "calc-1") is None
    assert recent.replay(1, "test", "key-1", b"bytes-1") is None


def post_bytes(client, persona, raw: bytes, key: str, content_type: str = "application/json"):
    return client.post("/v1/emissions/logistics", raw, headers={**persona.headers(key), "Content-Type": content_type},
                       status="*")


def test_the_same_bytes_replay_and_other_bytes_are_judged_by_their_payload(client, acme):
    raw = json.dumps(logistics_body()).encode()
    created = post_bytes(client, acme, raw, "bytes")
    assert created.status_int == 201
    for _ in range(2):  # the second replay finds the bytes remembered
        replay = post_bytes(client, acme, raw, "bytes")
        assert (replay.status_int, replay.body, replay.headers["Idempotent-Replayed"]) == (200, created.body, "true")
    reordered = json.dumps(dict(reversed(list(logistics_body().items()))), indent=2).encode()
    assert post_bytes(client, acme, reordered, "bytes").body == created.body
    changed = json.dumps(logistics_body(distance={"value": 99, "unit": "km"})).encode()
    assert post_bytes(client, acme, changed, "bytes").json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert post_bytes(client, acme, raw, "bytes").status_int == 200


def test_remembered_bytes_replay_without_being_parsed_again(client, acme, monkeypatch):
    raw = json.dumps(logistics_body()).encode()
    created = post_bytes(client, acme, raw, "bytes-unparsed")

    def parse_nothing(raw):
        raise AssertionError("parsed again")

    monkeypatch.setattr(jsoncodec, "loads", parse_nothing)
    replay = post_bytes(client, acme, raw, "bytes-unparsed")
    assert (replay.status_int, replay.body) == (200, created.body)


def test_remembered_bytes_still_need_the_json_content_type_and_their_own_key(client, acme):
    raw = json.dumps(logistics_body()).encode()
    post_bytes(client, acme, raw, "bytes-type")
    assert post_bytes(client, acme, raw, "bytes-type", content_type="text/plain").status_int == 400
    assert post_bytes(client, acme, raw, "another-key").status_int == 201
