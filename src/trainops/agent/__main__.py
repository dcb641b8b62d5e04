"""``python -m trainops.agent``: the program every backend starts, once per host.

It reads :class:`~trainops.protocol.AgentLaunch` from the environment, pins itself to the host's
CPUs (before any thread exists, so everything it starts inherits the affinity), takes its
assignment (from its state directory where the backend handed it over, else from the agent
API), runs :class:`HostAgent` and exits 0 once the exit event is delivered: the job's
outcome travels in that event, not in the exit code. Exit 1 means the agent itself failed
(reported as ``InternalError`` where possible). SIGTERM is a stop with the spec's grace period.
With ``TRAINOPS_AGENT_STANDBY=1`` it is a fork server instead: fully imported, it forks one
agent per launch read from stdin (see ``_standby``), so that no launch pays for the imports.

Once it has run, the process ends without tearing the interpreter down (:func:`leave`): its exit
handlers run, its other threads are waited for and its output is flushed, but its objects are
not released one by one, since an agent forked by the fork server shares that server's imported
heap copy-on-write, and releasing every object writes to (so copies) every page of it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from types import FrameType
from typing import NoReturn

from trainops._settings import Settings
from trainops.agent._agent import HostAgent
from trainops.agent.contract._resources import pin_cpus
from trainops.agent.reporting._client import AgentApiError, AgentClient, fetch_assignment
from trainops.agent.reporting._reporter import HttpReporter
from trainops.agent.reporting._worker_fork import fork_spare
from trainops.agent.supervision._hostns import namespaces_available
from trainops.agent.supervision._nodump import forbid_memory_reads
from trainops.agent.supervision._remote import HttpSpawnApi
from trainops.agent.supervision._standby import serve_launches, take_launch_fd
from trainops.archive import load_extraction
from trainops.catalog import load_catalog
from trainops.protocol import (
    PARENT_ENV,
    STANDBY_ENV,
    AgentLaunch,
    EventKind,
    HostOutcome,
    record_agent_process,
    take_handed_assignment,
)

__all__ = ["leave", "main"]

_PARENT_POLL_S = 0.25


class _StopRelay:
    """SIGTERM handler that reaches the agent once it exists."""

    def __init__(self) -> None:
        self.agent: HostAgent | None = None
        self.requested = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True
        if self.agent is not None:
            self.agent.request_stop("SIGTERM")

    def attach(self, agent: HostAgent) -> None:
        self.agent = agent
        if self.requested:
            agent.request_stop("SIGTERM")


def main(environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    try:
        launch = AgentLaunch.from_env(env)
    except (KeyError, ValueError) as exc:
        print(f"trainops agent: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    record_agent_process(launch.state_dir)  # found there if the server dies before it knows
    settings = Settings.load(env)
    relay = _StopRelay()
    signal.signal(signal.SIGTERM, relay)
    assignment = take_handed_assignment(launch)  # the local backend's: no round trip
    if assignment is None:
        client = _client(launch, settings)
        try:
            assignment = fetch_assignment(client, launch.attempt)
        except AgentApiError as exc:
            return _report_crash(launch, settings, f"cannot fetch the assignment: {exc}")
        finally:
            client.close()
    pin_cpus(assignment.resources.cpus)
    if assignment.spec.metric_definitions:
        fork_spare()  # now, while this process has one thread (see _worker_fork)
    # Started (its sender thread) once the host's namespaces are begun: they take longest.
    reporter = _reporter(launch, settings, start=False)
    try:
        agent = HostAgent(
            assignment,
            root=launch.root,
            state_dir=launch.state_dir,
            reporter=reporter,
            settings=settings,
            environ=env,
            spawn_api=HttpSpawnApi(lambda: _client(launch, settings), launch.attempt),
        )
        agent.begin()
    except Exception as exc:  # a malformed assignment is trainops' fault, not the job's
        return _report_crash(launch, settings, f"{type(exc).__name__}: {exc}", reporter.start())
    reporter.start()
    relay.attach(agent)
    _watch_parent(env, agent, launch.host)
    result = agent.run()
    reporter.close()
    return 1 if result.outcome is HostOutcome.INTERNAL_ERROR else 0


def _watch_parent(env: Mapping[str, str], agent: HostAgent, host: str) -> None:
    """With ``TRAINOPS_AGENT_PARENT`` set (by a backend whose agents must not outlive the worker
    that started them, as the Ray backend's actor), abandon the host once that parent is gone:
    its node is lost to the engine, and a host the engine has written off must not go on."""
    parent = env.get(PARENT_ENV, "")
    if not parent.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(parent):
            time.sleep(_PARENT_POLL_S)
        agent.abandon(
            f"{host} was lost: the process that held its agent (pid {parent}) is gone, "
            "with its node"
        )

    threading.Thread(target=watch, name="trainops-parent-watch", daemon=True).start()


def _client(launch: AgentLaunch, settings: Settings) -> AgentClient:
    return AgentClient(
        launch.server_url,
        launch.token,
        launch.job_name,
        launch.host,
        server_file=settings.server_file,
    )


def _reporter(launch: AgentLaunch, settings: Settings, *, start: bool = True) -> HttpReporter:
    journal = launch.state_dir / "journal.jsonl"
    # A journal that stays full is given up on the control plane's heartbeat timeout after the
    # close's own, rather than never exiting (what is lost is said on stderr, in one line).
    give_up = float(settings.heartbeat_timeout)
    reporter = HttpReporter(
        _client(launch, settings),
        launch.attempt,
        journal,
        give_up_seconds=give_up,
        heartbeat=settings.heartbeat_interval_ms / 1000,
    )
    return reporter.start() if start else reporter


def _report_crash(
    launch: AgentLaunch, settings: Settings, summary: str, reporter: HttpReporter | None = None
) -> int:
    print(f"trainops agent: {summary}", file=sys.stderr)
    reporter = reporter or _reporter(launch, settings)
    reporter.emit(
        EventKind.EXIT,
        {
            "outcome": str(HostOutcome.INTERNAL_ERROR),
            "exit_code": None,
            "failure_reason": f"InternalError: {summary}"[:1024],
        },
    )
    reporter.close(timeout=10.0)
    return 1


def _warm_up() -> None:
    """What every agent needs that is not imported with its modules: done once, shared by the
    agents the fork server forks."""
    "127.0.0.1".encode("idna")  # the codec that connecting by host name imports (stringprep)
    load_catalog()  # the instance catalog (importlib.resources and a JSON file)
    load_extraction()  # what unpacking the job's source imports on first use
    tempfile.gettempdir()  # found once by writing a probe file: the children inherit it
    namespaces_available()  # the probe (an interpreter started): once, not before every job


def _entry() -> int:
    """Run now, or (as the backend's fork server) in a child forked for each launch."""
    forbid_memory_reads()  # an agent holds its host's token: no same-user process reads it
    if os.environ.get(STANDBY_ENV) == "1":
        _warm_up()
        if serve_launches() is None:
            return 0
    else:
        take_launch_fd()
    return main()


def leave(code: int) -> NoReturn:
    """End the process with ``code`` as the interpreter's own exit would, less its teardown.

    The threads that are not daemons are waited for and the exit handlers run (``atexit``, and
    with them ``weakref.finalize``'s), then the standard streams are flushed and the process
    ends. What is left is releasing the objects one by one: an agent forked by the fork server
    would copy every page of that server's heap it shares, to decrement reference counts for an
    address space the kernel is about to drop (measured: about 15 ms of CPU per job, at the
    moment the next job's agent starts)."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to flush
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(_entry())
