"""Webhook endpoints, URL rules, signing, verification, the golden vector and the webhook CLI."""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
import socket
import time

import pytest

from emissions import cli
from emissions import models
from emissions import scheduler
from emissions import schemas
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.webhooks import signing as webhook_signing
from emissions.models import AuditEvent, WebhookEndpoint, WebhookEvent, utcnow
from test_workspace import acme_user, csrf_token, sign_in  # noqa: F401 (acme_user: a fixture)
from webhook_receiver import WEBHOOKS_DOC, documented_verify

GOLDEN_SECRET = "whsec_7mQ2pYc4VxN8rT1kLs9bWd3HfJ6gZa0E"
GOLDEN_ID = "9f8c2b1e-4d3a-4b6f-8e21-5c7a9d0e1f23"
GOLDEN_TIMESTAMP = "1767225600"
GOLDEN_BODY = ('{"id":"9f8c2b1e-4d3a-4b6f-8e21-5c7a9d0e1f23","type":"calculation.succeeded",'
               '"created_at":"2026-01-01T00:00:00.000Z","environment":"test",'
               '"data":{"external_reference":"shipment-1"}}')
GOLDEN_SIGNATURE = "v1=6dc134afc580bf8c313bd217d3d8706194bea2e188380de8606722b52c8a1bd5"


def golden_headers(signature: str = GOLDEN_SIGNATURE, timestamp: str = GOLDEN_TIMESTAMP) -> dict:
    return {"X-Service-Webhook-Id": GOLDEN_ID, "X-Service-Webhook-Timestamp": timestamp,
            "X-Service-Webhook-Signature": signature}


# --- signing, the golden vector, verification -------------------------------------------------

def test_golden_vector_signs_to_the_documented_signature():
    assert webhook_signing.sign(GOLDEN_SECRET, GOLDEN_ID, GOLDEN_TIMESTAMP, GOLDEN_BODY.encode()) == GOLDEN_SIGNATURE
    by_hand = hmac.new(GOLDEN_SECRET.encode(), f"{GOLDEN_ID}.{GOLDEN_TIMESTAMP}.{GOLDEN_BODY}".encode(),
                       hashlib.sha256).hexdigest()
    assert GOLDEN_SIGNATURE == "v1=" + by_hand


def test_the_webhooks_doc_gives_the_golden_vector_verbatim():
    text = WEBHOOKS_DOC.read_text()
    for value in (GOLDEN_SECRET, GOLDEN_ID, GOLDEN_TIMESTAMP, GOLDEN_BODY, GOLDEN_SIGNATURE):
        assert value in text


def test_the_documented_receiver_snippet_accepts_the_golden_vector_and_rejects_a_changed_body():
    verify = documented_verify()
    forever = 10 ** 12  # the vector's timestamp is in the past
    assert verify(GOLDEN_SECRET, golden_headers(), GOLDEN_BODY.encode(), tolerance=forever) == GOLDEN_ID
    with pytest.raises(ValueError):
        verify(GOLDEN_SECRET, golden_headers(), GOLDEN_BODY.encode() + b" ", tolerance=forever)


def test_verify_returns_the_event_id_of_a_fresh_delivery_with_any_header_case():
    headers = {name.lower(): value for name, value in golden_headers().items()}
    now = int(GOLDEN_TIMESTAMP) + 299
    assert webhook_signing.verify(GOLDEN_SECRET, headers, GOLDEN_BODY.encode(), now=now) == GOLDEN_ID


@pytest.mark.parametrize("secret, headers, body, now, reason", [
    ("whsec_other", golden_headers(), GOLDEN_BODY, 0, "signature does not match"),
    (GOLDEN_SECRET, golden_headers(), GOLDEN_BODY.replace("shipment-1", "shipment-2"), 0,
     "signature does not match"),
    (GOLDEN_SECRET, golden_headers(signature="v1=" + "0" * 64), GOLDEN_BODY, 0, "signature does not match"),
    (GOLDEN_SECRET, golden_headers(signature=GOLDEN_SIGNATURE.upper()), GOLDEN_BODY, 0,
     "signature does not match"),
    (GOLDEN_SECRET, golden_headers(timestamp="1767225601"), GOLDEN_BODY, 0, "signature does not match"),
    (GOLDEN_SECRET, golden_headers(), GOLDEN_BODY, 301, "outside the tolerance"),
    (GOLDEN_SECRET, golden_headers(), GOLDEN_BODY, -301, "outside the tolerance"),
    (GOLDEN_SECRET, golden_headers(timestamp="17672256OO"), GOLDEN_BODY, 0, "not Unix seconds"),
    (GOLDEN_SECRET, {"X-Service-Webhook-Id": GOLDEN_ID}, GOLDEN_BODY, 0, "missing"),
])
def test_verify_refuses_a_forged_stale_or_incomplete_delivery(secret, headers, body, now, reason):
    with pytest.raises(webhook_signing.InvalidSignature, match=reason):
        webhook_signing.verify(secret, headers, body.encode(), now=int(GOLDEN_TIMESTAMP) + now)


HOSTILE_HEADERS = [
    pytest.param(golden_headers(timestamp="\u00b2"), id="superscript-two-timestamp"),
    pytest.param(golden_headers(timestamp="\u0661\u0667\u0666\u0667\u0662\u0662\u0665\u0666\u0660\u0660"),
                 id="arabic-indic-digits-timestamp"),
    pytest.param(golden_headers(timestamp="9" * 5000), id="five-thousand-digit-timestamp"),
    pytest.param(golden_headers(timestamp=" " + GOLDEN_TIMESTAMP), id="padded-timestamp"),
    pytest.param(golden_headers(signature="v1=\u00e9" * 20), id="non-ascii-signature"),
    pytest.param({**golden_headers(), "X-Service-Webhook-Id": "\u00e9v\u00e9nement"}, id="non-ascii-id"),
]


@pytest.mark.parametrize("headers", HOSTILE_HEADERS)
def test_verify_answers_hostile_headers_with_invalid_signature_only(headers):
    with pytest.raises(webhook_signing.InvalidSignature):
        webhook_signing.verify(GOLDEN_SECRET, headers, GOLDEN_BODY.encode(), now=int(GOLDEN_TIMESTAMP))


@pytest.mark.parametrize("headers", HOSTILE_HEADERS)
def test_the_documented_receiver_snippet_answers_hostile_headers_with_its_own_value_error(headers):
    verify = documented_verify()
    with pytest.raises(ValueError, match="malformed|does not match|tolerance"):
        verify(GOLDEN_SECRET, headers, GOLDEN_BODY.encode(), tolerance=10 ** 12)


def test_signed_headers_carry_the_id_the_timestamp_and_a_v1_signature():
    headers = webhook_signing.signed_headers(GOLDEN_SECRET, GOLDEN_ID, GOLDEN_BODY.encode(), int(GOLDEN_TIMESTAMP))
    assert headers == golden_headers()
    assert re.fullmatch(r"v1=[a-f0-9]{64}", headers["X-Service-Webhook-Signature"])


# --- URL rules ------------------------------------------------------------------------------

def fake_resolver(table: dict[str, list[str]]):
    """A stand-in for DNS (unreachable from tests): host -> addresses."""
    def resolve(host, port, type=0):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (address, port)) for address in table[host]]
    return resolve


DNS = fake_resolver({
    "hooks.example.com": ["93.184.216.34"],
    "internal.example.com": ["10.1.2.3"],
    "mixed.example.com": ["93.184.216.34", "192.168.1.10"],
    "metadata.example.com": ["169.254.169.254"],
    "v6-loopback.example.com": ["::1"],
    "localhost": ["127.0.0.1", "::1"],
    "nat64.example.com": ["64:ff9b::5db8:d822"],
    "nat64-metadata.example.com": ["64:ff9b::a9fe:a9fe"],
    "sixtofour-private.example.com": ["2002:c0a8:10a::1"],
})


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/emissions",
    "https://hooks.example.com:8443/emissions?source=service",
    "https://93.184.216.34/hooks",
])
def test_live_endpoint_accepts_public_https_urls(url):
    assert webhook_endpoints.validate_url(url, "live", resolve=DNS) == url


@pytest.mark.parametrize("url, message", [
    ("http://hooks.example.com/emissions", "must use https"),
    ("https://internal.example.com/", "private"),
    ("https://mixed.example.com/", "private"),
    ("https://metadata.example.com/latest", "link-local"),
    ("https://v6-loopback.example.com/", "loopback"),
    ("https://localhost/hooks", "loopback"),
    ("https://127.0.0.1/hooks", "loopback"),
    ("https://10.0.0.1/hooks", "private"),
    ("https://[::1]/hooks", "loopback"),
    ("https://[::ffff:127.0.0.1]/hooks", "loopback"),
    ("https://0.0.0.0/hooks", "private"),
    ("https://nowhere.example.com/", "does not resolve"),
    ("https://user:password@hooks.example.com/", "credentials"),
    ("ftp://hooks.example.com/", "https://"),
    ("hooks.example.com/emissions", "https://"),
    ("https:///no-host", "no host"),
    ("https://hooks.example.com:99999/", "not valid"),
    ("https://hooks.example.com/a path", "spaces"),
    ("", "empty"),
    ("https://hooks.example.com/" + "a" * 2048, "longer than 2048"),
])
def test_live_endpoint_refuses_unsafe_or_malformed_urls(url, message):
    with pytest.raises(webhook_endpoints.WebhookError, match=message):
        webhook_endpoints.validate_url(url, "live", resolve=DNS)


@pytest.mark.parametrize("url", [
    "https://[64:ff9b::5db8:d822]/hooks",  # NAT64 of 93.184.216.34
    "https://nat64.example.com/hooks",
    "https://[2002:5db8:d822::1]/hooks",  # 6to4 of 93.184.216.34
])
def test_live_endpoint_accepts_ipv6_carrying_a_public_ipv4_address(url):
    assert webhook_endpoints.validate_url(url, "live", resolve=DNS) == url


@pytest.mark.parametrize("url, rule", [
    ("https://[::127.0.0.1]/hooks", "loopback"),  # IPv4-compatible
    ("https://[::10.0.0.1]/hooks", "private"),
    ("https://[::ffff:0:7f00:1]/", "loopback"),  # IPv4-translated (Python calls the range global)
    ("https://[::ffff:0:a9fe:a9fe]/latest", "link-local"),
    ("https://[::ffff:10.0.0.1]/", "private"),  # IPv4-mapped
    ("https://[64:ff9b::7f00:1]/hooks", "loopback"),  # NAT64, well-known prefix
    ("https://[64:ff9b::c0a8:10a]/hooks", "private"),
    ("https://nat64-metadata.example.com/latest", "link-local"),
    ("https://[64:ff9b:1::5db8:d822]/hooks", "network-specific NAT64"),  # NAT64 for one network only
    ("https://[2002:7f00:1::]/hooks", "loopback"),  # 6to4
    ("https://[2002:a9fe:a9fe::1]/hooks", "link-local"),
    ("https://sixtofour-private.example.com/", "private"),
])
@pytest.mark.parametrize("environment", ["live", "test"])
def test_endpoints_refuse_ipv6_carrying_a_private_ipv4_address_naming_the_rule(url, rule, environment):
    with pytest.raises(webhook_endpoints.WebhookError, match=f"resolves to an? {rule} address; {environment} endpoints "
                       "must be public"):
        webhook_endpoints.validate_url(url, environment, resolve=DNS)


def test_a_refusal_names_the_rule_never_the_addresses_a_name_resolves_to():
    for host, address in [("internal.example.com", "10.1.2.3"), ("metadata.example.com", "169.254.169.254"),
                          ("v6-loopback.example.com", "::1")]:
        with pytest.raises(webhook_endpoints.WebhookError) as refused:
            webhook_endpoints.validate_url(f"https://{host}/", "test", resolve=DNS)
        assert address not in str(refused.value) and "WEBHOOK_ALLOW_PRIVATE_TEST" in str(refused.value)


class PeerSocket:
    """A connected socket as far as the peer check reads it."""

    def __init__(self, address: str):
        self.address = address

    def getpeername(self):
        return (self.address, 443, 0, 0)


@pytest.mark.parametrize("peer, rule", [("::127.0.0.1", "loopback"), ("64:ff9b::7f00:1", "loopback"),
                                        ("::ffff:0:7f00:1", "loopback"), ("::ffff:0:a00:1", "private"),
                                        ("64:ff9b:1::5db8:d822", "network-specific NAT64"),
                                        ("2002:7f00:1::", "loopback")])
def test_a_live_attempt_refuses_a_connection_to_ipv6_carrying_a_private_ipv4_address(peer, rule):
    with pytest.raises(webhook_endpoints.WebhookError, match=f"the connection reached an? {rule} address; live"):
        webhook_delivery._Attempt(5, public_only=True).admit(object(), PeerSocket(peer))


def test_a_live_delivery_to_a_name_now_resolving_to_nat64_loopback_is_refused(config):
    worker = webhook_delivery.Deliverer(config.with_(webhook_timeout_seconds=0.5), resolve=fake_resolver(
        {"hooks.example.com": ["64:ff9b::7f00:1"]}))
    claim = webhook_delivery.Claim("event-1", 1, "live", "{}", 0, "token", "https://hooks.example.com/hooks", "whsec_x")
    result = worker.send(claim)
    worker.close()
    assert result.status_code is None
    assert result.error.startswith("refused: the host hooks.example.com resolves to a loopback address; live")
    assert "127.0.0.1" not in result.error and "64:ff9b" not in result.error


def test_live_endpoint_may_be_private_when_the_operator_allows_it():
    url = "https://internal.example.com/hooks"
    assert webhook_endpoints.validate_url(url, "live", allow_private_live=True, resolve=DNS) == url


@pytest.mark.parametrize("url", ["http://localhost:4000/hooks", "http://127.0.0.1:4000/hooks",
                                 "https://internal.example.com/hooks"])
def test_test_endpoint_may_be_a_local_http_sandbox_when_the_operator_allows_it(url):
    assert webhook_endpoints.validate_url(url, "test", allow_private_test=True, resolve=DNS) == url


@pytest.mark.parametrize("url, rule", [("http://localhost:4000/hooks", "loopback"),
                                       ("http://127.0.0.1:5432/", "loopback"),
                                       ("http://169.254.169.254/latest", "link-local"),
                                       ("https://internal.example.com/hooks", "private"),
                                       ("http://[::ffff:0:7f00:1]/", "loopback")])
def test_test_endpoint_on_a_private_address_is_refused_unless_the_operator_allows_it(url, rule):
    with pytest.raises(webhook_endpoints.WebhookError, match=f"resolves to an? {rule} address; test endpoints"):
        webhook_endpoints.validate_url(url, "test", resolve=DNS)
    assert webhook_endpoints.validate_url("http://hooks.example.com/x", "test", resolve=DNS) == "http://hooks.example.com/x"


# --- endpoints ------------------------------------------------------------------------------

@pytest.mark.on_both
def test_set_creates_then_replaces_the_endpoint_with_a_new_secret_each_time(acme):
    endpoint, first = webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/a", actor="test", allow_private_test=True)
    assert re.fullmatch(r"whsec_[0-9A-Za-z]{32}", first)
    endpoint.status, endpoint.disabled_reason = "disabled", "gone"
    endpoint.save()
    _, second = webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/b", actor="test", allow_private_test=True)
    stored = WebhookEndpoint.get(WebhookEndpoint.organization == acme.org.id)
    assert (stored.url, stored.secret, stored.status, stored.disabled_reason) == (
        "http://localhost:4000/b", second, "enabled", None)
    assert second != first
    assert WebhookEndpoint.select().count() == 1


@pytest.mark.on_both
def test_rotate_replaces_only_the_secret_and_remove_deletes_the_endpoint(acme):
    _, first = webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/a", actor="test", allow_private_test=True)
    endpoint, rotated = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert rotated != first and endpoint.url == "http://localhost:4000/a"
    assert (stored.secret, stored.next_secret) == (first, rotated)  # the overlap: both sign
    assert stored.overlap_ends_at - utcnow() > dt.timedelta(hours=23)
    endpoint, at_once = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test", overlap_hours=0)
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.secret, stored.next_secret, stored.overlap_ends_at) == (at_once, None, None)
    webhook_endpoints.remove_endpoint(acme.org.id, "test", actor="test")
    assert webhook_endpoints.endpoint_for(acme.org.id, "test") is None
    with pytest.raises(webhook_endpoints.WebhookError, match="no webhook endpoint"):
        webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")


@pytest.mark.on_both
def test_a_rotation_after_an_overlap_ran_out_starts_from_the_secret_that_replaced_the_old_one(acme):
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/a", actor="test", allow_private_test=True)
    _, second = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")
    WebhookEndpoint.update(overlap_ends_at=utcnow() - dt.timedelta(seconds=1)).execute()
    with pytest.raises(webhook_endpoints.WebhookError, match="no secret rotation is in its overlap"):
        webhook_endpoints.end_overlap(acme.org.id, "test", actor="test")
    _, third = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.secret, stored.next_secret) == (second, third)
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/b", actor="test", allow_private_test=True)
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.next_secret, stored.overlap_ends_at) == (None, None)  # a new secret ends the rotation


@pytest.mark.on_both
def test_events_are_skipped_without_an_enabled_endpoint_and_pending_with_one(client, acme):
    from conftest import post_calculation

    post_calculation(client, acme, "no-endpoint", status=201)
    webhook_endpoints.set_endpoint(acme.org.id, "live", "https://93.184.216.34/hooks", actor="test")  # another environment
    post_calculation(client, acme, "live-endpoint-only", status=201, external_reference="s-2")
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://localhost:4000/hooks", actor="test", allow_private_test=True)
    post_calculation(client, acme, "with-endpoint", status=201, external_reference="s-3")
    statuses = [event.delivery_status for event in WebhookEvent.select().order_by(WebhookEvent.created_at)]
    assert sorted(statuses) == ["pending", "skipped", "skipped"]
    assert WebhookEvent.get(WebhookEvent.delivery_status == "pending").payload.count('"s-3"') == 1


def test_a_test_event_s_data_is_a_calculation_as_the_api_answers_it(acme):
    """Built by the one calculation view: its factor's lineage has every field a real calculation's has."""
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test",
                                   allow_private_test=True)
    event = webhook_events.send_test_event(acme.org.id, "test", actor="test")
    data = json.loads(event.payload)["data"]
    assert data.pop("test_event") is True
    assert list(schemas.validator("Calculation").iter_errors(data)) == []
    real = models.Factor.get(models.Factor.reference == "road-default")
    assert list(data["factor"]) == list(real.lineage()) and data["factor"]["radiative_forcing"] is None
    assert (data["external_reference"], data["customer"], data["emissions"]) == (
        "test-event", {"reference": "test-customer"}, {"value": 0, "unit": "kgCO2e"})


# --- the CLI --------------------------------------------------------------------------------

def run_cli(monkeypatch, capsys, config, *argv) -> tuple[int, str, str]:
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_TEST", str(config.webhook_allow_private_test).lower())
    models.db.close()
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("url, rule", [("http://127.0.0.1:5432/", "loopback"), ("http://169.254.169.254/", "link-local"),
                                       ("http://[::ffff:0:7f00:1]/", "loopback"), ("http://10.1.2.3/", "private")])
def test_cli_set_refuses_a_private_test_endpoint_unless_the_operator_allows_it(monkeypatch, capsys, config, acme,
                                                                               url, rule):
    code, out, err = run_cli(monkeypatch, capsys, config.with_(webhook_allow_private_test=False), "webhook", "set",
                             "--org", "acme", "--env", "test", "--url", url)
    assert code == 1 and out == ""
    assert f"resolves to a {rule} address; test endpoints must be public" in err and "WEBHOOK_ALLOW_PRIVATE_TEST" in err
    assert webhook_endpoints.endpoint_for(acme.org.id, "test") is None
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "set", "--org", "acme", "--env", "test",
                             "--url", url)
    assert (code, err) == (0, "")
    assert webhook_endpoints.endpoint_for(acme.org.id, "test").url == url


@pytest.mark.on_both
def test_cli_set_prints_the_url_and_the_secret_once(monkeypatch, capsys, config, acme):
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "set", "--org", "acme", "--env", "test",
                             "--url", "http://localhost:4000/hooks", "--json")
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert set(printed) == {"url", "secret", "signature"} and printed["url"] == "http://localhost:4000/hooks"
    assert printed["signature"] == "service"
    assert webhook_endpoints.endpoint_for(acme.org.id, "test").secret == printed["secret"]

    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "show", "--org", "acme", "--env", "test",
                           "--json")
    assert code == 0 and printed["secret"] not in out
    assert json.loads(out)["status"] == "enabled"

    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "rotate", "--org", "acme", "--env", "test",
                           "--json")
    rotated = json.loads(out)
    assert code == 0 and rotated["secret"] != printed["secret"]
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.secret, stored.next_secret) == (printed["secret"], rotated["secret"])
    assert rotated["overlap_ends_at"] == models.isoformat(stored.overlap_ends_at)
    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "show", "--org", "acme", "--env", "test", "--json")
    assert json.loads(out)["overlap_ends_at"] == rotated["overlap_ends_at"]

    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "end-overlap", "--org", "acme", "--env", "test")
    assert code == 0 and "the new secret is now the only one" in out
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.secret, stored.next_secret, stored.overlap_ends_at) == (rotated["secret"], None, None)
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "end-overlap", "--org", "acme", "--env", "test")
    assert code == 1 and "no secret rotation is in its overlap for test" in err
    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "rotate", "--org", "acme", "--env", "test",
                           "--overlap", "0", "--json")
    at_once = json.loads(out)
    assert code == 0 and at_once["overlap_ends_at"] is None
    assert webhook_endpoints.endpoint_for(acme.org.id, "test").secret == at_once["secret"]
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "rotate", "--org", "acme", "--env", "test",
                             "--overlap", "721")
    assert code == 1 and "the overlap must be from 0 to 720 hours" in err
    actions = [event.action for event in AuditEvent.select().where(AuditEvent.organization == acme.org.id)
               .order_by(AuditEvent.id)]
    assert actions == ["endpoint.set", "endpoint.rotated", "endpoint.overlap_ended", "endpoint.rotated"]

    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "remove", "--org", "acme", "--env", "test",
                           "--json")
    assert (code, json.loads(out)) == (0, {"url": "http://localhost:4000/hooks", "removed": True})


@pytest.mark.parametrize("argv, message", [
    (["webhook", "set", "--org", "acme", "--env", "live", "--url", "http://hooks.example.com/"],
     "a live endpoint must use https"),
    (["webhook", "set", "--org", "acme", "--env", "live", "--url", "https://127.0.0.1/hooks"],
     "loopback"),
    (["webhook", "set", "--org", "nobody", "--env", "test", "--url", "http://localhost/"],
     "no organization with slug nobody"),
    (["webhook", "rotate", "--org", "acme", "--env", "test"], "no webhook endpoint is set for test"),
    (["webhook", "remove", "--org", "acme", "--env", "live"], "no webhook endpoint is set for live"),
    (["webhook", "show", "--org", "acme", "--env", "live"], "no webhook endpoint is set"),
    (["webhook", "redeliver", "00000000-0000-0000-0000-000000000000"], "no webhook event with id"),
    (["webhook", "deliveries", "--limit", "0"], "--limit must be at least 1"),
])
def test_cli_refusals_exit_1_with_one_line(monkeypatch, capsys, config, acme, argv, message):
    code, out, err = run_cli(monkeypatch, capsys, config, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and message in err and err.startswith("emissions: ")


def test_cli_live_private_url_is_accepted_when_the_operator_allows_it(monkeypatch, capsys, config, acme):
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_LIVE", "true")
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "set", "--org", "acme", "--env", "live",
                             "--url", "https://127.0.0.1:8443/hooks", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["url"] == "https://127.0.0.1:8443/hooks"


def test_timestamps_in_signed_headers_are_whole_unix_seconds():
    now = int(time.time())
    headers = webhook_signing.signed_headers("whsec_x", GOLDEN_ID, b"{}", now)
    assert headers["X-Service-Webhook-Timestamp"] == str(now)
    assert webhook_signing.verify("whsec_x", headers, b"{}") == GOLDEN_ID


def test_cli_sets_and_shows_the_standard_webhooks_signature(monkeypatch, capsys, config, acme):
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "set", "--org", "acme", "--env", "test",
                             "--url", "http://localhost:4000/hooks", "--signature", "standard", "--json")
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert printed["signature"] == "standard" and re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", printed["secret"])
    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "show", "--org", "acme", "--env", "test", "--json")
    assert json.loads(out)["signature"] == "standard"
    code, out, _ = run_cli(monkeypatch, capsys, config, "webhook", "rotate", "--org", "acme", "--env", "test")
    assert code == 0 and "a second webhook-signature" in out
    code, out, err = run_cli(monkeypatch, capsys, config, "webhook", "set", "--org", "acme", "--env", "test",
                             "--url", "http://localhost:4000/hooks", "--signature", "svix")
    assert code == 2 and "invalid choice: 'svix'" in err


def test_the_workspace_sets_and_shows_the_signature_scheme(client, acme_user):
    sign_in(client)
    page = client.get("/workspace/webhooks")
    assert '<option value="service" selected>' in page.text and '<option value="standard">' in page.text
    shown = client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": "set", "signature": "standard",
                                                "url": "http://127.0.0.1:9/hook"}, status=303).follow()
    secret = re.search(r'<code id="new-secret">(whsec_[^<]+)</code>', shown.text).group(1)
    assert "<code>webhook-signature</code> (Standard Webhooks)" in shown.text
    stored = webhook_endpoints.endpoint_for(acme_user.id, "test")
    assert (stored.signature, stored.secret) == ("standard", secret)
    page = client.get("/workspace/webhooks")
    assert "Signed the Standard Webhooks way" in page.text and '<option value="standard" selected>' in page.text
    refused = client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": "set", "signature": "svix",
                                                  "url": "http://127.0.0.1:9/hook"}, status=400)
    assert "Not changed: the signature must be service or standard." in refused.text


def audit_rows(actor: str) -> list[tuple]:
    """The actor's audit events, oldest first, as (action, target, environment, details)."""
    return [(event.action, event.target, event.environment, json.loads(event.details or "null"))
            for event in AuditEvent.select().where(AuditEvent.actor == actor).order_by(AuditEvent.id)]


def test_redeliver_and_prune_from_the_cli_are_audited(monkeypatch, capsys, config, acme):
    """Issue 33: every write of the webhook commands has an actor and an audit event."""
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
    WebhookEvent.update(delivery_status="failed", created_at=utcnow() - dt.timedelta(days=40)).execute()
    code, _, err = run_cli(monkeypatch, capsys, config, "webhook", "redeliver", event.id)
    assert (code, err) == (0, "")
    WebhookEvent.update(delivery_status="failed").execute()
    since = models.isoformat(utcnow() - dt.timedelta(days=41))
    code, _, _ = run_cli(monkeypatch, capsys, config, "webhook", "redeliver", "--since", since, "--status", "failed",
                         "--org", "acme", "--env", "test")
    assert code == 0
    WebhookEvent.update(delivery_status="succeeded").execute()
    code, _, _ = run_cli(monkeypatch, capsys, config, "prune", "--older-than", "30")
    assert code == 0 and WebhookEvent.select().count() == 0
    code, _, _ = run_cli(monkeypatch, capsys, config, "webhook", "redeliver", "no-such-event")
    assert code == 1  # a failed command records nothing
    rows = audit_rows("cli")
    assert rows[:2] == [("event.redelivered", event.id, "test", {"delivery_status": "failed"}),
                        ("event.redelivered_since", f"since {since}", "test", {"statuses": ["failed"], "queued": 1})]
    [(action, target, environment, details)] = rows[2:]
    assert (action, environment, details) == ("event.pruned", None, {"older_than_days": 30, "events": 1, "attempts": 0})
    assert target.startswith("before ")


def test_redeliver_and_test_events_from_the_workspace_and_the_retention_prune_are_audited(client, acme_user):
    webhook_endpoints.set_endpoint(acme_user.id, "test", "http://127.0.0.1:9/hook", actor="test",
                                   allow_private_test=True)
    sign_in(client)
    page = client.get("/workspace/webhooks")
    client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": "test"}, status=303)
    test_event = WebhookEvent.get()
    WebhookEvent.update(delivery_status="succeeded").execute()
    client.post(f"/workspace/webhooks/events/{test_event.id}/redeliver", {"csrf": csrf_token(page)}, status=303)
    assert audit_rows("user:ops@acme.example") == [
        ("event.test_sent", test_event.id, "test", None),
        ("event.redelivered", test_event.id, "test", {"delivery_status": "succeeded"})]

    scheduler.prune_job(0)()
    assert [row[0] for row in audit_rows(scheduler.SCHEDULER_ACTOR)] == ["event.pruned"]
