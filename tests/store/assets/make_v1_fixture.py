"""Write ``trainops-v1.db``: a database at schema version 1 with a few rows, for upgrade tests.

Run once with the 0001 migration as released (``python tests/store/assets/make_v1_fixture.py``);
the file is committed and must not be regenerated after later migrations exist.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from trainops.store import apply_migrations, load_migrations

TARGET = Path(__file__).with_name("trainops-v1.db")


def main() -> None:
    TARGET.unlink(missing_ok=True)
    conn = sqlite3.connect(TARGET, isolation_level=None)
    apply_migrations(conn, [m for m in load_migrations() if m.version == 1])
    spec = {"entry_point": "train.py", "instance_type": "ml.m5.large", "instance_count": 1}
    conn.execute(
        "INSERT INTO jobs (name, spec, status, secondary_status, creation_time,"
        " last_modified_time, code_uri, output_prefix, training_start_time, training_end_time,"
        " billable_seconds, training_seconds) VALUES (?, ?, 'Completed', 'Completed', 100.0,"
        " 160.0, 'file:///code.tar.gz', 'file:///out/old-job', 101.0, 160.0, 59, 59)",
        ("old-job", json.dumps(spec)),
    )
    for i, status in enumerate(("Starting", "Training", "Completed")):
        conn.execute(
            "INSERT INTO transitions (job, status, start_time, end_time, message)"
            " VALUES ('old-job', ?, ?, ?, ?)",
            (status, 100.0 + i, 101.0 + i, f"{status} message"),
        )
    conn.execute(
        "INSERT INTO hosts (job, host, attempt, state, root, state_dir, acked_seq, outcome,"
        " exit_code) VALUES ('old-job', 'algo-1', 1, 'Exited', '/r', '/s', 3, 'Completed', 0)"
    )
    for seq in (1, 2):
        conn.execute(
            "INSERT INTO logs (job, host, attempt, seq, ts, stream, line)"
            " VALUES ('old-job', 'algo-1', 1, ?, ?, 'stdout', ?)",
            (seq, 110.0 + seq, f"old line {seq}"),
        )
    conn.execute(
        "INSERT INTO metrics (job, host, attempt, seq, name, ts, value)"
        " VALUES ('old-job', 'algo-1', 1, 3, 'loss', 120.0, 0.5)"
    )
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()


if __name__ == "__main__":
    main()
