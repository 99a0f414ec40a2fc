"""Corrections without rewriting history (docs/api.md, "Corrections").

- calculation and shipment: voided_at, void_reason, voided_by (the API key that voided it),
  void_key (the void's Idempotency-Key; null for a void made by a replacement), replaced_by and
  replaces (the ids linking a record and the one that replaced it). A voided record stays readable;
  every total and rollup leaves it out, usage still counts it.
- shipment_hub.voided_at: a hub is voided with its shipment, so that what reads hubs (the statement,
  `emissions analytics verify`) leaves it out with one condition.
- Partial indexes on the void keys (a void's key is looked up once, and only voids have one) and on
  a customer's voided records (the statement lists them apart, and leaves them out of its rows
  without reading the rows its index already orders).
"""

TABLES = ("calculation", "shipment")


def up(migrator, db):
    for table in TABLES:
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN voided_at TIMESTAMP")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN void_reason TEXT")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN voided_by VARCHAR(300)")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN void_key VARCHAR(200)")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN replaced_by VARCHAR(36)")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN replaces VARCHAR(36)")
        db.execute_sql(f"CREATE INDEX {table}_void_key ON {table} (organization_id, environment, void_key)"
                       " WHERE void_key IS NOT NULL")
        db.execute_sql(f"CREATE INDEX {table}_customer_voided ON {table} (customer_id) WHERE voided_at IS NOT NULL")
    db.execute_sql("ALTER TABLE shipment_hub ADD COLUMN voided_at TIMESTAMP")
