"""Secret rotation with an overlap (docs/webhooks.md "Rotating the secret").

- webhook_endpoint.next_secret: the secret a rotation issued, sent beside the current one (as
  X-Service-Webhook-Signature-Next) until the overlap ends; null when no rotation is under way.
- webhook_endpoint.overlap_ends_at: when next_secret becomes the only secret.
"""


def up(migrator, db):
    db.execute_sql("ALTER TABLE webhook_endpoint ADD COLUMN next_secret VARCHAR(100)")
    db.execute_sql("ALTER TABLE webhook_endpoint ADD COLUMN overlap_ends_at TIMESTAMP")
