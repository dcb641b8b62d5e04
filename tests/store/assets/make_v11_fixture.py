"""Write ``trainops-v11.db``: a database at schema version 11 (before the tuning tables) with a
running job, for the upgrade test of the 0012 migration.

Run once with migrations 0001-0011 as released (``python tests/store/assets/make_v11_fixture.py``);
the file is committed and must not be regenerated after later migrations exist.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trainops.spec import JobSpec
from trainops.store import MetadataStore, load_migrations

TARGET = Path(__file__).with_name("trainops-v11.db")


def main() -> None:
    TARGET.unlink(missing_ok=True)
    store = MetadataStore(TARGET, migrations=[m for m in load_migrations() if m.version <= 11])
    store.create_job(
        name="running-job",
        spec=JobSpec(entry_point="train.py", hyperparameters={"lr": 0.1}).view(),
        code_uri="file:///code.tar.gz",
        output_prefix="file:///out/running-job",
        max_attempts=1,
        status="InProgress",
        secondary_status="Training",
        message="training",
        now=100.0,
    )
    store.close()
    with sqlite3.connect(TARGET) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")


if __name__ == "__main__":
    main()
