"""organization_period_rollup: an organization's running totals per activity day, mode and business
context, its customers' day rows added up.

The workspace overview shows this month's figures and the last 30 days by activity date for the
whole organization; read from the customers' day rows it received a row per customer and day,
so its cost grew with the customers. These rows are at most one per day, mode and business
context. Each calculation (and each hub of a shipment) adds to its row in the transaction that
writes its customer's rows (store.OrganizationDays); `emissions analytics verify` and `rebuild`
check and repair them against the customers' day rows. Only span 'day' is written; the column
keeps the key the customer rows' shape.

Keyed by its key as customer_period_rollup is (migration 0016): on SQLite a WITHOUT ROWID table.
Filled here from the customers' day rows. Plain SQL (never import models.py here); on SQLite the
decimals are text, summed exactly by decimal_sum, which emissions.db.open_database registers on
every connection (migrations run on the database it opens, as 0009 does).
"""
import peewee as pw

COLUMNS = (
    "organization_id, environment, span, activity_date, mode, business_context, calculation_count,"
    " activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg"
)
KEY = "organization_id, environment, span, activity_date, mode, business_context"


def up(migrator, db):
    postgres = isinstance(db, pw.PostgresqlDatabase)
    decimal, total = ("NUMERIC", "SUM") if postgres else ("TEXT", "decimal_sum")
    db.execute_sql(
        "CREATE TABLE organization_period_rollup ("
        " organization_id INTEGER NOT NULL REFERENCES organization (id) ON DELETE CASCADE,"
        " environment VARCHAR(4) NOT NULL, span VARCHAR(5) NOT NULL, activity_date DATE NOT NULL,"
        " mode VARCHAR(8) NOT NULL, business_context VARCHAR(12) NOT NULL,"
        f" calculation_count BIGINT NOT NULL, activity_tkm {decimal} NOT NULL, emissions_kg {decimal} NOT NULL,"
        f" emissions_ttw_kg {decimal} NOT NULL, emissions_wtt_kg {decimal} NOT NULL,"
        f" CONSTRAINT organization_period_rollup_key PRIMARY KEY ({KEY}))" + ("" if postgres else " WITHOUT ROWID"))
    db.execute_sql(
        f"INSERT INTO organization_period_rollup ({COLUMNS})"
        " SELECT c.organization_id, p.environment, 'day', p.activity_date, p.mode, p.business_context,"
        f" SUM(p.calculation_count), {total}(p.activity_tkm), {total}(p.emissions_kg),"
        f" {total}(p.emissions_ttw_kg), {total}(p.emissions_wtt_kg)"
        " FROM customer_period_rollup AS p JOIN customer AS c ON c.id = p.customer_id"
        " WHERE p.span = 'day'"
        " GROUP BY c.organization_id, p.environment, p.activity_date, p.mode, p.business_context"
        " ORDER BY c.organization_id, p.environment, p.activity_date, p.mode, p.business_context")
