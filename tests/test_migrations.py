"""Migrations: applied once, recorded, safe when several instances start at once; what 0002 leaves."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
from decimal import Decimal

import peewee as pw
import pytest
from webtest import TestApp

from emissions import analytics as customer_analytics
from emissions import rollups
from emissions.rollups import recount
from emissions import auth
from emissions import calculations
from emissions import jsoncodec
from emissions import migrations
from emissions import models
from emissions import store
from emissions.app import create_app
from emissions.db import bind, is_postgres, open_database
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.config import Config
from conftest import (EMISSIONS, auth_headers, logistics_body, make_customer, make_factor, make_key, make_org,
                      record_statements)
from helpers import empty_postgres_schema, plan

EVERY_MIGRATION = [path.stem for path in migrations.available()]
FIRST_MIGRATION = migrations.available()[:1]
EVERY_MIGRATION_PATH = migrations.available()


def migrated_before(stem: str, database_url: str, monkeypatch):
    """The database at database_url bound, with every migration before `stem` applied and none after."""
    database = bind(database_url)
    with monkeypatch.context() as before:
        before.setattr(migrations, "available", lambda: [p for p in EVERY_MIGRATION_PATH if p.stem < stem])
        migrations.run(database)
    return database


def migrate_at_once(database_url: str, processes: int = 4) -> list[subprocess.CompletedProcess]:
    """Start `emissions migrate` several times at the same moment against one empty database."""
    environment = {**os.environ, "DATABASE_URL": database_url}
    running = [subprocess.Popen([str(EMISSIONS), "migrate", "--json"], env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(processes)]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=60), *p.communicate()) for p in running]


def assert_migrated_exactly_once(results) -> None:
    assert [r.returncode for r in results] == [0] * len(results), [r.stderr for r in results]
    applied = [json.loads(r.stdout)["applied"] for r in results]
    # On SQLite each migration is its own write transaction, so the processes may take turns; each
    # applies its share in order, and together they apply every migration exactly once.
    assert all(names == sorted(names) for names in applied)
    assert sorted(name for names in applied for name in names) == EVERY_MIGRATION


def test_instances_migrating_a_new_sqlite_file_at_once_apply_each_migration_once(tmp_path):
    assert_migrated_exactly_once(migrate_at_once(f"sqlite:///{tmp_path / 'new.sqlite3'}"))


def test_instances_migrating_a_new_postgres_schema_at_once_apply_each_migration_once():
    with empty_postgres_schema("migrate_race") as url:
        assert_migrated_exactly_once(migrate_at_once(url))


# --- 0002: the indexes every calculation write paid for -----------------------------------------

DROPPED_IN_0002 = {"calculation_organization_id", "calculation_customer_id", "calculation_factor_id",
                   "webhook_event_organization_id", "webhook_event_delivery_status",
                   "webhook_event_next_attempt_at"}
# The partial indexes of due deliveries, as 0012 leaves them (it replaced 0002's webhook_event_pending).
PARTIAL_INDEXES = {"webhook_event_due": ("organization_id, environment, next_attempt_at", "pending"),
                   "webhook_event_delivering": ("locked_until", "delivering")}


def index_definitions(database, table: str) -> dict[str, str]:
    """Index name -> its CREATE statement, for the table (SQLite's implicit ones have none)."""
    if isinstance(database, pw.PostgresqlDatabase):
        rows = database.execute_sql("SELECT indexname, indexdef FROM pg_indexes"
                                    " WHERE schemaname = current_schema() AND tablename = %s", (table,))
    else:
        rows = database.execute_sql("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                                    (table,))
    return {name: definition or "" for name, definition in rows}


@pytest.mark.on_both
def test_0002_leaves_calculation_and_webhook_event_only_the_indexes_queries_use(database_url):
    database = open_database(database_url)
    migrations.run(database)
    calculation = index_definitions(database, "calculation")
    events = index_definitions(database, "webhook_event")
    assert not DROPPED_IN_0002 & (set(calculation) | set(events))
    # What covers the dropped ones: the idempotency key's unique index and the customer's time order.
    assert {"calculation_organization_id_environment_idempotency_key", "calculation_customer_created"} <= set(calculation)
    # And the primary key, and the listing's two (0008, which also adds id and two columns to the customer's).
    assert {"calculation_created", "calculation_external_reference"} <= set(calculation)
    # And 0019's two partial ones, holding only voided calculations.
    assert {"calculation_void_key", "calculation_customer_voided"} <= set(calculation)
    assert len(calculation) == 7
    for name, (column, status) in PARTIAL_INDEXES.items():
        definition = events[name].replace("::text", "")  # PostgreSQL: ((delivery_status)::text = '...'::text)
        assert f"({column}) WHERE " in definition
        assert f"delivery_status = '{status}'" in definition.replace("(", "").replace(")", "")
    # The primary key, the two partial indexes and the time order of the pages and commands (0012).
    assert set(events) - {"webhook_event_pkey", "sqlite_autoindex_webhook_event_1"} == {
        *PARTIAL_INDEXES, "webhook_event_organization_created", "webhook_event_created"}
    assert len(events) == 5
    database.close()


def claim_statements(monkeypatch, worker, limit: int = 8) -> list[tuple[str, tuple]]:
    """The statements (and parameters) one claim sends."""
    log: list = []
    original = record_statements(monkeypatch, lambda statement, params: log.append((statement, params)))
    try:
        worker.claim(limit)
    finally:
        monkeypatch.setattr(models.db.obj, "cursor", original)
    return log


def assert_reads_through_indexes(text: str) -> None:
    """No table is read whole: on SQLite every table is SEARCHed, none SCANned (not even through an
    index) and nothing is sorted in a temporary B-tree; on PostgreSQL no sequential scan."""
    if is_postgres():
        assert "Seq Scan" not in text, text
    else:
        assert not re.search(r"^SCAN (?!CONSTANT ROW)", text, re.M), text
        assert "USE TEMP B-TREE" not in text, text


def is_read(statement: str) -> bool:
    return statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "WITH"))


@pytest.mark.on_both
def test_the_delivery_claim_reads_only_the_partial_indexes_of_due_events(config, acme, monkeypatch):
    other = make_org("other")  # pending events and no enabled endpoint: the claim never reads them
    models.WebhookEndpoint.create(organization=other, environment="test", url="http://127.0.0.1:9/hook",
                                  secret=webhook_endpoints.new_secret())
    for number in range(50):
        webhook_events.record_event(other.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    models.WebhookEndpoint.update(status="disabled").where(models.WebhookEndpoint.organization == other.id).execute()
    for number in range(200):  # no endpoint yet: skipped, in no index of due events
        webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", "{}")  # pending, due now
    early = webhook_delivery.Deliverer(config, clock=lambda: event.created_at - dt.timedelta(minutes=1))
    late = webhook_delivery.Deliverer(config, clock=lambda: event.created_at + dt.timedelta(minutes=1))
    try:
        idle = claim_statements(monkeypatch, early)
        assert all(statement.lstrip().upper().startswith("SELECT") for statement, _ in idle)  # no write lock
        # The enabled endpoints are read whole (at most two rows an organization); the events never.
        plans = [plan(*sent) for sent in idle if '"webhook_event"' in sent[0]]
        for text in plans:
            assert_reads_through_indexes(text)
        assert any("webhook_event_due" in text for text in plans) and any(
            "webhook_event_delivering" in text for text in plans), plans

        busy = claim_statements(monkeypatch, late)
        [update] = [(s, p) for s, p in busy if s.lstrip().upper().startswith("UPDATE")]
        for sent in busy:
            if is_read(sent[0]) and '"webhook_event"' in sent[0]:
                assert_reads_through_indexes(plan(*sent))
        assert models.WebhookEvent.get_by_id(event.id).delivery_status == "delivering"
        # Only the update is inside the write transaction: BEGIN, UPDATE, COMMIT in a row.
        kinds = [statement.split(None, 1)[0].upper() for statement, _ in busy]
        begin = kinds.index("BEGIN")
        assert kinds[begin:begin + 3] == ["BEGIN", "UPDATE", "COMMIT"], kinds
    finally:
        early.close()
        late.close()


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database_url(request, tmp_path):
    """A database with no tables at all (a schema of its own on PostgreSQL)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        if models.db.obj is not None:
            models.db.close()
        return
    with empty_postgres_schema("migrate_0001") as url:
        yield url


ADDED_IN_0006 = {"emissions_ttw_kg", "emissions_wtt_kg"}
ADDED_IN_0019 = set(models.VOID_COLUMNS)


class CalculationBefore0015(models.Calculation):
    """A calculation's row as the migrations before 0015 made it: with the request id it dropped."""

    request_id = pw.CharField(max_length=36)

    class Meta:
        table_name = "calculation"


class EndpointAs0001(models.BaseModel):
    """A webhook endpoint with the columns 0001 made (0011, 0014 and 0018 add more)."""

    organization = pw.IntegerField(column_name="organization_id")
    environment = pw.CharField(max_length=4)
    url = pw.CharField(max_length=2048)
    secret = pw.CharField(max_length=100)
    status = pw.CharField(max_length=16, default="enabled")
    created_at = models.TimestampField(default=models.utcnow)
    updated_at = models.TimestampField(default=models.utcnow)

    class Meta:
        table_name = "webhook_endpoint"


def event_as_0001(org, data_json: str) -> models.WebhookEvent:
    """An event written with the columns 0001 made (0012 adds calculation_id), as the service wrote them."""
    event = webhook_events.new_event(org.id, "test", "calculation.succeeded", data_json)
    endpoint = (models.WebhookEndpoint.select(models.WebhookEndpoint.id)  # the columns 0001 made
                .where((models.WebhookEndpoint.organization == org.id) & (models.WebhookEndpoint.environment == "test"))
                .first())
    models.WebhookEvent.insert(id=event.id, organization=org.id, environment="test", type=event.type,
                               stored_payload=event.payload, created_at=event.created_at,
                               delivery_status="pending" if endpoint else "skipped",
                               next_attempt_at=event.created_at if endpoint else None).execute()
    return models.WebhookEvent.select(*[field for field in models.WebhookEvent._meta.sorted_fields
                                        if field.name != "calculation_id"]).where(
        models.WebhookEvent.id == event.id).get()


def test_a_database_at_0001_with_calculations_and_events_upgrades_to_0002(empty_database_url, monkeypatch):
    database = bind(empty_database_url)
    with monkeypatch.context() as only_the_first:
        only_the_first.setattr(migrations, "available", lambda: FIRST_MIGRATION)
        assert migrations.run(database) == ["0001_initial"]
    assert "calculation_factor_id" in index_definitions(database, "calculation")

    org = make_org("acme")
    customer = make_customer(org)
    # Written as 0001 knew a factor (factors.create() reads the columns 0006 adds).
    factor = models.Factor(value=Decimal("0.12522"), id=models.Factor.insert(
        reference="road-default", version=1, status="active", mode="ROAD", value=Decimal("0.12522"),
        name="Road average", source="Test source", created_at=models.utcnow()).execute())
    calculation = CalculationBefore0015.create(
        id=models.new_id(), organization=org, environment="test", customer=customer, external_reference="s-1",
        idempotency_key="idem-1", fingerprint="f" * 64, mode="ROAD", business_context="downstream",
        activity_date=dt.date(2026, 3, 1), cargo_tonnes=Decimal("12.5"), distance_km=Decimal("320"),
        activity_tkm=Decimal("4000"), emissions_kg=Decimal("500.88"), factor=factor, factor_version=1,
        factor_value=factor.value, request_id=models.new_id(), body='{"id": "c"}')
    skipped = event_as_0001(org, '{"n": 1}')
    # As 0001 knew an endpoint: set_endpoint also writes an audit event, whose table 0003 adds.
    EndpointAs0001.create(organization=org.id, environment="test", url="http://127.0.0.1:9/hook",
                          secret=webhook_endpoints.new_secret())
    pending = event_as_0001(org, '{"n": 2}')
    leased = event_as_0001(org, '{"n": 3}')
    lease_ended = leased.created_at - dt.timedelta(seconds=1)
    (models.WebhookEvent.update(delivery_status="delivering", lock_token="lost", locked_until=lease_ended)
     .where(models.WebhookEvent.id == leased.id).execute())

    def rows():
        columns = [field for field in models.Calculation._meta.sorted_fields
                   if field.name not in ADDED_IN_0006 | ADDED_IN_0019]
        return ([c.__data__ for c in models.Calculation.select(*columns).order_by(models.Calculation.id)],
                [e.__data__ for e in models.WebhookEvent.select(*[
                    field for field in models.WebhookEvent._meta.sorted_fields if field.name != "calculation_id"])
                 .order_by(models.WebhookEvent.id)])

    before = rows()
    assert migrations.run(database) == EVERY_MIGRATION[1:]
    assert rows() == ([{**c, "fingerprint": "f" * 32} for c in before[0]], before[1])  # cut by 0015
    assert calculation.id in {c["id"] for c in before[0]}
    assert not DROPPED_IN_0002 & set(index_definitions(database, "webhook_event"))

    # The worker still finds both due deliveries (and not the skipped one) through the new indexes.
    worker = webhook_delivery.Deliverer(Config(database_url=empty_database_url), clock=lambda: leased.created_at)
    try:
        assert sorted(claim.event_id for claim in worker.claim(8)) == sorted([pending.id, leased.id])
    finally:
        worker.close()
    assert models.WebhookEvent.get_by_id(skipped.id).delivery_status == "skipped"


def test_a_database_before_0006_keeps_its_calculations_and_counts_their_emissions_unattributed(
        empty_database_url, monkeypatch):
    database = migrated_before("0006", empty_database_url, monkeypatch)
    org = make_org("acme")
    customer = make_customer(org)
    factor_id = models.Factor.insert(
        reference="road-default", version=1, status="active", mode="ROAD", value=Decimal("0.12522"),
        ttw_value=Decimal("0.10163"), wtt_value=Decimal("0.02359"), name="Road average", source="Test source",
        created_at=models.utcnow()).execute()
    calculation = CalculationBefore0015.create(
        id=models.new_id(), organization=org, environment="test", customer=customer, external_reference="s-1",
        idempotency_key="idem-1", fingerprint="f" * 64, mode="ROAD", business_context="upstream",
        activity_date=dt.date(2026, 3, 1), cargo_tonnes=Decimal("12.5"), distance_km=Decimal("320"),
        activity_tkm=Decimal("4000"), emissions_kg=Decimal("500.88"), factor=factor_id, factor_version=1,
        factor_value=Decimal("0.12522"), request_id=models.new_id(), body='{"id": "c"}')
    database.execute_sql(  # written as the rollup upsert wrote it before 0006: no TTW/WTT columns
        "INSERT INTO customer_rollup (customer_id, environment, mode, business_context, calculation_count,"
        " activity_tkm, emissions_kg, first_activity_date, last_activity_date)"
        f" VALUES ({customer.id}, 'test', 'ROAD', 'upstream', 1, '4000', '500.88', '2026-03-01', '2026-03-01')")

    assert migrations.run(database) == [path.stem for path in EVERY_MIGRATION_PATH if path.stem >= "0006"]
    stored = models.Calculation.get_by_id(calculation.id)
    assert (stored.body, stored.emissions_ttw_kg, stored.emissions_wtt_kg) == ('{"id": "c"}', None, None)
    factor = models.Factor.get_by_id(factor_id)
    assert (factor.ttw_id, factor.radiative_forcing, factor.publication_title) == (None, None, None)
    assert factor.lineage()["radiative_forcing"] is None
    analytics = customer_analytics.find_with_analytics(org.id, "test", "cust-1")["analytics"]
    assert analytics["emissions"] == {"value": Decimal("500.88"), "unit": "kgCO2e", "breakdown": {
        "ttw": Decimal(0), "wtt": Decimal(0), "unattributed": Decimal("500.88")}}
    assert recount.verify().drifted == []


def test_a_calculation_and_a_shipment_made_before_0015_keep_their_bodies_and_replay_after_it(
        empty_database_url, monkeypatch):
    database = migrated_before("0015", empty_database_url, monkeypatch)
    org = make_org("acme")
    customer = make_customer(org)
    factor = make_factor()
    payload = logistics_body()
    # The fingerprint as the service computed it before 0015: the whole SHA-256 digest.
    whole = hashlib.sha256(jsoncodec.canonical(calculations.with_defaults(
        jsoncodec.loads(json.dumps(payload)))).encode()).hexdigest()
    body = '{"id":"c-1","status":"succeeded"}'
    CalculationBefore0015.create(
        id="c-1", organization=org, environment="test", customer=customer, external_reference="shipment-1",
        idempotency_key="idem-1", fingerprint=whole, mode="ROAD", business_context="upstream",
        activity_date=dt.date(2026, 3, 1), cargo_tonnes=Decimal("12.5"), distance_km=Decimal("320"),
        activity_tkm=Decimal("4000"), emissions_kg=Decimal("500.88"), factor=factor, factor_version=1,
        factor_value=factor.value, request_id=models.new_id(), body=body)
    shipment = models.Shipment.create(
        id="s-1", organization=org, environment="test", customer=customer, external_reference="chain-1",
        idempotency_key="idem-2", fingerprint="a" * 64, business_context="upstream",
        activity_date=dt.date(2026, 3, 1), cargo_tonnes=Decimal("12.5"), element_count=1,
        activity_tkm=Decimal("4000"), emissions_kg=Decimal("500.88"), emissions_ttw_kg=Decimal(0),
        emissions_wtt_kg=Decimal(0), request_id=models.new_id(), body='{"id":"s-1"}')

    assert migrations.run(database) == [path.stem for path in EVERY_MIGRATION_PATH if path.stem >= "0015"]
    assert "request_id" not in {column.name for column in database.get_columns("calculation")}
    stored = models.Calculation.get_by_id("c-1")
    assert (stored.fingerprint, stored.body) == (whole[:32], body)
    assert models.Shipment.get_by_id(shipment.id).fingerprint == "a" * 32

    # The request made before 0015 replays its stored bytes; another body with its key is refused.
    client = TestApp(create_app(Config(database_url=empty_database_url, log_requests=False, rate_limit_per_second=0,
                                       key_cache_seconds=0)))
    key = make_key(org, auth.instance_secret(None))
    replay = client.post_json("/v1/emissions/logistics", payload, headers=auth_headers(key, "idem-1"), status=200)
    assert replay.body == body.encode()
    changed = logistics_body(cargo={"value": 13, "unit": "tonne"})
    refused = client.post_json("/v1/emissions/logistics", changed, headers=auth_headers(key, "idem-1"), status=409)
    assert refused.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_0016_keys_the_period_rollups_by_their_key_and_keeps_every_row(empty_database_url, monkeypatch):
    database = migrated_before("0016", empty_database_url, monkeypatch)
    customer = make_customer(make_org("acme"))
    columns = ("customer_id, environment, span, activity_date, mode, business_context, calculation_count,"
               " activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg")
    for day, mode in (("2026-03-01", "ROAD"), ("2026-03-02", "SEA"), ("2026-03-01", "SEA")):
        database.execute_sql(f"INSERT INTO customer_period_rollup ({columns})"
                             f" VALUES ({customer.id}, 'test', 'day', '{day}', '{mode}', 'upstream', 2,"
                             " '4000.5', '500.88', '0', '0')")

    def rows():
        return [tuple(str(value) for value in row) for row in database.execute_sql(
            f"SELECT {columns} FROM customer_period_rollup ORDER BY activity_date, mode").fetchall()]

    before = rows()
    assert migrations.run(database) == [path.stem for path in EVERY_MIGRATION_PATH if path.stem >= "0016"]
    assert rows() == before
    assert "id" not in {column.name for column in database.get_columns("customer_period_rollup")}
    key = ["customer_id", "environment", "span", "activity_date", "mode", "business_context"]
    assert database.get_primary_keys("customer_period_rollup") == key
    if not is_postgres():
        assert "WITHOUT ROWID" in database.execute_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'customer_period_rollup'").fetchone()[0]
    # The service's upsert adds to a row it finds by the key; the key stays unique.
    with database.atomic():
        store.run(*rollups.add_to_period_rollups(rollups.Addition(
            customer_id=customer.id, environment="test", mode="ROAD", business_context="upstream",
            activity_tkm=Decimal("1"), emissions_kg=Decimal("2"), activity_date=dt.date(2026, 3, 1),
            emissions_ttw_kg=None, emissions_wtt_kg=None)))
    assert [row.calculation_count for row in models.CustomerPeriodRollup.select().where(
        (models.CustomerPeriodRollup.activity_date == dt.date(2026, 3, 1))
        & (models.CustomerPeriodRollup.mode == "ROAD")).order_by(models.CustomerPeriodRollup.span)] == [3, 1]
    with pytest.raises(pw.IntegrityError), database.atomic():
        database.execute_sql(f"INSERT INTO customer_period_rollup ({columns})"
                             f" VALUES ({customer.id}, 'test', 'day', '2026-03-02', 'SEA', 'upstream', 1,"
                             " '1', '1', '0', '0')")


def test_0017_fills_the_organization_day_rows_exactly_from_the_customers_day_rows(empty_database_url, monkeypatch):
    database = migrated_before("0017", empty_database_url, monkeypatch)
    acme, globex = make_org("acme"), make_org("globex")
    first, second, other = make_customer(acme, "c1"), make_customer(acme, "c2"), make_customer(globex, "g1")
    columns = ("customer_id, environment, span, activity_date, mode, business_context, calculation_count,"
               " activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg")
    for customer, environment, span, day, mode, count, sums in (
            (first, "test", "day", "2026-03-01", "ROAD", 2, "'0.1', '0.2', '0.1', '0.1'"),
            (second, "test", "day", "2026-03-01", "ROAD", 1, "'0.2', '0.1', '0.05', '0.05'"),
            (second, "test", "day", "2026-03-01", "HUB", 1, "'12', '3.3', '0', '0'"),
            (first, "test", "month", "2026-03-01", "ROAD", 5, "'9', '9', '0', '0'"),  # months are not summed
            (first, "live", "day", "2026-03-01", "ROAD", 1, "'1', '1', '0', '0'"),
            (other, "test", "day", "2026-03-02", "SEA", 4, "'100000000000000000000.000001', '7', '0', '0'")):
        database.execute_sql(f"INSERT INTO customer_period_rollup ({columns}) VALUES ({customer.id},"
                             f" '{environment}', '{span}', '{day}', '{mode}', 'upstream', {count}, {sums})")

    assert migrations.run(database) == [path.stem for path in EVERY_MIGRATION_PATH if path.stem >= "0017"]
    row = models.OrganizationPeriodRollup
    stored = {(r.organization_id, r.environment, r.span, r.activity_date.isoformat(), r.mode, r.business_context):
              (r.calculation_count, str(r.activity_tkm), str(r.emissions_kg), str(r.emissions_ttw_kg),
               str(r.emissions_wtt_kg)) for r in row.select()}
    assert stored == {
        (acme.id, "test", "day", "2026-03-01", "ROAD", "upstream"): (3, "0.3", "0.3", "0.15", "0.15"),
        (acme.id, "test", "day", "2026-03-01", "HUB", "upstream"): (1, "12", "3.3", "0", "0"),
        (acme.id, "live", "day", "2026-03-01", "ROAD", "upstream"): (1, "1", "1", "0", "0"),
        (globex.id, "test", "day", "2026-03-02", "SEA", "upstream"): (4, "100000000000000000000.000001", "7", "0", "0"),
    }
    assert database.get_primary_keys("organization_period_rollup") == [
        "organization_id", "environment", "span", "activity_date", "mode", "business_context"]
    if not is_postgres():
        assert "WITHOUT ROWID" in database.execute_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'organization_period_rollup'").fetchone()[0]
    for org in (acme, globex):  # what verify checks the rows against
        for environment in ("test", "live"):
            assert recount.stored_organization_days(org.id, environment) == (
                recount.expected_organization_days(org.id, environment))
