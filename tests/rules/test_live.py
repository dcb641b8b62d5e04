"""End to end: a real job's rules evaluated while it runs, acting on what they find.

The script writes its own step timings into its profiler prefix with ``SeriesWriter`` (steady
steps, then a slow one every fifth), so the test depends on no recorder. ``trainops run`` starts
an embedded control plane whose rules service evaluates StepOutlier every tick, finds the
outliers, stops the job and POSTs the finding to a webhook served here on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

SCRIPT = """
import sys, time
from pathlib import Path
from trainops.profiler import MODE_TRAIN, SeriesWriter

prefix = Path(sys.argv[sys.argv.index("--profiler-dir") + 1])
writer = SeriesWriter(
    prefix / "framework/steps/algo-1/rank-0",
    {"kind": "steps", "host": "algo-1", "rank": 0},
    ["time", "step", "mode", "duration"],
    prefix="script-",
    rotate_rows=20,
)
for step in range(6000):
    slow = step >= 60 and step % 5 == 0
    writer.append([time.time(), step, MODE_TRAIN, 1.0 if slow else 0.1])
    if step % 20 == 19:
        print("steps written:", step + 1, flush=True)
        time.sleep(0.5)
writer.close()
print("finished without being stopped", flush=True)
"""


class Hook(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        Hook.bodies.append({"path": self.path, "body": json.loads(self.rfile.read(length))})
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture
def webhook() -> Iterator[str]:
    Hook.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/s3cr3t"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_a_rule_stops_a_running_job_and_calls_a_webhook(tmp_path: Path, webhook: str) -> None:
    profiler_dir = tmp_path / "profiler"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="outliers",
        hyperparameters={"profiler-dir": str(profiler_dir)},
        profiler_config={"s3_output_path": profiler_dir.as_uri()},
        rules=[
            {
                "rule": "StepOutlier",
                "rule_parameters": {"scan_interval_us": 0, "n_outliers": 3},
                "actions": ["stop_training", {"webhook": webhook}],
            },
            {"rule": "LowGPUUtilization", "rule_parameters": {"scan_interval_us": 0}},
        ],
        stopping_condition={"grace_period_in_seconds": 5},
    )
    home = tmp_path / "home"
    home.mkdir()
    # The hook listens on 127.0.0.1: the server's settings must allow loopback webhooks.
    (home / "config.yaml").write_text("webhook_networks: [loopback]\n")
    run = trainops("run", str(spec), home=home, timeout=240)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "finished without being stopped" not in run.stdout
    assert "Profiler rules:\n  StepOutlier: IssuesFound: algo-1/rank-0/TRAIN:" in run.stdout

    job = describe("outliers", home)
    assert job["TrainingJobStatus"] == "Stopped"
    messages = [t["StatusMessage"] for t in job["SecondaryStatusTransitions"]]
    assert any(m.startswith("Stopped by rule StepOutlier: algo-1/rank-0/TRAIN: ") for m in messages)

    statuses = {s["RuleConfigurationName"]: s for s in job["ProfilerRuleEvaluationStatuses"]}
    outlier = statuses["StepOutlier"]
    assert outlier["RuleEvaluationStatus"] == "IssuesFound"
    evaluation = outlier["Evaluation"]
    assert evaluation["Rule"] == "StepOutlier" and "move it out" in evaluation["Recommendation"]
    assert evaluation["Evidence"]["algo-1/rank-0/TRAIN"]["outliers"] > 3
    assert [(a["Type"], a["Ok"]) for a in evaluation["Actions"]] == [
        ("stop_training", True),
        ("webhook", True),
    ]
    port = webhook.split(":")[2].split("/")[0]
    assert evaluation["Actions"][1]["Detail"] == f"POST http://127.0.0.1:{port}/***: HTTP 204"
    # The other rule got its final verdict when the job ended.
    assert statuses["LowGPUUtilization"]["RuleEvaluationStatus"] == "NoIssuesFound"
    configured = {c["RuleConfigurationName"]: c for c in job["ProfilerRuleConfigurations"]}
    assert configured["StepOutlier"]["RuleParameters"]["n_outliers"] == "3"

    assert len(Hook.bodies) == 1
    posted = Hook.bodies[0]
    assert posted["path"] == "/hooks/s3cr3t"
    body = posted["body"]
    assert (body["source"], body["job"], body["rule_name"], body["status"]) == (
        "trainops",
        "outliers",
        "StepOutlier",
        "IssuesFound",
    )
    assert body["details"].startswith("algo-1/rank-0/TRAIN: ") and body["recommendation"]
    assert body["evidence"]["algo-1/rank-0/TRAIN"]["outliers"] > 3

    output = Path(evaluation["Output"].removeprefix("file://"))
    written = json.loads(output.read_text())
    assert written["status"] == "IssuesFound" and written["name"] == "StepOutlier"

    shown = trainops("describe", "outliers", home=home)
    assert "StepOutlier: IssuesFound: " in shown.stderr
    assert "Action webhook done: POST http://127.0.0.1:" in shown.stderr
