"""Factors keep their publication and row ids; calculations and rollups keep their TTW and WTT parts.

- factor: ttw_id, wtt_id (the publication's row ids of the two parts), radiative_forcing (AIR:
  true or false; null where it does not apply or is not known), and the publication (title,
  publisher, year, licence). The value columns ttw_value and wtt_value exist since 0001.
- calculation: emissions_ttw_kg, emissions_wtt_kg, null for a calculation without parts (every
  calculation made before this migration).
- customer_rollup: emissions_ttw_kg, emissions_wtt_kg, running sums over the calculations that
  have parts; 0 for existing rows, which counted none.

Plain SQL, the same on SQLite and PostgreSQL but for the decimal type (never import models.py here).
ADD COLUMN with a constant default rewrites no rows on either database.
"""
import peewee as pw

FACTOR_COLUMNS = (
    "ttw_id VARCHAR(64)",
    "wtt_id VARCHAR(64)",
    "radiative_forcing BOOLEAN",
    "publication_title VARCHAR(300)",
    "publication_publisher VARCHAR(200)",
    "publication_year INTEGER",
    "publication_licence VARCHAR(100)",
)


def up(migrator, db):
    decimal = "NUMERIC" if isinstance(db, pw.PostgresqlDatabase) else "TEXT"
    for column in FACTOR_COLUMNS:
        db.execute_sql(f"ALTER TABLE factor ADD COLUMN {column}")
    for column in ("emissions_ttw_kg", "emissions_wtt_kg"):
        db.execute_sql(f"ALTER TABLE calculation ADD COLUMN {column} {decimal}")
        db.execute_sql(f"ALTER TABLE customer_rollup ADD COLUMN {column} {decimal} NOT NULL DEFAULT '0'")
