"""Each row described once: the hand-written statements take their columns from the models, their rows
are named, and the rollup reads pad nothing."""
from __future__ import annotations

import dataclasses
import datetime as dt
import re
from decimal import Decimal

import peewee as pw
import pytest

from emissions import factors, limits, models, rollups, shipments, store
from emissions.rollups import recount
from conftest import post_calculation


def inserted_columns(text: str) -> list[str]:
    """The column list of an INSERT statement, unquoted."""
    return [name.strip().strip('"') for name in re.match(r"INSERT INTO \w+ \(([^)]*)\)", text).group(1).split(",")]


def columns_of(model) -> list[str]:
    return [field.column_name for field in model._meta.sorted_fields if not isinstance(field, pw.AutoField)]


@pytest.mark.parametrize("text, model", [
    (store.INSERT_CALCULATION, models.Calculation),
    (shipments.SHIPMENT.text, models.Shipment),
    (shipments.HUB_ROW.text, models.ShipmentHub),
    (rollups._customer_rollup(False), models.CustomerRollup),
    (rollups._period_rollups(True), models.CustomerPeriodRollup),
    (rollups._organization_days(3, False), models.OrganizationPeriodRollup),
], ids=["calculation", "shipment", "hub", "customer rollup", "period rollups", "organization days"])
def test_every_insert_writes_each_column_of_its_model_once(text, model):
    columns = inserted_columns(text)  # a model's optional columns (sql.Insert) come last
    assert sorted(columns) == sorted(columns_of(model)) and len(set(columns)) == len(columns)


def test_the_event_and_the_usage_statements_name_their_columns_as_the_models_do():
    event_columns = inserted_columns(store.RECORD_EVENT)
    assert set(event_columns) <= {field.column_name for field in models.WebhookEvent._meta.sorted_fields}
    assert "payload" in event_columns  # WebhookEvent.stored_payload's column
    assert inserted_columns(limits.CONSUME_LIVE) == columns_of(models.UsageCounter)


def test_a_row_to_write_is_built_by_keyword_and_refuses_a_missing_column():
    with pytest.raises(TypeError):
        store.NewCalculation(id="x")
    assert sorted(store.NewCalculation._fields) == sorted(columns_of(models.Calculation))


def test_the_rollup_reads_put_no_null_in_another_columns_place():
    for text in (rollups.FIND_WITH_ROLLUPS, rollups.LIFETIME, rollups.PERIOD):
        assert "NULL" not in text.upper()
        assert text.startswith("SELECT ")


def test_the_lookup_parts_are_taken_apart_by_name():
    row = store.LOOKED_UP.row([None] * len(store.LOOKED_UP.Row._fields))
    assert [store.LOOKED_UP.part(row, alias) for alias in ("k", "c", "f")] == [None, None, None]
    assert store.FactorRow._fields == tuple(field.column_name for field in models.Factor._meta.sorted_fields)


def test_a_factor_as_asked_for_holds_the_factors_columns_but_those_the_service_sets():
    asked = {item.name for item in dataclasses.fields(factors.Spec)}
    assert asked == {field.name for field in models.Factor._meta.sorted_fields} - set(factors.SET_BY_THE_SERVICE)
    assert dict(factors.TEXT_LIMITS)["publication_title"] == models.Factor.publication_title.max_length


def test_analytics_sums_and_the_verify_rows_do_not_share_the_models_name():
    assert rollups.Sums.__name__ != models.PeriodTotals.__name__
    assert [field.name for field in dataclasses.fields(rollups.Sums)] == ["calculation_count", *rollups.SUMS]
    assert rollups.SUMS == ("activity_tkm", "emissions_kg", "emissions_ttw_kg", "emissions_wtt_kg")


def test_recounted_rows_are_keyed_by_named_keys(client, acme):
    post_calculation(client, acme, "rows-1", status=201)
    expected = recount.expected_rollups(acme.customer.id)
    lifetime = [key for key in expected if isinstance(key, rollups.RollupKey)]
    periods = [key for key in expected if isinstance(key, rollups.PeriodKey)]
    assert [(key.mode, key.business_context) for key in lifetime] == [("ROAD", "upstream")]
    assert sorted(key.span for key in periods) == ["day", "month"]
    assert all(key.activity_date.day == 1 for key in periods if key.span == "month")
    assert expected == recount.stored_rollups(acme.customer.id)


def test_an_addition_without_parts_adds_zero_parts_to_the_rollups():
    addition = rollups.Addition(customer_id=1, environment="test", mode="ROAD", business_context="upstream",
                                activity_date=dt.date(2026, 3, 17), activity_tkm=Decimal("2"),
                                emissions_kg=Decimal("3"), emissions_ttw_kg=None, emissions_wtt_kg=None)
    text, params = rollups.add_to_period_rollups(addition)
    assert params.count("0") == 4  # TTW and WTT of the day row and of the month row
    assert str(dt.date(2026, 3, 1)) in map(str, params)
