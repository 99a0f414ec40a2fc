"""What the workspace shows once after a redirect (a new key, a new signing secret, a notice), kept
in the database so that any worker or instance can show it, and sealed with a one-time pad that only
the browser's cookie holds (emissions/workspace/flash.py, Flash)."""
import peewee as pw


def up(migrator, db):
    class Base(pw.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class WorkspaceSession(Base):
        id = pw.CharField(primary_key=True, max_length=64)

        class Meta:
            table_name = "workspace_session"

    class WorkspaceFlash(Base):
        id = pw.CharField(primary_key=True, max_length=32)  # random, named by the browser's cookie
        session = pw.ForeignKeyField(WorkspaceSession, on_delete="CASCADE")
        kind = pw.CharField(max_length=16)
        sealed = pw.TextField()  # the value's JSON XOR the pad, as hex
        expires_at = pw.DateTimeField()

    db.create_tables([WorkspaceFlash])
