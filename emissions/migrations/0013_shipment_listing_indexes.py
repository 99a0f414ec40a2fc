"""Indexes for GET /v1/shipments: each filter finds its rows in the order the list answers them.

The same rules as the calculations' list (migration 0008): newest first, (created_at, id)
descending, cut into pages by keyset, every index ending with created_at and id:

- shipment_created (organization_id, environment, created_at, id, activity_date) replaces the
  index on (organization_id, environment, created_at, id): the list without filters, by creation
  date, and by activity date decided on the index entries before any row is read.
- shipment_customer_created (customer_id, created_at, id, activity_date) replaces the customer's
  own index (customer_id), whose lookups it serves as well: one customer's shipments, in order.
- shipment_external_reference (organization_id, environment, external_reference, created_at, id).

Plain SQL, the same on SQLite and PostgreSQL (never import models.py here).
"""

STATEMENTS = (
    "DROP INDEX shipment_organization_id_environment_created_at_id",
    "CREATE INDEX shipment_created ON shipment (organization_id, environment, created_at, id, activity_date)",
    "DROP INDEX shipment_customer_id",
    "CREATE INDEX shipment_customer_created ON shipment (customer_id, created_at, id, activity_date)",
    "CREATE INDEX shipment_external_reference"
    " ON shipment (organization_id, environment, external_reference, created_at, id)",
)


def up(migrator, db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
