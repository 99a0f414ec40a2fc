"""emissions.testing and its pytest fixture: the service inside an integrator's tests, with the same
contract (our own contract tests, run through the sandbox), no live key and no network; and the
example of docs/testing.md, run as an integrator would run it."""
from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import requests
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from webtest import TestApp

from emissions import models
from emissions import testing
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.testing import Sandbox
from webhook_receiver import Receiver, documented_verify
from helpers import clean_environment, site_packages

ROOT = Path(__file__).resolve().parent.parent
TESTING_DOC = ROOT / "docs" / "testing.md"
WEBHOOKS_DOC = ROOT / "docs" / "webhooks.md"
URL = "/v1/emissions/logistics"
FACTOR = "desnz-2025-road-hgv-diesel-average-laden"


def shipment(**overrides) -> dict:
    body = {
        "customer_reference": "demo-customer", "external_reference": "shipment-1", "mode": "ROAD",
        "origin": {"code": "GBLON", "label": "London", "country": "GB"},
        "destination": {"code": "GBMNC", "label": "Manchester", "country": "GB"},
        "cargo": {"value": 12.5, "unit": "tonne"}, "distance": {"value": 320, "unit": "km"},
        "activity_date": "2026-01-15", "factor_reference": FACTOR,
    }
    body.update(overrides)
    return body


@pytest.fixture
def client(emissions_sandbox) -> TestApp:
    return TestApp(emissions_sandbox.app)


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_int == status
    error = response.json["error"]
    assert error["code"] == code
    assert error["message"]
    assert error["request_id"] == response.headers["X-Request-Id"]
    return error


# --- what a sandbox holds ---------------------------------------------------------------------------

def test_a_sandbox_serves_the_library_its_customer_and_a_test_key_of_every_scope(emissions_sandbox, client):
    assert emissions_sandbox.key.startswith("service_test_")
    customer = client.get("/v1/customers/demo-customer/emissions", headers=emissions_sandbox.headers(), status=200)
    assert customer.json["name"] == "Demo Customer Ltd"
    assert customer.json["analytics"]["calculation_count"] == 0
    created = client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    assert created.json["factor"]["source"].startswith("DESNZ")  # the shipped library
    client.get(f"/v1/calculations/{created.json['id']}", headers=emissions_sandbox.headers(), status=200)


def test_added_customers_and_narrower_keys_behave_as_in_production(emissions_sandbox, client):
    assert emissions_sandbox.add_customer("acct-42", name="Northwind Ltd", country="gb") == "acct-42"
    calculate_only = emissions_sandbox.add_key(["emissions:calculate"])
    client.post_json(URL, shipment(customer_reference="acct-42"),
                     headers=emissions_sandbox.headers("k1", key=calculate_only), status=201)
    refused = client.get("/v1/customers/acct-42", headers=emissions_sandbox.headers(key=calculate_only), status=403)
    assert_envelope(refused, 403, "INSUFFICIENT_SCOPE")
    read = client.get("/v1/customers/acct-42", headers=emissions_sandbox.headers(), status=200)
    assert read.json == {"reference": "acct-42", "name": "Northwind Ltd", "status": "active", "country_code": "GB",
                         "analytics": None}


def test_a_customer_the_service_refuses_is_a_value_error_naming_the_field(emissions_sandbox):
    with pytest.raises(ValueError, match="already exists"):
        emissions_sandbox.add_customer("demo-customer")
    with pytest.raises(ValueError, match="reference"):
        emissions_sandbox.add_customer("bad reference\n")


# --- the same contract: our own contract tests, through the sandbox -----------------------------

@pytest.mark.parametrize("body, status, field", [
    (b"{not json", 400, None),
    (json.dumps(shipment(cargo={"value": -1, "unit": "tonne"})).encode(), 422, "cargo.value"),
    (json.dumps({k: v for k, v in shipment().items() if k != "mode"}).encode(), 422, "mode"),
])
def test_bad_input_is_the_documented_error_envelope(emissions_sandbox, client, body, status, field):
    response = client.post(URL, body, headers={**emissions_sandbox.headers("k1"), "Content-Type": "application/json"},
                           status="*")
    error = assert_envelope(response, status, "INVALID_REQUEST")
    if field is not None:
        assert field in [detail["field"] for detail in error["details"]]
    assert emissions_sandbox.events() == []


def test_a_factor_that_does_not_apply_is_422_calculation_failed_with_its_event(emissions_sandbox, client):
    response = client.post_json(URL, shipment(mode="SEA"), headers=emissions_sandbox.headers("k1"), status=422)
    error = assert_envelope(response, 422, "CALCULATION_FAILED")
    (event,) = emissions_sandbox.events()
    assert event.type == "calculation.failed"
    assert event.payload["data"]["error"]["request_id"] == error["request_id"]


def test_an_identical_retry_is_a_replay_of_the_same_bytes_with_no_second_event(emissions_sandbox, client):
    first = client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    assert first.headers["Idempotent-Replayed"] == "false"
    replay = client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=200)
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.body == first.body
    assert [event.type for event in emissions_sandbox.events()] == ["calculation.succeeded"]


def test_the_same_key_with_another_payload_is_409(emissions_sandbox, client):
    client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    response = client.post_json(URL, shipment(distance={"value": 321, "unit": "km"}),
                                headers=emissions_sandbox.headers("k1"), status=409)
    assert_envelope(response, 409, "IDEMPOTENCY_KEY_REUSED")


def test_customer_analytics_count_each_calculation_once(emissions_sandbox, client):
    client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=200)
    client.post_json(URL, shipment(external_reference="shipment-2", business_context="downstream",
                                   cargo={"value": 1, "unit": "tonne"}, distance={"value": 100, "unit": "km"}),
                     headers=emissions_sandbox.headers("k2"), status=201)
    analytics = client.get("/v1/customers/demo-customer/emissions", headers=emissions_sandbox.headers()).json["analytics"]
    assert analytics["calculation_count"] == 2
    assert analytics["activity"] == {"value": 4100, "unit": "tkm"}
    assert sorted(analytics["by_business_context"]) == ["downstream", "upstream"]
    assert analytics["by_business_context"]["upstream"]["emissions"]["value"] == 500.88


def test_another_organization_s_calculation_is_the_same_404_as_an_unknown_one(emissions_sandbox, client):
    created = client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    other = testing._create_organization("globex", "Globex")
    other_key = testing._create_test_key(other, list(testing.ALL_SCOPES), "globex", None)
    theirs = client.get(f"/v1/calculations/{created.json['id']}", headers=emissions_sandbox.headers(key=other_key),
                        status=404)
    unknown = client.get("/v1/calculations/00000000-0000-4000-8000-000000000000",
                         headers=emissions_sandbox.headers(key=other_key), status=404)
    assert_envelope(theirs, 404, "INVALID_REQUEST")
    assert {**theirs.json["error"], "request_id": None} == {**unknown.json["error"], "request_id": None}
    client.get("/v1/customers/demo-customer", headers=emissions_sandbox.headers(key=other_key), status=404)


def test_events_verify_with_the_receiver_of_the_webhooks_document(emissions_sandbox, client):
    created = client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    verify = documented_verify()
    (event,) = emissions_sandbox.events("calculation.succeeded")
    assert verify(emissions_sandbox.webhook_secret, event.headers, event.body) == event.id
    assert event.payload["data"] == created.json
    assert emissions_sandbox.webhook_secret.startswith("whsec_")
    with pytest.raises(ValueError, match="signature does not match"):
        verify(emissions_sandbox.webhook_secret, event.headers, event.body.replace(b"500.88", b"5.88"))
    with pytest.raises(ValueError, match="signature does not match"):
        verify("whsec_" + "x" * 32, event.headers, event.body)


def test_an_event_is_what_the_deliverer_sends_but_for_the_moment_it_is_signed(emissions_sandbox, client):
    """The sandbox never delivers; here the test itself points the endpoint at a receiver and runs
    the service's deliverer once, to compare what arrives with what events() hands over."""
    client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    receiver = Receiver()
    try:
        organization = models.Organization.get(models.Organization.slug == "sandbox")
        webhook_endpoints.set_endpoint(organization.id, "test", receiver.url, actor="test", allow_private_test=True)
        (event,) = emissions_sandbox.events()
        deliverer = webhook_delivery.Deliverer(emissions_sandbox.config)
        try:
            assert deliverer.run_once()["succeeded"] == 1
        finally:
            deliverer.close()
        (received,) = receiver.received
    finally:
        receiver.close()
    assert received.body == event.body
    sent = {name: received.headers[name] for name in event.headers}
    moment = ("X-Service-Webhook-Timestamp", "X-Service-Webhook-Signature")
    assert {name: value for name, value in sent.items() if name not in moment} == \
           {name: value for name, value in event.headers.items() if name not in moment}
    verify = documented_verify()
    assert verify(emissions_sandbox.webhook_secret, sent, received.body) == event.id


# --- no live key, no network --------------------------------------------------------------------

def test_the_sandbox_has_only_test_keys_and_refuses_to_make_a_live_one(emissions_sandbox):
    emissions_sandbox.add_key(["emissions:read"])
    with pytest.raises(ValueError, match="test keys only"):
        emissions_sandbox.add_key(environment="live")
    environments = {key.environment for key in models.ApiKey.select()}
    assert environments == {"test"}


def test_events_stay_in_the_outbox_and_no_delivery_job_runs(emissions_sandbox, client):
    client.post_json(URL, shipment(), headers=emissions_sandbox.headers("k1"), status=201)
    client.post_json(URL, shipment(mode="AIR"), headers=emissions_sandbox.headers("k2"), status=422)
    assert [event.type for event in emissions_sandbox.events()] == ["calculation.succeeded", "calculation.failed"]
    assert {row.delivery_status for row in models.WebhookEvent.select()} == {"pending"}
    assert models.WebhookAttempt.select().count() == 0
    (endpoint,) = models.WebhookEndpoint.select()
    assert endpoint.url == "https://receiver.invalid/webhooks"
    running = [thread.name for thread in threading.enumerate()]
    assert "APScheduler" not in running and not any(name.startswith("webhook-send") for name in running)


def test_serve_answers_on_a_loopback_url_and_stops(emissions_sandbox):
    with emissions_sandbox.serve() as base_url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
        answer = requests.post(f"{base_url}{URL}", json=shipment(), headers=emissions_sandbox.headers("k1"), timeout=30)
        assert answer.status_code == 201, answer.text
        assert answer.json()["activity"] == {"value": 4000, "unit": "tkm"}
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base_url}/healthz", timeout=5)


def test_one_sandbox_at_a_time_and_close_removes_its_directory():
    with Sandbox(customer_reference="acct-7", customer_name="Seven") as first:
        directory = first._directory
        assert directory.exists()
        with pytest.raises(RuntimeError, match="another Sandbox"):
            Sandbox()
        customer = TestApp(first.app).get("/v1/customers/acct-7", headers=first.headers()).json
        assert customer["name"] == "Seven"
    assert not directory.exists()
    with Sandbox() as second:
        assert TestApp(second.app).get("/v1/customers/demo-customer", headers=second.headers()).status_int == 200


def test_a_sandbox_that_cannot_be_made_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp makes the sandbox's directory
    with pytest.raises(ValueError, match="reference"):
        Sandbox(customer_reference="bad reference\n")
    assert list(tmp_path.iterdir()) == []
    with Sandbox() as sandbox:  # and it is not counted as the open one
        assert sandbox._directory.parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_the_database_url_cannot_be_chosen_and_settings_reach_the_service():
    with pytest.raises(ValueError, match="database_url"):
        Sandbox(database_url="sqlite:///elsewhere.sqlite3")
    with Sandbox(rate_limit_per_second=0) as sandbox:
        assert sandbox.config.rate_limit_per_second == 0
        assert sandbox.app.settings is sandbox.config


# --- the pytest plugin --------------------------------------------------------------------------

def test_the_plugin_is_a_pytest11_entry_point_of_the_distribution():
    (entry_point,) = [entry for entry in importlib.metadata.distribution("emissions-service").entry_points
                      if entry.group == "pytest11"]
    assert (entry_point.name, entry_point.value) == ("emissions", "emissions.pytest_plugin")


def test_loading_the_plugin_imports_nothing_of_the_service():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, emissions.pytest_plugin; "
                               "print(sorted(name for name in sys.modules if name.split('.')[0] in "
                               "('emissions', 'bottle', 'peewee', 'waitress', 'webtest')))"],
        capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.split() == ["['emissions',", "'emissions.pytest_plugin']"]


# --- the documented example, as an integrator runs it -----------------------------------------------

def documented_blocks() -> list[str]:
    """The Python blocks of docs/testing.md: the example test first, then the one without the fixture."""
    text = TESTING_DOC.read_text()
    example = text.split("\n## The example\n", 1)[1].split("\n## ", 1)[0]
    without = text.split("\n## Without the fixture, or with a URL\n", 1)[1].split("\n## ", 1)[0]
    return [re.findall(r"```python\n(.*?)```", section, re.S)[0] for section in (example, without)]


def test_the_example_copies_the_receiver_of_the_webhooks_document_as_written():
    receiver = re.search(r"```python\n(.*?)```", WEBHOOKS_DOC.read_text().split("\n## Verifying a delivery\n", 1)[1],
                         re.S).group(1)
    function = receiver[receiver.index("def verify"):]
    assert function in documented_blocks()[0]


def dependency_closure(*requirements: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions that `pip install` of these requirements would bring, with them."""
    found: dict[str, importlib.metadata.Distribution] = {}
    waiting = [Requirement(text) for text in requirements]
    while waiting:
        requirement = waiting.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = distribution = importlib.metadata.distribution(requirement.name)
        extras = {""} | requirement.extras
        for text in distribution.requires or []:
            dependency = Requirement(text)
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": extra}) for extra in extras):
                waiting.append(dependency)
    return list(found.values())


@pytest.fixture(scope="module")
def fresh_environment(wheel, tmp_path_factory) -> Path:  # noqa: F811 (the wheel fixture)
    """A venv without system site-packages holding the wheel (installed by pip, not editable) and
    exactly the distributions `pip install emissions-service pytest WebTest` brings, linked from
    this environment (the same versions; downloading them again would only test the network)."""
    venv = tmp_path_factory.mktemp("integrator") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = site_packages(venv)
    for distribution in dependency_closure("emissions-service", "pytest", "WebTest", "pip"):
        if distribution.metadata["Name"] == "emissions-service":
            continue  # this tree, installed editable: the wheel is installed below instead
        assert distribution.files is not None, distribution.metadata["Name"]
        top_level = {file.parts[0] for file in distribution.files if file.parts[0] not in ("..", "__pycache__")}
        for name in top_level - {name for name in top_level if name.endswith(".pth")}:
            if not (target / name).exists():
                (target / name).symlink_to(Path(distribution.locate_file(name)))
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, env=clean_environment(), timeout=300)
    assert done.returncode == 0, done.stderr
    return venv / "bin" / "python"


def test_the_documented_example_passes_in_a_fresh_environment(fresh_environment, tmp_path):
    """docs/testing.md's example (and its fixture-less one), written as they are into an empty
    directory and run there by pytest in a fresh venv that holds the installed wheel, pytest,
    WebTest and their dependencies, nothing else: not this tree, its conftest.py or its setup.cfg.

    The wheel is built as tests/test_packaging.py builds it; the venv links the dependencies from
    this environment instead of downloading them (pip install --no-index of each would take
    minutes and check only pip), so what is tested is the installed service and its entry point.
    """
    example, without_fixture = documented_blocks()
    (tmp_path / "test_integration.py").write_text(example)
    (tmp_path / "test_module_sandbox.py").write_text(without_fixture)
    where = subprocess.run([str(fresh_environment), "-c", "import emissions; print(emissions.__file__)"],
                           cwd=tmp_path, env=clean_environment(), capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(fresh_environment.parent.parent), where.stdout + where.stderr
    run = subprocess.run([str(fresh_environment), "-m", "pytest", "-p", "no:cacheprovider", "test_integration.py",
                          "test_module_sandbox.py"],
                         cwd=tmp_path, env=clean_environment(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"\b2 passed\b", run.stdout), run.stdout
