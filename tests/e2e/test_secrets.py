"""End to end, as an attacker would try it: a job's secrets and its remote shell stay its own.

- A job whose script fails with its password in the command line and in the error: the value
  is in none of describe, FailureReason, the log lines trainops writes, ``trainops run``'s
  output, ``trainops logs`` and the REST job view; the home and the job's files are private to
  their owner (as a reader of another uid sees them).
- A hostile script cannot change the Python installation the server runs from (its prefix, its
  site-packages, trainops' own source) nor read the user's home (``~/.aws/credentials``): its
  ``HOME`` is a private directory of its host, writable.
- A hostile script in a job of its own finds a running job's remote-shell sockets and asks them
  to run a command, without a key, with a guess and with any key it can find: every request is
  refused and nothing runs on the other job.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest

import trainops as trainops_package
from tests.e2e._harness import Server, describe, trainops, wait_for, write_job
from trainops.agent.supervision._hostns import namespaces_available
from trainops.backends._base import JOURNAL_FILE

pytestmark = pytest.mark.slow

PASSWORD = "hunter2hunter2"
ENV_TOKEN = "env-token-5f3a9c"
LOGS_IN = """
import os, sys
password = sys.argv[sys.argv.index("--db_password") + 1]
print("connecting with", password, "and", os.environ["DB_TOKEN"], flush=True)
raise ValueError(f"login refused for admin:{password}")
"""


def test_a_jobs_secrets_appear_nowhere_trainops_shows_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spec = write_job(
        tmp_path,
        LOGS_IN,
        job_name="leaky",
        hyperparameters={"db_password": PASSWORD, "epochs": 1},
        environment={"DB_TOKEN": ENV_TOKEN},
    )
    run = trainops("run", str(spec), home=home)
    assert run.returncode == 1, run.stdout + run.stderr
    job = describe("leaky", home)
    assert "ValueError: login refused for admin:***" in job["FailureReason"]
    assert "--db_password *** --epochs 1" in job["FailureReason"]
    logs = trainops("logs", "leaky", home=home)
    assert "connecting with *** and ***" in logs.stdout, logs.stdout
    host = home / "jobs/leaky/attempt-1/algo-1"
    state = home / "jobs/leaky/attempt-1/.agents/algo-1"
    own_lines = [ln for ln in (state / "host.log").read_text().splitlines() if "[trainops]" in ln]
    assert any("Invoking the script" in line for line in own_lines)
    shown = [run.stdout, run.stderr, json.dumps(job), logs.stdout, *own_lines, *_rest(home)]
    for secret in (PASSWORD, ENV_TOKEN):
        assert not [text for text in shown if secret in text], secret
    private = [home, home / "jobs", host, host / "input/config", state]
    assert {str(p): _mode(p) for p in private} == {str(p): 0o700 for p in private}
    files = [home / "token", home / "trainops.db", state / JOURNAL_FILE, state / "host.log"]
    files += sorted((host / "input/config").iterdir())
    assert {str(p): _mode(p) for p in files} == {str(p): 0o600 for p in files}
    if os.geteuid() == 0:
        _unreadable_to_another_uid(home, host / "input/config/hyperparameters.json")


TAMPERS = """
import json, os, site, sys
import trainops
targets = [sys.prefix, site.getsitepackages()[0], os.path.dirname(trainops.__file__)]
seen = {}
for target in targets:
    try:
        with open(os.path.join(target, "planted.pth"), "w") as out:
            out.write("# what a hostile job would plant: a line Python runs at every start\\n")
        seen[target] = "written"
    except OSError as exc:
        seen[target] = exc.strerror
user_home = os.environ["USER_HOME"]
try:
    seen["credentials"] = open(os.path.join(user_home, ".aws/credentials")).read()
except OSError as exc:
    seen["credentials"] = exc.strerror
home = os.environ["HOME"]
open(os.path.join(home, "cache.txt"), "w").write("mine")  # a private home, writable
seen["home"] = home
print("SEEN " + json.dumps(seen), flush=True)
"""


@pytest.mark.skipif(not namespaces_available(), reason="this machine allows no namespaces")
def test_a_script_cannot_change_the_server_s_python_nor_read_the_user_s_home(
    tmp_path: Path,
) -> None:
    user_home = tmp_path / "user"
    (user_home / ".aws").mkdir(parents=True)
    (user_home / ".aws/credentials").write_text("[default]\naws_secret_access_key = s3cr3t\n")
    spec = write_job(tmp_path, TAMPERS, environment={"USER_HOME": str(user_home)})
    run = trainops("run", str(spec), home=tmp_path / "home", HOME=str(user_home))
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if "SEEN " in x)
    seen = json.loads(line.split("SEEN ", 1)[1])
    home = seen.pop("home")
    assert seen.pop("credentials") == "No such file or directory"  # masked: an empty directory
    assert seen and set(seen.values()) == {"Read-only file system"}, seen
    assert not home.startswith(str(user_home)) and home.endswith("/home")
    assert not (Path(trainops_package.__file__).parent / "planted.pth").exists()  # untouched


def _rest(home: Path) -> list[str]:
    """The REST views of the job, read with the home's token as a client would."""
    server = Server(home).start()
    try:
        headers = {"Authorization": f"Bearer {(home / 'token').read_text().strip()}"}
        with httpx.Client(base_url=server.url, headers=headers) as client:
            pages = [client.get(p) for p in ("/api/v1/jobs/leaky", "/api/v1/jobs/leaky/logs")]
            pages.append(client.get("/api/v1/jobs"))
    finally:
        server.stop()
    assert all(page.status_code == 200 for page in pages), [p.text for p in pages]
    return [page.text for page in pages]


def _unreadable_to_another_uid(home: Path, config: Path) -> None:
    reader = (
        "import os, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        os.listdir(path) if os.path.isdir(path) else open(path).read()\n"
        "        print('READ', path)\n"
        "    except PermissionError:\n"
        "        print('DENIED', path)\n"
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-c", reader, str(home), str(config)],
        preexec_fn=_as_nobody,  # a test's child, before it runs any thread
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.split() == ["DENIED", str(home), "DENIED", str(config)], done.stderr


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# --- another job's remote shell ------------------------------------------------------------------

WAITS = """
import os, pathlib, sys, time
shared = pathlib.Path(sys.argv[sys.argv.index("--shared") + 1])
(shared / ("ready-" + os.environ["SM_CURRENT_HOST"])).touch()
while not (shared / "done").exists():
    time.sleep(0.05)
"""

PROBES = """
import glob, json, os, pathlib, socket, sys
shared = pathlib.Path(sys.argv[sys.argv.index("--shared") + 1])
# found as `ss -xlp` finds them (the test names the victim's: others' jobs run on this machine)
sockets = sys.argv[sys.argv.index("--targets") + 1].split(",")
keys = [None, "guess", os.environ.get("TRAINOPS_REMOTE_SHELL_KEY")]
for environ in glob.glob("/proc/[0-9]*/environ"):  # any key it can read from any process
    try:
        items = open(environ, "rb").read().split(b"\\0")
    except OSError:
        continue
    keys += [i.split(b"=", 1)[1].decode() for i in items if i.startswith(b"TRAINOPS_REMOTE_SHELL_KEY=")]
replies = []
for path in sockets:
    for key in dict.fromkeys(keys):
        for host in ("algo-1", "algo-2"):
            message = {"host": host, "spawn_id": "x", "words": ["touch", str(shared / "pwned")]}
            if key is not None:
                message["key"] = key
            try:
                with socket.socket(socket.AF_UNIX) as conn:
                    conn.settimeout(20)
                    conn.connect(path)
                    try:
                        conn.sendall(json.dumps(message).encode() + b"\\n")
                    except BrokenPipeError:
                        pass  # refused before its request was read: the reply waits
                    replies.append(conn.recv(65536).decode())
            except OSError as exc:
                replies.append(f"{type(exc).__name__}: {exc}")
print("PROBE " + json.dumps({"sockets": sockets, "replies": replies}), flush=True)
"""


def test_a_hostile_job_cannot_run_commands_through_another_jobs_remote_shell(
    tmp_path: Path,
) -> None:
    home, shared = tmp_path / "home", tmp_path / "shared"
    shared.mkdir()
    victim = write_job(
        tmp_path / "victim",
        WAITS,
        job_name="victim",
        instance_count=2,
        hyperparameters={"shared": str(shared)},
    )
    # room for both jobs at once on a small machine (their hosts only wait)
    server = Server(home, TRAINOPS_LOCAL_CPUS="8", TRAINOPS_LOCAL_MEMORY_MB="32000").start()
    try:
        submitted = trainops("submit", str(victim), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: {p.name for p in shared.iterdir()} >= {"ready-algo-1", "ready-algo-2"})
        targets = wait_for(lambda: _listening_sockets(home))
        assert len(targets) == 2  # one a host of the victim
        hostile = write_job(
            tmp_path / "hostile",
            PROBES,
            job_name="hostile",
            hyperparameters={"shared": str(shared), "targets": ",".join(targets)},
        )
        probe = trainops("run", str(hostile), home=home, **server.env())
        (shared / "done").touch()
        victim_job = wait_for(
            lambda: (d := describe("victim", home, **server.env()))["TrainingEndTime"] and d
        )
        victim_log = trainops("logs", "victim", home=home, **server.env()).stdout
    finally:
        (shared / "done").touch()
        server.stop()
    assert probe.returncode == 0, probe.stdout + probe.stderr
    [found] = [line.split("PROBE ", 1)[1] for line in probe.stdout.splitlines() if "PROBE " in line]
    result = json.loads(found)
    assert result["replies"] and all(_refused(reply) for reply in result["replies"]), result
    assert not (shared / "pwned").exists()
    assert "Starting on" not in victim_log  # the victim's relay never passed a request on
    assert victim_job["TrainingJobStatus"] == "Completed", victim_job["FailureReason"]
    if any("refused pid" in reply for reply in result["replies"]):  # it reached the socket
        assert "Remote shell: refused pid" in victim_log


def _refused(reply: str) -> bool:
    """Refused by the relay, or the socket out of the script's reach (a private /tmp)."""
    unreachable = ("FileNotFoundError", "PermissionError", "ConnectionRefusedError")
    return "refused pid" in reply or reply.startswith(unreachable)


def _listening_sockets(home: Path) -> list[str]:
    """The remote-shell sockets served by agents of ``home`` (their host logs lie under it)."""
    found: list[str] = []
    for conn in psutil.net_connections(kind="unix"):
        path: object = conn.laddr  # a path for a Unix socket
        if not (isinstance(path, str) and path.endswith("/rsh.sock")) or conn.pid is None:
            continue
        with contextlib.suppress(psutil.Error):
            opened = psutil.Process(conn.pid).open_files()
            if any(f.path.startswith(str(home)) for f in opened):
                found.append(path)
    return sorted(set(found))
