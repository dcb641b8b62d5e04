"""Real HostAgent runs of small scripts (real processes, real file:// storage, a recording
reporter as the seam's test double): outcomes, events, outputs, stop, hostile archives."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.agent._support import JobFixture, RecordingReporter, make_job
from trainops.agent import HostResult
from trainops.agent.supervision._hostns import namespaces_available
from trainops.protocol import AgentEvent, Command, EventKind, HostOutcome, HostResources

HELLO = """
import json, os, sys
print("args", sys.argv[1:])
print("loss=0.5")
print("acc=0.9", file=sys.stderr)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
    f.write("weights")
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "out.txt"), "w") as f:
    f.write("data")
with open(os.path.join(os.environ["SM_OUTPUT_INTERMEDIATE_DIR"], "step.txt"), "w") as f:
    f.write("step")
with open(os.path.join(os.environ["SM_CHECKPOINT_DIR"], "ckpt.txt"), "w") as f:
    f.write("ckpt")
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "env.json"), "w") as f:
    json.dump(dict(os.environ), f)
print("channel files", sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])))
"""


def _read_tar(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _exit(reporter: RecordingReporter) -> dict[str, object]:
    assert reporter.events[-1].kind is EventKind.EXIT
    return reporter.events[-1].data


@pytest.fixture
def hello_job(tmp_path: Path) -> JobFixture:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    (data / "b.csv").write_text("2\n")
    return make_job(
        tmp_path,
        {"train.py": HELLO},
        hyperparameters={"epochs": 2, "optimizer": "adam", "d": {"k": 1}},
        inputs={"train": {"uri": data.as_uri()}},
        checkpoint={"uri": (tmp_path / "ckpt-remote").as_uri()},
        metric_definitions=[
            {"name": "loss", "regex": r"loss=([0-9.]+)"},
            {"name": "acc", "regex": r"acc=([0-9.]+)"},
        ],
        environment={"MY_FLAG": "on"},
    )


def test_a_python_script_completes_with_every_artifact(hello_job: JobFixture) -> None:
    environ = dict(os.environ, TRAINOPS_AGENT_TOKEN="secret-token")
    result = hello_job.run(environ)
    reporter = hello_job.reporter
    assert result == HostResult(HostOutcome.COMPLETED, 0, None)
    assert _exit(reporter) == {"outcome": "Completed", "exit_code": 0, "failure_reason": None}
    assert reporter.phases() == ["Downloading", "Training", "Uploading"]
    [process] = reporter.of(EventKind.PROCESS)
    assert process["command"] == [
        sys.executable, "train.py", "-d", "k=1", "--epochs", "2", "--optimizer", "adam",
    ]  # fmt: skip
    assert process["pgid"] == process["pid"]
    assert "args ['-d', 'k=1', '--epochs', '2', '--optimizer', 'adam']" in reporter.lines("stdout")
    assert "channel files ['a.csv', 'b.csv']" in reporter.lines("stdout")
    metrics = set(reporter.points())
    assert metrics == {("loss", 0.5), ("acc", 0.9)}

    artifacts = reporter.artifacts()
    prefix = hello_job.object_path(hello_job.assignment.output_prefix)
    assert artifacts["model"] == (prefix / "output/model.tar.gz").as_uri()
    assert _read_tar(prefix / "output/model.tar.gz") == {"model.txt": b"weights"}
    assert set(_read_tar(prefix / "output/output.tar.gz")) == {"out.txt", "env.json"}
    assert (prefix / "output/intermediate/step.txt").read_text() == "step"
    assert artifacts["checkpoint"].endswith("ckpt-remote")
    assert (hello_job.object_path(artifacts["checkpoint"]) / "ckpt.txt").read_text() == "ckpt"
    log = (prefix / "logs/algo-1.log").read_text()
    assert artifacts["log"] == (prefix / "logs/algo-1.log").as_uri()
    assert "loss=0.5" in log and "acc=0.9" in log
    assert (hello_job.root / "output/success").exists()

    env = json.loads((hello_job.root / "output/data/env.json").read_text())
    assert "TRAINOPS_AGENT_TOKEN" not in env
    assert "secret-token" not in json.dumps(env)
    assert env["MY_FLAG"] == "on"
    assert json.loads(env["SM_HPS"]) == {"epochs": 2, "optimizer": "adam", "d": {"k": 1}}
    assert env["SM_HP_EPOCHS"] == "2"
    seen = "/opt/ml" if namespaces_available() else str(hello_job.root)  # as the script sees it
    assert env["SM_CHANNEL_TRAIN"] == f"{seen}/input/data/train"
    assert env["SM_MODULE_DIR"] == hello_job.assignment.code_uri
    assert json.loads(env["SM_TRAINING_ENV"])["hosts"] == ["algo-1"]
    hps = json.loads((hello_job.root / "input/config/hyperparameters.json").read_text())
    assert hps["optimizer"] == '"adam"' and hps["sagemaker_program"] == '"train.py"'


def test_a_shell_entry_point_runs_with_sh_and_the_job_python_on_path(tmp_path: Path) -> None:
    script = 'echo "sh args: $*"\npython -c "import sys; print(sys.prefix)"\n'
    job = make_job(tmp_path, {"run.sh": script}, entry_point="run.sh", hyperparameters={"lr": 0.1})
    result = job.run()
    assert result.outcome is HostOutcome.COMPLETED
    [process] = job.reporter.of(EventKind.PROCESS)
    assert process["command"] == ["/bin/sh", str(job.root / "code/run.sh"), "--lr", "0.1"]
    assert job.reporter.lines("stdout") == ["sh args: --lr 0.1", sys.prefix]


def test_the_distribution_reaches_the_script_as_the_sdk_sends_it(tmp_path: Path) -> None:
    script = "import os\nprint(os.environ['SM_FRAMEWORK_PARAMS'])\n"
    distribution = {
        "smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-x X"}}
    }
    job = make_job(tmp_path, {"train.py": script}, distribution=distribution)
    assert job.run().outcome is HostOutcome.COMPLETED
    assert json.loads(job.reporter.lines("stdout")[0]) == {
        "sagemaker_distributed_dataparallel_custom_mpi_options": "-x X",
        "sagemaker_distributed_dataparallel_enabled": True,
    }
    hps = json.loads((job.root / "input/config/hyperparameters.json").read_text())
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"


def test_another_entry_point_is_made_executable_and_run(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"run": "#!/bin/sh\necho direct $1\n"}, entry_point="run")
    assert job.run().outcome is HostOutcome.COMPLETED
    assert job.reporter.lines("stdout") == ["direct"]


def test_a_failing_script_reports_its_exception(tmp_path: Path) -> None:
    script = "import sys\nprint('working')\nraise ValueError('boom: bad lr')\n"
    job = make_job(tmp_path, {"train.py": script})
    result = job.run()
    assert result.outcome is HostOutcome.FAILED and result.exit_code == 1
    assert result.failure_reason == (
        'ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ValueError: boom: bad lr"\n'
        f'Command "{sys.executable} train.py"'
    )
    assert _exit(job.reporter)["failure_reason"] == result.failure_reason
    assert (job.root / "output/failure").read_text() == result.failure_reason
    assert not (job.root / "output/success").exists()
    assert job.reporter.phases() == ["Downloading", "Training", "Uploading"]
    assert "log" in job.reporter.artifacts()


def test_the_scripts_own_failure_file_is_the_reason(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "open(os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure'), 'w').write('out of data')\n"
        "sys.exit(2)\n"
    )
    job = make_job(tmp_path, {"train.py": script})
    result = job.run()
    assert (result.outcome, result.exit_code, result.failure_reason) == (
        HostOutcome.FAILED, 2, "out of data",
    )  # fmt: skip


IGNORES_SIGTERM = """
import signal, sys, time
def on_term(signum, frame):
    print("got SIGTERM, ignoring it", flush=True)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_stop_sends_sigterm_then_sigkill_after_the_grace(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": IGNORES_SIGTERM})
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    job.reporter.wait_for_line("ready")
    job.reporter.push(Command("stop", reason="user asked", grace_seconds=0.5))
    runner.join()
    [result] = results
    assert result.outcome is HostOutcome.STOPPED
    assert result.exit_code == -9
    assert result.failure_reason is None
    # The group and the tree are both signalled: a second handler may print inside the first.
    assert any("got SIGTERM, ignoring it" in line for line in job.reporter.lines("stdout"))
    assert any("Stopping (user asked)" in line for line in job.reporter.lines("agent"))
    assert job.reporter.phases() == ["Downloading", "Training", "Uploading"]
    assert {"model", "output", "log"} <= set(job.reporter.artifacts())


def test_stop_before_training_never_starts_the_script(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": "open('started', 'w')\n"})
    agent = job.agent()
    agent.request_stop("SIGTERM")
    result = agent.run()
    assert result.outcome is HostOutcome.STOPPED
    assert job.reporter.of(EventKind.PROCESS) == []
    assert not (job.root / "code/started").exists()


def test_several_hosts_and_retries_upload_parts(tmp_path: Path) -> None:
    script = (
        "import os\nopen(os.environ['SM_OUTPUT_INTERMEDIATE_DIR'] + '/x.txt', 'w').write('x')\n"
    )
    job = make_job(
        tmp_path,
        {"train.py": script},
        host="algo-2",
        hosts=["algo-1", "algo-2"],
        attempt=2,
        instance_count=2,
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    prefix = job.assignment.output_prefix
    assert job.reporter.artifacts() == {
        "model_part": f"{prefix}/output/model-parts/algo-2.tar.gz",
        "output_part": f"{prefix}/output/output-parts/algo-2.tar.gz",
        "log": f"{prefix}/logs/algo-2-attempt-2.log",
    }
    assert (job.object_path(prefix) / "output/intermediate/algo-2/x.txt").read_text() == "x"


def test_a_smaller_host_than_the_instance_type_is_warned_about(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {
            "train.py": "import os\nprint(os.environ['SM_NUM_CPUS'], os.environ['OMP_NUM_THREADS'])\n"
        },
        instance_type="ml.c5.xlarge",
        resources=HostResources(cpus=[0]),
    )
    assert job.run().outcome is HostOutcome.COMPLETED
    assert "warning: ml.c5.xlarge has 4 vCPUs; this host runs on 1" in job.reporter.lines("agent")
    # SM_NUM_CPUS is the declared type's (a script sizes its world by it, as in the cloud);
    # thread limits follow what the machine gives.
    assert job.reporter.lines("stdout") == ["4 1"]


def _hostile(tmp_path: Path, kind: str) -> Path:
    archive = tmp_path / f"{kind}.tar.gz"
    outside = tmp_path / "outside"
    with tarfile.open(archive, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("train.py"), io.BytesIO(b""))
        if kind == "absolute":
            member = tarfile.TarInfo(str(outside / "evil.txt"))
        elif kind == "dotdot":
            member = tarfile.TarInfo("../../../outside/evil.txt")
        else:
            link = tarfile.TarInfo("escape")
            link.type, link.linkname = tarfile.SYMTYPE, str(outside)
            tar.addfile(link)
            member = tarfile.TarInfo("escape/evil.txt")
        member.size = 4
        tar.addfile(member, io.BytesIO(b"evil"))
    return archive


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink"])
def test_a_hostile_source_archive_fails_the_host_and_writes_nothing_outside(
    tmp_path: Path, kind: str
) -> None:
    job = make_job(tmp_path, {}, archive=_hostile(tmp_path, kind))
    result = job.run()
    assert result.outcome is HostOutcome.FAILED
    assert result.failure_reason is not None
    assert result.failure_reason.startswith("ArchiveError: ")
    assert not (tmp_path / "outside").exists()
    assert not list(tmp_path.rglob("evil.txt"))
    assert job.reporter.of(EventKind.PROCESS) == []


class _BrokenReporter(RecordingReporter):
    """Fails once the script runs, as a bug inside trainops would."""

    def commands(self) -> list[Command]:
        if self.of(EventKind.PROCESS):
            raise RuntimeError("reporter bug")
        return super().commands()


def test_an_internal_error_kills_the_script_and_reports_internal_error(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": IGNORES_SIGTERM},
        stopping_condition={"grace_period_in_seconds": 0},
    )
    job.reporter = _BrokenReporter()
    result = job.run()
    assert result.outcome is HostOutcome.INTERNAL_ERROR
    assert result.failure_reason == "InternalError: RuntimeError: reporter bug"
    [process] = job.reporter.of(EventKind.PROCESS)
    with pytest.raises(ProcessLookupError):
        os.kill(process["pid"], 0)
    assert "Uploading" not in job.reporter.phases()
    assert "reporter bug" in (job.state_dir / "agent.log").read_text()


DISOWNED_SCRIPT = """
import os, time
handle = open(os.path.join(os.environ["SM_CHECKPOINT_DIR"], "late.ckpt"), "w")
handle.write("still open when the control plane revoked the host")
handle.flush()  # open for writing: not uploaded while it runs; the end decides
print("ready", flush=True)
time.sleep(600)
"""


def test_a_disowned_host_stops_its_script_and_uploads_nothing(tmp_path: Path) -> None:
    """The control plane has revoked the host (declared lost, say, while a network kept it
    apart): another attempt may own the job's checkpoints and outputs now, so the script is
    stopped at once and nothing more is uploaded, checkpoints included."""
    remote = tmp_path / "ckpt-remote"
    job = make_job(
        tmp_path,
        {"train.py": DISOWNED_SCRIPT},
        checkpoint={"uri": remote.as_uri()},
        mount_opt_ml=False,
    )
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    deadline = time.monotonic() + 60.0  # a wait that never ends is a failure
    while not any("ready" in line for line in job.reporter.lines("stdout")):
        assert time.monotonic() < deadline, job.reporter.lines()
        time.sleep(0.02)
    job.reporter.disowned = "the control plane has refused this host's reports for 5 s"
    runner.join(60.0)
    assert results, "the agent did not end"
    [result] = results
    assert result.outcome is HostOutcome.INTERNAL_ERROR
    assert "refused this host's reports" in (result.failure_reason or "")
    said = [line for line in job.reporter.lines("agent") if "nothing more is uploaded" in line]
    assert said, job.reporter.lines("agent")
    assert not (remote / "late.ckpt").exists()
    assert not list((job.objects / "jobs").rglob("*.tar.gz"))  # no model or output archive


class _RevokedAt(RecordingReporter):
    """A control plane that revokes the host once it has seen the event ``at`` (its first
    ``count`` of them): the reporter then says the host is disowned."""

    def __init__(self, at: EventKind, data: dict[str, str], count: int = 1) -> None:
        super().__init__()
        self._at, self._data, self._left = at, data, count

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        event = super().emit(kind, data)
        if kind is self._at and self._data.items() <= data.items():
            self._left -= 1
            if self._left == 0:
                self.disowned = "the control plane has refused this host's reports for 5 s"
        return event


@pytest.mark.parametrize(
    ("at", "data", "archives"),
    [
        # revoked as the script ended: neither archive, nor the log
        (EventKind.PHASE, {"phase": "Uploading"}, []),
        # revoked once the archives were uploaded (their events follow them): the log does not go
        (EventKind.ARTIFACT, {"name": "model"}, ["model.tar.gz", "output.tar.gz"]),
    ],
)
def test_a_host_disowned_after_its_script_uploads_nothing_more(
    tmp_path: Path, at: EventKind, data: dict[str, str], archives: list[str]
) -> None:
    """Revoked once its script has ended (the control plane declared it lost, and another
    attempt may own the job's outputs now): the host ends InternalError and uploads nothing
    after that, as a host revoked while its script runs does."""
    job = make_job(tmp_path, {"train.py": "print('done')\n"}, mount_opt_ml=False)
    job.reporter = _RevokedAt(at, data)
    result = job.run()
    assert result.outcome is HostOutcome.INTERNAL_ERROR
    assert "refused this host's reports" in (result.failure_reason or "")
    said = [line for line in job.reporter.lines("agent") if "nothing more is uploaded" in line]
    assert said, job.reporter.lines("agent")
    uploaded = sorted(p.name for p in (job.objects / "jobs").rglob("*.tar.gz"))
    assert uploaded == archives
    assert not list((job.objects / "jobs").rglob("*.log"))  # the host log is the last upload
