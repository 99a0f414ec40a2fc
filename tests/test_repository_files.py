"""The repository's own files: what a run leaves in a working copy is ignored, and documented."""
from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

from emissions import migrations
from emissions.db import open_database
from emissions.serving.writer_lock import share_writer_lock

ROOT = Path(__file__).resolve().parent.parent


def test_the_gitignore_covers_every_file_a_serving_sqlite_database_leaves_beside_it(tmp_path):
    """quickstart and serve leave the database, its WAL files and the writers' lock file in the working
    directory; none of them may show up as a change to commit (docs/operations.md says what each is)."""
    database = open_database(f"sqlite:///{tmp_path / 'emissions.sqlite3'}")
    share_writer_lock(database)  # as WalCheckpointer.start does in every serving process
    migrations.run(database)
    left = sorted(path.name for path in tmp_path.iterdir())
    database.close()
    assert "emissions.sqlite3-writers.lock" in left
    patterns = [line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert [name for name in left if not any(fnmatch(name, pattern) for pattern in patterns)] == []
    assert "emissions.sqlite3-writers.lock" in (ROOT / "docs" / "operations.md").read_text()


def test_no_test_module_imports_another():
    """Shared helpers live in tests/conftest.py and tests/helpers.py, so each test module stands alone."""
    tests = Path(__file__).resolve().parent
    found = [f"{path.name}: {line.strip()}" for path in sorted(tests.glob("test_*.py"))
             for line in path.read_text().splitlines()
             if re.match(r"\s*(from (tests\.)?test_\w+ import|import (tests\.)?test_\w+)", line)]
    assert found == []
