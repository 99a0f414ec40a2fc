"""Fewer indexes for every calculation to write: drop those no query needs, index only due deliveries.

Each index is one more b-tree page a write dirties, logs at COMMIT and copies again at checkpoint.
A calculation wrote 7 b-trees and its webhook event 5; afterwards they write 4 and 2 (a skipped
or delivered event enters no index but its primary key).

- calculation_organization_id: the unique index (organization_id, environment, idempotency_key)
  starts with the same column and serves the same lookups (and the organization cascade).
- calculation_customer_id: calculation_customer_created (customer_id, created_at) starts with it.
- calculation_factor_id: no query looks calculations up by factor, and factors are never deleted
  (the RESTRICT check is the only reader this index had).
- webhook_event_organization_id, _delivery_status, _next_attempt_at: the delivery worker looks
  only for pending events that are due and for delivering events whose lease ran out; two partial
  indexes hold just those rows, usually a handful, instead of every event ever recorded. Deleting
  an organization (which the service never does) now reads all of webhook_event to cascade, and
  `emissions webhook deliveries --org` reads the table as it always did without --org.

Plain SQL, the same on SQLite and PostgreSQL (never import models.py here). On PostgreSQL the
transaction locks webhook_event while the partial indexes are built, so calculations wait for it:
on a large database migrate at a quiet moment (docs/operations.md, "PostgreSQL and several instances").
"""

DROPPED = (
    "calculation_organization_id",
    "calculation_customer_id",
    "calculation_factor_id",
    "webhook_event_organization_id",
    "webhook_event_delivery_status",
    "webhook_event_next_attempt_at",
)

CREATED = (
    # Due pending deliveries, in the order the worker claims them.
    "CREATE INDEX webhook_event_pending ON webhook_event (next_attempt_at)"
    " WHERE delivery_status = 'pending'",
    # Deliveries whose worker may have died: the lease (locked_until) has run out.
    "CREATE INDEX webhook_event_delivering ON webhook_event (locked_until)"
    " WHERE delivery_status = 'delivering'",
)


def up(migrator, db):
    for name in DROPPED:
        db.execute_sql(f"DROP INDEX {name}")
    for statement in CREATED:
        db.execute_sql(statement)
