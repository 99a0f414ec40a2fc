"""Indexes for GET /v1/calculations: each filter finds its rows in the order the list answers them.

The list is newest first, (created_at, id) descending, cut into pages by keyset. Each index ends
with created_at and id, so a page is read in order from where the last one stopped, with no sort:

- calculation_created (organization_id, environment, created_at, id, mode, activity_date): the
  list without filters, by creation date, and by mode or activity date, decided on the index
  entries themselves (mode and activity_date carried at the end) before any row is read.
- calculation_customer_created becomes (customer_id, created_at, id, mode, activity_date): the
  list of one customer, in order, with the same carried columns. It replaces the index of that
  name on (customer_id, created_at), whose queries it serves as well: a write updates two more
  indexes, not three.
- calculation_external_reference (organization_id, environment, external_reference, created_at,
  id): what a client looks up before sending a shipment again.

Plain SQL, the same on SQLite and PostgreSQL (never import models.py here).
"""

STATEMENTS = (
    "DROP INDEX calculation_customer_created",
    "CREATE INDEX calculation_customer_created"
    " ON calculation (customer_id, created_at, id, mode, activity_date)",
    "CREATE INDEX calculation_created"
    " ON calculation (organization_id, environment, created_at, id, mode, activity_date)",
    "CREATE INDEX calculation_external_reference"
    " ON calculation (organization_id, environment, external_reference, created_at, id)",
)


def up(migrator, db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
