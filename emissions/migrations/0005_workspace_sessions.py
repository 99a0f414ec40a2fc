"""The workspace: server-side sessions (revocable at once), when a key was last used, when a user last signed in."""
import peewee as pw
from playhouse.migrate import migrate


def up(migrator, db):
    class Base(pw.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class User(Base):
        class Meta:
            table_name = "user"

    class WorkspaceSession(Base):
        id = pw.CharField(primary_key=True, max_length=64)  # SHA-256 of the random id in the cookie
        user = pw.ForeignKeyField(User, on_delete="CASCADE")
        csrf = pw.CharField(max_length=64)
        environment = pw.CharField(max_length=4, default="test")
        created_at = pw.DateTimeField()
        expires_at = pw.DateTimeField()

    db.create_tables([WorkspaceSession])
    migrate(
        migrator.add_column("api_key", "last_used_at", pw.DateTimeField(null=True)),
        migrator.add_column("user", "last_sign_in_at", pw.DateTimeField(null=True)),
    )
