"""The audit trail: one row per administrative action (orgs, keys, users, endpoints, factors)."""
import peewee as pw


def up(migrator, db):
    class Base(pw.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class Organization(Base):
        class Meta:
            table_name = "organization"

    class AuditEvent(Base):
        organization = pw.ForeignKeyField(Organization, null=True, on_delete="CASCADE")
        actor = pw.CharField(max_length=300)
        action = pw.CharField(max_length=64)
        target = pw.CharField(max_length=300)
        environment = pw.CharField(max_length=4, null=True)
        details = pw.TextField(null=True)
        created_at = pw.DateTimeField()

        class Meta:
            indexes = ((("organization", "created_at"), False), (("created_at",), False))

    db.create_tables([AuditEvent])
