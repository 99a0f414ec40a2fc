"""The outbox read through indexes, and a skipped event without a copy of its calculation.

- webhook_event_due (organization_id, environment, next_attempt_at) WHERE pending replaces
  webhook_event_pending (next_attempt_at): the delivery claim asks, per enabled endpoint, for that
  organization's due events in order, so that pending events without an enabled endpoint (millions,
  say, after an endpoint was removed) are never read, and a backlog for one receiver is read
  `limit` rows at a time.
- webhook_event_organization_created (organization_id, environment, created_at): the webhooks page
  (recent events, an endpoint's health, a calculation's events) and `webhook deliveries --org`.
- webhook_event_created (created_at): `webhook deliveries`, `redeliver --since` and `prune`.
- webhook_attempt_attempted_at (attempted_at): an endpoint's last attempt on the webhooks page,
  read newest first instead of sorting every attempt.
- calculation_id: the calculation a calculation.succeeded event carries. A skipped event (no
  enabled endpoint when it happened) stores an empty payload and is rebuilt from the calculation's
  stored body when it is shown or redelivered (webhooks.events.payload_of).

Plain SQL, the same on SQLite and PostgreSQL (never import models.py here). On PostgreSQL the
indexes lock webhook_event while they are built: on a large database migrate at a quiet moment.
"""

STATEMENTS = (
    "ALTER TABLE webhook_event ADD COLUMN calculation_id VARCHAR(36)",
    "DROP INDEX webhook_event_pending",
    "CREATE INDEX webhook_event_due ON webhook_event (organization_id, environment, next_attempt_at)"
    " WHERE delivery_status = 'pending'",
    "CREATE INDEX webhook_event_organization_created ON webhook_event (organization_id, environment, created_at)",
    "CREATE INDEX webhook_event_created ON webhook_event (created_at)",
    "CREATE INDEX webhook_attempt_attempted_at ON webhook_attempt (attempted_at)",
)


def up(migrator, db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
