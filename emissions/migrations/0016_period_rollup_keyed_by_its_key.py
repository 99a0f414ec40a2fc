"""customer_period_rollup keyed by its key: (customer_id, environment, span, activity_date, mode,
business_context) becomes the primary key and the `id` column, which nothing read, goes.

On SQLite the table is rebuilt WITHOUT ROWID: its rows are stored in the key's b-tree, so the
upsert every calculation makes finds and writes one b-tree instead of a table and a unique index
holding the same key again. On PostgreSQL the unique index becomes the primary key in place.

Plain SQL (never import models.py here).
"""
import peewee as pw

COLUMNS = (
    "customer_id, environment, span, activity_date, mode, business_context, calculation_count,"
    " activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg"
)
KEY = "customer_id, environment, span, activity_date, mode, business_context"


def up(migrator, db):
    if isinstance(db, pw.PostgresqlDatabase):
        db.execute_sql("ALTER TABLE customer_period_rollup DROP COLUMN id")
        db.execute_sql("ALTER TABLE customer_period_rollup ADD CONSTRAINT customer_period_rollup_key"
                       " PRIMARY KEY USING INDEX customer_period_rollup_key")
        return
    db.execute_sql(
        "CREATE TABLE customer_period_rollup_keyed ("
        " customer_id INTEGER NOT NULL REFERENCES customer (id) ON DELETE CASCADE,"
        " environment VARCHAR(4) NOT NULL, span VARCHAR(5) NOT NULL, activity_date DATE NOT NULL,"
        " mode VARCHAR(8) NOT NULL, business_context VARCHAR(12) NOT NULL,"
        " calculation_count BIGINT NOT NULL, activity_tkm TEXT NOT NULL, emissions_kg TEXT NOT NULL,"
        " emissions_ttw_kg TEXT NOT NULL, emissions_wtt_kg TEXT NOT NULL,"
        f" PRIMARY KEY ({KEY})) WITHOUT ROWID")
    db.execute_sql(f"INSERT INTO customer_period_rollup_keyed ({COLUMNS})"
                   f" SELECT {COLUMNS} FROM customer_period_rollup ORDER BY {KEY}")
    db.execute_sql("DROP TABLE customer_period_rollup")
    db.execute_sql("ALTER TABLE customer_period_rollup_keyed RENAME TO customer_period_rollup")
