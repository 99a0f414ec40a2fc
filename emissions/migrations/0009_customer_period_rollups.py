"""customer_period_rollup: a customer's running totals per activity day and per activity month.

A customer's analytics for a period (GET /v1/customers/{ref}/emissions?from=&to=) reads the month
rows of the whole months inside the period and the day rows of its partial months at either end:
at most 12 month rows a year and 62 day rows per mode and business context, however many
calculations there are. Each calculation adds to its day row and its month row in one upsert of
two rows, in its own transaction (store.write_calculation). `span` is 'day' or 'month'; a month
row's activity_date is the first day of its month.

Built here from the stored calculations; `emissions analytics verify` and `rebuild` check and
repair it like customer_rollup. Plain SQL (never import models.py here); on SQLite decimals are
text summed exactly by decimal_sum, which emissions.db.open_database registers.
"""
import peewee as pw

COLUMNS = (
    "customer_id, environment, span, activity_date, mode, business_context, calculation_count,"
    " activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg"
)


def up(migrator, db):
    postgres = isinstance(db, pw.PostgresqlDatabase)
    decimal, total = ("NUMERIC", "SUM") if postgres else ("TEXT", "decimal_sum")
    serial = "SERIAL" if postgres else "INTEGER"
    db.execute_sql(
        f"CREATE TABLE customer_period_rollup (id {serial} NOT NULL PRIMARY KEY,"
        " customer_id INTEGER NOT NULL REFERENCES customer (id) ON DELETE CASCADE,"
        " environment VARCHAR(4) NOT NULL, span VARCHAR(5) NOT NULL, activity_date DATE NOT NULL,"
        " mode VARCHAR(8) NOT NULL, business_context VARCHAR(12) NOT NULL,"
        f" calculation_count BIGINT NOT NULL, activity_tkm {decimal} NOT NULL, emissions_kg {decimal} NOT NULL,"
        f" emissions_ttw_kg {decimal} NOT NULL, emissions_wtt_kg {decimal} NOT NULL)")
    db.execute_sql("CREATE UNIQUE INDEX customer_period_rollup_key ON customer_period_rollup"
                   " (customer_id, environment, span, activity_date, mode, business_context)")
    month = "CAST(date_trunc('month', activity_date) AS DATE)" if postgres else "date(activity_date, 'start of month')"
    for span, day in (("day", "activity_date"), ("month", month)):
        db.execute_sql(
            f"INSERT INTO customer_period_rollup ({COLUMNS})"
            f" SELECT customer_id, environment, '{span}', {day}, mode, business_context, COUNT(*),"
            f" {total}(activity_tkm), {total}(emissions_kg),"
            f" COALESCE({total}(emissions_ttw_kg), '0'), COALESCE({total}(emissions_wtt_kg), '0')"
            f" FROM calculation GROUP BY customer_id, environment, {day}, mode, business_context")
