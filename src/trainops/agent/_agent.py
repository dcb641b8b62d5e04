"""The host agent: runs one host of a job from its assignment to its exit event.

Phases, as SageMaker reports them: Downloading (source, configs, checkpoints, channels, the
job's Python environment), Training (the script, with checkpoints and intermediate outputs
synchronised in the background), Uploading (final syncs, model/output archives, the host log),
then one ``exit`` event with the host's outcome. Each step lives in its own module; this class
only sequences them and turns what happened into a :class:`HostResult`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops._containment import containment
from trainops._errors import TrainopsError
from trainops._redaction import Masker
from trainops._settings import Settings
from trainops.agent._ranks import (
    HostLaunch,
    Isolation,
    hold_host_namespace,
    host_processes,
    start_host_namespace,
)
from trainops.agent.channels import (
    ChannelContext,
    ChannelSource,
    channel_failure,
    close_channels,
    open_channel,
)
from trainops.agent.contract._failure import exit_failure_reason, read_failure_file
from trainops.agent.contract._installer import JobFailure, JobInstaller
from trainops.agent.contract._outputs import Artifact, OutputLayout, upload_archives, upload_log
from trainops.agent.contract._resources import host_warnings
from trainops.agent.contract._setup import (
    ScriptCommand,
    script_command,
    script_environment,
    write_configs,
)
from trainops.agent.contract._tree import HostTree
from trainops.agent.launchers import LaunchError
from trainops.agent.reporting._hostlog import HostLog
from trainops.agent.reporting._metrics import MetricScraper
from trainops.agent.reporting._priority import BackgroundPriority
from trainops.agent.reporting._reporter import Reporter
from trainops.agent.sidecars import SidecarContext, Sidecars
from trainops.agent.supervision._actions import ActionRunner
from trainops.agent.supervision._group import ProcessGroup
from trainops.agent.supervision._holder_fork import release_spare_holder
from trainops.agent.supervision._hostns import (
    HostNamespace,
    NamespaceError,
    forgo_namespaces,
    namespaces_available,
    opt_ml_hint,
    opt_ml_shown,
    socket_parent,
    unwrap,
)
from trainops.agent.supervision._process import ScriptProcess
from trainops.agent.supervision._protected import private_home, python_installation, user_home
from trainops.agent.supervision._reaper import new_marker
from trainops.agent.supervision._remote import RemoteShell, SpawnApi
from trainops.agent.supervision._space import (
    disk_full,
    free_paths,
    is_out_of_space,
    no_space_reason,
)
from trainops.agent.supervision._stop import StopControl
from trainops.archive import safe_extract
from trainops.protocol import Assignment, EventKind, HostOutcome, Phase
from trainops.storage import ObjectStore, store_for

__all__ = ["HostAgent", "HostResult"]

POLL_SECONDS = 0.1
# A script still running after this long gets the agent's own work put behind it (_priority).
LOWER_AFTER_SECONDS = 0.05
INTERNAL_ERROR_GRACE_SECONDS = 5.0
ACTION_REPORT_SECONDS = 5.0  # the most a rule's command action may hold up the host's end


@dataclass(frozen=True, slots=True)
class HostResult:
    """How the host ended; the ``exit`` event carries the same three fields."""

    outcome: HostOutcome
    exit_code: int | None = None
    failure_reason: str | None = None


class HostDisowned(Exception):
    """The control plane has revoked this host's token (while its script ran, or before or
    between its uploads)."""


class HostAgent:
    """Runs one host of a job; :meth:`run` reports everything through ``reporter``."""

    def __init__(
        self,
        assignment: Assignment,
        *,
        root: Path,
        state_dir: Path,
        reporter: Reporter,
        settings: Settings | None = None,
        environ: Mapping[str, str] | None = None,
        sync_interval: float = 1.0,
        spawn_api: SpawnApi | None = None,
    ) -> None:
        self.assignment = assignment
        self.job = assignment.spec
        self.tree = HostTree(root, self.job.checkpoint_local_path)
        self.state_dir = state_dir
        self.reporter = reporter
        self.environ = dict(os.environ if environ is None else environ)
        self.settings = settings or Settings.load(self.environ)
        self.layout = OutputLayout(
            assignment.output_prefix,
            assignment.current_host,
            len(assignment.hosts),
            assignment.attempt,
            compressed=not self.job.disable_output_compression,
        )
        self._mask = Masker.for_job(self.job.environment, self.job.hyperparameters)
        self.log = HostLog(
            state_dir / "host.log",
            reporter,
            MetricScraper(self.job.metric_definitions),
            mask=self._mask,
        )
        self._sync_interval = sync_interval
        self._stores: dict[str, ObjectStore] = {}
        self._sidecars: Sidecars | None = None  # made once the tree exists (see _prepare)
        self._channels: list[ChannelSource] = []
        self._env: dict[str, str] = {}
        self._stop = StopControl(self.job.grace_seconds)
        self._abandoned: str | None = None
        self._running: ScriptProcess | ProcessGroup | None = None
        self._spawn_api = spawn_api  # the remote shell's calls, on a job of several hosts
        self._remote: RemoteShell | None = None
        self._namespace: HostNamespace | None = None  # made early (_start_namespace_early)
        self._tool_namespace: HostNamespace | None = None  # else the installer's, while it runs
        self._rank_exits: list[dict[str, int | None]] = []  # how each rank ended
        self._failed_at: float | None = None  # when a rank of this host failed (Unix time)
        self._doing = "preparing the host"  # what the host is busy with, for a full disk's reason
        self._live_namespace: HostNamespace | None = None  # the script's, while it runs
        self._actions = ActionRunner(
            self._action_argv,
            lambda: self._env,
            self.tree.code_dir,
            lambda data: self.reporter.emit(EventKind.ACTION, data),
            self._mask,
        )

    def begin(self) -> None:
        """Start now what the host waits for longest, before the agent's remaining set-up (its
        reporter's sender, which :meth:`run` does not need yet): the tree and, for a host whose
        namespaces are made early, its holder, which then makes them while the agent goes on.
        Best effort: what fails here is done again, and reported, by :meth:`run`."""
        if self._namespace is not None or self.stop_requested:
            return
        try:
            self.tree.create(self._tree_channels())
        except OSError:
            return  # a full disk, say: run() creates the tree again and says why it failed
        self._start_namespace_early()

    @property
    def stop_requested(self) -> bool:
        return self._stop.requested

    def request_stop(
        self, reason: str = "stop requested", grace_seconds: float | None = None
    ) -> None:
        """Stop the host, by default with the spec's grace period (safe in a signal handler)."""
        self._stop.request(reason, grace_seconds)

    def abandon(self, reason: str) -> None:
        """End the host at once because what holds it is gone (its backend's worker died): the
        script is killed without a grace period and the host ends ``InternalError`` with
        ``reason``, so the job is retried or fails by its retry strategy (safe from any thread)."""
        self._abandoned = reason
        self._stop.request(reason, 0)

    def run(self) -> HostResult:
        """Run every phase and report the ``exit`` event; never raises for a job's failure."""
        try:
            result = self._run_phases()
        except HostDisowned as exc:
            result = self._disowned(str(exc))
        except Exception as exc:  # anything not the user's fault is trainops' (retryable) error
            result = self._internal_error(exc)
        if self._abandoned is not None:
            result = HostResult(HostOutcome.INTERNAL_ERROR, result.exit_code, self._abandoned)
        result = self._masked(result)
        self._settle_actions()
        self.log.close()  # the last metric values go before the exit event
        self.reporter.emit(
            EventKind.EXIT,
            {
                "outcome": str(result.outcome),
                "exit_code": result.exit_code,
                "failure_reason": result.failure_reason,
            }
            | ({"ranks": self._rank_exits} if len(self._rank_exits) > 1 else {})
            | self._failure_time(result),
        )
        return result

    def _settle_actions(self) -> None:
        """Before the exit event, while this host's token holds: decline an action sent since
        the script ended (the control plane then runs it itself), and report those under way."""
        with contextlib.suppress(Exception):  # nothing may keep the exit event from going
            self._take_commands()
        self._actions.join(ACTION_REPORT_SECONDS)

    def _run_phases(self) -> HostResult:
        for line in host_warnings(self.job.instance_type, self.assignment.resources):
            self.log.agent(line)
        try:
            self._phase(Phase.DOWNLOADING, "Downloading the source, configuration and input data")
            try:
                command = self._prepare()
                result = self._channel_outcome(self._train(command))
            finally:
                close_channels(self._channels)  # writers stop and mounts go, whatever happened
                self._channels = []
                if self._namespace is not None:
                    self._namespace.close()
                    self._namespace = None
        except JobFailure as exc:
            result = HostResult(HostOutcome.FAILED, None, exc.reason)
        except (TrainopsError, OSError) as exc:
            if isinstance(exc, OSError) and not is_out_of_space(exc):
                raise
            result = HostResult(HostOutcome.FAILED, None, self._failure_of(exc))
        result = self._masked(self._blame_a_full_disk(result))
        failed = result.outcome is HostOutcome.FAILED and self._failed_before_stop()
        if self.stop_requested and not failed:
            result = HostResult(HostOutcome.STOPPED, result.exit_code, None)
        self._mark_outcome(result)
        return self._upload(result)

    def _masked(self, result: HostResult) -> HostResult:
        """``result`` with the job's secrets masked in its reason (the command line and the
        script's error both may show them; output/failure and the exit event get this one)."""
        if result.failure_reason is None:
            return result
        return dataclasses.replace(result, failure_reason=self._mask(result.failure_reason))

    def _channel_outcome(self, result: HostResult) -> HostResult:
        """A channel that had to stop streaming while the script ran fails the host with its
        reason, whatever the script made of the data it got (a stop stays a stop)."""
        failure = channel_failure(self._channels)
        if failure is None or result.outcome is HostOutcome.STOPPED or self.stop_requested:
            return result
        return HostResult(HostOutcome.FAILED, result.exit_code, failure)

    def _failure_of(self, exc: Exception) -> str:
        if is_out_of_space(exc):
            return self._no_space(self._doing)
        return f"{type(exc).__name__}: {exc}"

    def _no_space(self, doing: str) -> str:
        return no_space_reason(self.tree.root, doing)

    def _blame_a_full_disk(self, result: HostResult) -> HostResult:
        """A step that failed while the disk is full most likely failed for that: say so."""
        reason = result.failure_reason or ""
        if result.outcome is not HostOutcome.FAILED or reason.startswith("no space left"):
            return result
        if not disk_full(self.tree.root):
            return result
        return HostResult(
            result.outcome, result.exit_code, f"{self._no_space(self._doing)}; {reason}"
        )

    # Downloading -------------------------------------------------------------------------

    def _prepare(self) -> ScriptCommand | None:
        self.tree.create(self._tree_channels())
        if self._namespace is None:  # else begun already (see begin)
            self._start_namespace_early()
        release_spare_holder()  # a holder forked for the host, where it made none early
        self._doing = "downloading the source"
        self._fetch_code()
        self._doing = "writing the configuration files"
        write_configs(self.tree, self.assignment, self.job)
        self._namespace_made()  # before anything says where the script sees its tree
        self._doing = "restoring the checkpoints"
        self._sidecars = Sidecars(self._sidecar_context())
        self._sidecars.prepare()
        self._check_opt_ml()
        context = self._channel_context()
        for channel in self.job.inputs:
            self._take_commands()
            self._doing = f"preparing channel {channel.name!r} ({channel.mode} mode)"
            if not self.stop_requested:
                source = open_channel(channel, context)
                self._channels.append(source)  # closed after training, also if prepare fails
                source.prepare()
        self._doing = "installing the job's Python environment"
        return None if self.stop_requested else self._command()

    def _tree_channels(self) -> list[str]:
        """The channels with a directory in the tree: a Pipe channel has FIFOs
        (input/data/<name>_<epoch>) instead."""
        return [c.name for c in self.job.inputs if c.mode != "Pipe"]

    def _start_namespace_early(self) -> None:
        """A single-host job whose channels mount nothing gets its namespaces made while the
        host prepares (they are ready when the script starts): its launch waits for nothing."""
        if not namespaces_available() or len(self.assignment.hosts) > 1:
            return
        if any(c.mode == "FastFile" or c.file_system is not None for c in self.job.inputs):
            return  # its mounts are known once the channels are prepared
        (self.state_dir / "env").mkdir(exist_ok=True)  # kept visible: it must exist now
        opt_ml = self.tree.root if opt_ml_shown(self.job.mount_opt_ml) else None
        try:
            self._namespace = start_host_namespace(
                self.assignment, self.state_dir, (), opt_ml, self._isolation()
            )
        except (LaunchError, OSError) as exc:
            self._without_namespaces(str(exc))

    def _namespace_made(self) -> None:
        """The early namespaces, in place; a holder that failed although the machine's probe
        allowed them leaves this host without namespaces (one line says so), as on a machine
        without them, rather than failing the job."""
        if self._namespace is None:
            return
        try:
            self._namespace.ready()
        except NamespaceError as exc:
            self._namespace.close()
            self._namespace = None
            self._without_namespaces(str(exc))

    def _without_namespaces(self, why: str) -> None:
        forgo_namespaces()
        self.log.agent(
            f"WARNING: this host's namespaces could not be made ({why}) although this "
            "machine's probe allowed them: its processes run without them"
        )

    def _check_opt_ml(self) -> None:
        """/opt/ml is shown by default; where it cannot be, the host log says so in one line,
        and a checkpoint directory under /opt/ml is refused rather than silently moved."""
        if not self.job.mount_opt_ml or opt_ml_shown(True):
            return
        why = containment().why or "no private mount namespace"
        if self.job.checkpoint_uri is not None:
            raise JobFailure(
                f"checkpoint local_path {self.job.checkpoint_local_path}: /opt/ml cannot be "
                f"shown on this machine ({why}); set `mount_opt_ml: false` to have it re-rooted "
                "in the host's tree (SM_CHECKPOINT_DIR names it)"
            )
        self.log.agent(
            f"WARNING: /opt/ml is not shown ({why}): the SM_* variables name the host's tree "
            "instead"
        )

    def _isolation(self) -> Isolation:
        """What the script must not see: the trainops home and the user's (less its own tree,
        private home and Python environment) and every job's remote-shell sockets (less its
        own); and must not change: the Python installation (see ``_protected``)."""
        masks = [self.settings.home, Path.home() / ".trainops", socket_parent()]
        masks += [home] if (home := user_home()) is not None else []
        own = [self.tree.root, self.state_dir / "env", private_home(self.state_dir)]
        keeps = list(own)  # the interpreters stay too, read-only: ``read_only`` below
        if self._remote is not None:
            keeps.append(self._remote.directory)
        spared = [self.settings.home, self.state_dir, *own]
        read_only = python_installation(self.job.python, spared)
        return Isolation(tuple(masks), tuple(keeps), read_only)

    def _channel_context(self) -> ChannelContext:
        scratch = self.state_dir / "channels"
        scratch.mkdir(parents=True, exist_ok=True)
        return ChannelContext(
            data_dir=self.tree.data_dir,
            scratch_dir=scratch,
            hosts=self.assignment.hosts,
            current_host=self.assignment.current_host,
            store_for=self._store,
            settings=self.settings,
            log=self.log.agent,
            stopping=lambda: self.stop_requested,
        )

    def _fetch_code(self) -> None:
        uri = self.assignment.code_uri
        if not uri:
            return
        archive = self.state_dir / "sourcedir.tar.gz"
        self._store(uri).download(uri, archive)
        safe_extract(archive, self.tree.code_dir, self.settings.archive)
        archive.unlink()

    def _sidecar_context(self) -> SidecarContext:
        scratch = self.state_dir / "sidecars"
        scratch.mkdir(parents=True, exist_ok=True)
        return SidecarContext(
            assignment=self.assignment,
            tree=self.tree,
            layout=self.layout,
            state_dir=scratch,
            settings=self.settings,
            store_for=self._store,
            log=self.log.agent,
            add_metric_listener=self.log.add_metric_listener,
            sync_interval=self._sync_interval,
            report=self._report,
            interrupted=lambda: self._stop.interrupted,
        )

    def _command(self) -> ScriptCommand:
        self._env = script_environment(self.tree, self.assignment, self.job, self.environ)
        if namespaces_available():  # the user's home is masked: the host's own instead
            self._env["HOME"] = str(private_home(self.state_dir))
        if self._sidecars is not None:
            self._env = self._sidecars.environment(self._env)
        installer = JobInstaller(
            self.tree.code_dir, self.state_dir / "env", self._run_tool, self.job.python
        )
        try:
            return script_command(self.tree, self.job, self._env, installer)
        finally:
            if self._tool_namespace is not None:
                self._tool_namespace.close()
                self._tool_namespace = None

    def _contained(self, argv: Sequence[str]) -> list[str]:
        """An installer command (it runs the job's own setup code) inside the host's
        namespaces, as the script will be: one set for all of them, made on first use."""
        if not namespaces_available():
            return list(argv)
        if self._namespace is not None:
            try:
                return self._namespace.join(argv, (), None)
            except NamespaceError as exc:
                raise JobFailure(f"cannot make this host's namespaces: {exc}") from None
        if self._tool_namespace is None:
            opt_ml = self.tree.root if opt_ml_shown(self.job.mount_opt_ml) else None
            try:
                self._tool_namespace = hold_host_namespace(
                    self.assignment, self.state_dir, (), opt_ml, self._isolation()
                )
            except LaunchError as exc:
                raise JobFailure(str(exc)) from None
        return self._tool_namespace.join(argv, (), None)

    def _run_tool(self, argv: Sequence[str]) -> tuple[int, list[str]]:
        """Run an installer command with its output as agent lines; a stop ends it too."""
        self.log.agent("Running " + " ".join(argv))
        process = ScriptProcess(
            self._contained(argv),
            cwd=self.tree.code_dir,
            env=self._env,
            on_line=self._tool_lines,
            marker=self._marker(),
        )
        process.start()
        return self._supervise(process), list(process.stderr_tail)

    def _tool_lines(self, stream: str, lines: list[str], ts: float) -> None:
        del stream, ts  # an installer's output is the agent's own, in one stream, timed on write
        for line in lines:
            self.log.agent(line)

    # Training ----------------------------------------------------------------------------

    def _train(self, command: ScriptCommand | None) -> HostResult:
        self._take_commands()
        if self.stop_requested or command is None:
            return HostResult(HostOutcome.STOPPED)
        if self._sidecars is not None:
            self._sidecars.start()
        self._phase(Phase.TRAINING, "Training in progress")
        self._doing = "the script ran"
        try:
            return self._run_group(command)
        finally:
            if self._remote is not None:
                self._remote.close()
                self._remote = None

    def _run_group(self, command: ScriptCommand) -> HostResult:
        if self._spawn_api is not None and len(self.assignment.hosts) > 1:
            self._remote = RemoteShell(self._spawn_api, self.assignment.hosts, self.log.agent)
            self._remote.start()
        paths = None if self._remote is None else self._remote.paths()
        try:
            binds = [bind for source in self._channels for bind in source.binds()]
            opt_ml = self.tree.root if opt_ml_shown(self.job.mount_opt_ml) else None
            launch = host_processes(
                self.assignment,
                command,
                self._env,
                self.state_dir,
                paths,
                binds=binds,
                opt_ml=opt_ml,
                isolation=self._isolation(),
                namespace=self._namespace,
            )
        except (LaunchError, OSError) as exc:
            return HostResult(HostOutcome.FAILED, None, str(exc))
        self._live_namespace = launch.namespace or self._namespace  # one host's: made early
        try:
            return self._run_launch(launch)
        finally:
            self._live_namespace = None
            if launch.namespace is not None:
                launch.namespace.close()

    def _action_argv(self, argv: Sequence[str]) -> list[str] | None:
        """A rule's command action, run as the script's processes run: joined into the host's
        namespaces while the script runs (``None`` at other times: the control plane runs it
        itself); unisolated like the script where this machine allows no namespaces."""
        namespace = self._live_namespace
        if namespace is not None:
            return namespace.join(argv, (), None)
        if self._running is not None and self._env and not namespaces_available():
            return list(argv)
        return None

    def _run_launch(self, launch: HostLaunch) -> HostResult:
        for warning in launch.warnings:
            self.log.agent(f"WARNING: {warning}")
        self.log.agent("Invoking the script: " + " ".join(launch.command))
        if len(launch.processes) > 1:
            count, launcher = len(launch.processes), self.job.distribution.launcher
            self.log.agent(f"Starting {count} processes ({launcher})")
        group = ProcessGroup(
            launch.processes,
            cwd=self.tree.code_dir,
            on_line=self.log.rank_lines,
            marker=self._marker,
            spawn=launch.spawn,
        )
        group.notify_kill(self._before_kill)
        group.notify_death(self._script_killed)
        try:
            group.start()
        except OSError as exc:
            reason = exit_failure_reason(127, group.argv, [str(exc)])
            return HostResult(HostOutcome.FAILED, None, reason)
        for member in group.members:
            process = member.process
            self.reporter.emit(
                EventKind.PROCESS,
                {"pid": process.pid, "pgid": process.pgid, "command": unwrap(member.spec.argv)}
                | ({} if member.spec.rank is None else {"rank": member.spec.rank}),
            )
        priority = BackgroundPriority()
        try:
            if group.wait(LOWER_AFTER_SECONDS) is None:  # not a script that is done at once
                priority.lower(group.pids(), group.capture_threads())
                group.when_exited(priority.restore)  # in front again once it is done
            returncode = self._supervise(group)
        finally:
            priority.restore()
        self._rank_exits = group.rank_exits()
        return self._result_of(returncode, group)

    def _report(self, kind: str, data: dict[str, Any]) -> None:
        self.reporter.emit(EventKind(kind), data)

    def _before_kill(self) -> None:
        """Just before a stop's SIGKILL: the sidecars note what the script was writing (a
        checkpoint file left torn is never uploaded). Nothing here may keep the kill back."""
        if self._sidecars is None:
            return
        try:
            self._sidecars.before_kill()
        except Exception as exc:  # the kill goes out whatever went wrong here
            self.log.agent(f"Noting the files being written before the kill failed: {exc}")

    def _script_killed(self, signum: int, when: float) -> None:
        """A process of the script died of a signal the agent did not send: the sidecars note
        it (a checkpoint file that death may have torn is never uploaded)."""
        if self._sidecars is None:
            return
        try:
            self._sidecars.script_killed(signum, when)
        except Exception as exc:  # from a watcher thread: say it, and carry on
            self.log.agent(f"Noting the script's death by signal {signum} failed: {exc}")

    def _take_commands(self) -> None:
        """The control plane's commands: stops, rules' command actions, and spawns for the
        remote shell's keeper."""
        for command in self.reporter.commands():
            if self._actions.take(command):  # a rule's command action (see _actions)
                continue
            if not self._stop.take(command) and self._remote is not None:
                self._remote.take(command)

    def _supervise(self, process: ScriptProcess | ProcessGroup) -> int:
        """Wait for ``process``, passing on stop requests (SIGTERM, SIGKILL after the grace);
        raises :class:`HostDisowned` once the control plane has revoked this host."""
        self._running = process
        while process.wait(POLL_SECONDS) is None:
            self._take_commands()
            self._stop.deliver(process, self.log.agent)
            self._check_owned()
        returncode = process.finish()
        self._running = None
        return returncode

    def _failure_time(self, result: HostResult) -> dict[str, float]:
        """``failed_at`` for the exit event of a host whose rank failed: the control plane
        names the job's failure after the earliest across hosts, not the first host to end."""
        if result.outcome is not HostOutcome.FAILED or self._failed_at is None:
            return {}
        return {"failed_at": self._failed_at}

    def _failed_before_stop(self) -> bool:
        """A rank failed on its own before the stop came (the control plane stopping the job
        for another host's failure): the host failed, and says why, rather than Stopped."""
        stopped_at = self._stop.requested_at
        return (
            self._failed_at is not None and stopped_at is not None and self._failed_at < stopped_at
        )

    def _result_of(self, returncode: int, group: ProcessGroup) -> HostResult:
        self._failed_at = group.failed_at if returncode != 0 else None
        if self.stop_requested and not self._failed_before_stop():
            return HostResult(HostOutcome.STOPPED, returncode)
        if returncode == 0:
            return HostResult(HostOutcome.COMPLETED, 0)
        reason = read_failure_file(self.tree.failure_file) or exit_failure_reason(
            returncode, group.failed_argv(), group.stderr_tail()
        )
        failed = group.first_failure
        by_launcher = group.failed_rank()
        if by_launcher is not None and not self.tree.failure_file.exists():
            rank, code = by_launcher.rank, by_launcher.exit_code
            reason = exit_failure_reason(
                returncode if code is None else code,
                group.failed_argv(),
                by_launcher.stderr_tail or group.stderr_tail(),
            )
            reason = f"rank {rank} on {self._host_of_rank(rank)}: {reason}"[:1024]
        elif failed is not None and failed.spec.rank is not None and len(group.members) > 1:
            reason = f"{failed.label} on {self.assignment.current_host}: {reason}"[:1024]
        return HostResult(HostOutcome.FAILED, returncode, self._with_opt_ml_hint(reason, group))

    def _with_opt_ml_hint(self, reason: str, group: ProcessGroup) -> str:
        """A script that failed on a path under /opt/ml the job did not mount: say what to do."""
        failure = "\n".join([reason, *group.stderr_tail()])
        hint = opt_ml_hint(failure, opt_ml_shown(self.job.mount_opt_ml), self.job.mount_opt_ml)
        if hint is None:
            return reason
        return f"{reason[: 1020 - len(hint)]}\n{hint}"

    def _host_of_rank(self, rank: int) -> str:
        """Where a rank a launcher names runs: mpirun lays ranks out host by host (``-map-by
        slot``), torchrun starts this host's ranks only."""
        hosts, per_host = self.assignment.hosts, self.job.distribution.processes_per_host
        if self.job.distribution.launcher == "mpi" and 0 <= rank < per_host * len(hosts):
            return hosts[rank // per_host]
        return self.assignment.current_host

    def _mark_outcome(self, result: HostResult) -> None:
        try:
            self.tree.output_dir.mkdir(parents=True, exist_ok=True)
            if result.outcome is HostOutcome.COMPLETED:
                self.tree.success_file.touch()
            elif result.outcome is HostOutcome.FAILED and not self.tree.failure_file.exists():
                self.tree.failure_file.write_text(result.failure_reason or "", encoding="utf-8")
        except OSError as exc:
            if not is_out_of_space(exc):
                raise
            self.log.agent(f"Could not mark the outcome in {self.tree.output_dir}: {exc}")

    # Uploading ---------------------------------------------------------------------------

    def _upload(self, result: HostResult) -> HostResult:
        self._phase(Phase.UPLOADING, "Uploading generated training artifacts")
        self._doing = "packing and uploading the model and output archives"
        self._check_owned()
        try:
            for artifact in self._upload_outputs():
                self._artifact(artifact)
        except (TrainopsError, OSError) as exc:
            if isinstance(exc, OSError) and not is_out_of_space(exc):
                raise
            reason = self._failure_of(exc)
            if not is_out_of_space(exc):
                reason = f"Uploading outputs failed: {reason}"
            self.log.agent(reason)
            if is_out_of_space(exc):
                self._free_outputs()
            if result.outcome is HostOutcome.COMPLETED:
                result = HostResult(HostOutcome.FAILED, result.exit_code, reason)
        self._check_owned()
        self._upload_log()
        return result

    def _check_owned(self) -> None:
        """Raise :class:`HostDisowned` once the control plane has revoked this host: after the
        script, as while it runs, another attempt may own the job's outputs, so a host revoked
        before or between its uploads uploads nothing more."""
        if (why := self.reporter.disowned) is not None:
            raise HostDisowned(why)

    def _free_outputs(self) -> None:
        """The disk is full: drop the outputs that could not be uploaded, so that the host's
        exit can still be journaled and recorded."""
        state = self.state_dir
        freed = free_paths(
            [
                self.tree.model_dir,
                self.tree.output_data_dir,
                state / "model.tar.gz",
                state / "output.tar.gz",
            ]
        )
        self.log.agent(f"Deleted {freed / 1e6:.1f} MB of outputs that could not be uploaded")

    def _upload_outputs(self) -> list[Artifact]:
        self.log.flush()  # sidecars finish having heard every metric value the script printed
        artifacts = [] if self._sidecars is None else self._sidecars.finish()
        store = self._store(self.layout.output_prefix)
        artifacts += upload_archives(store, self.tree, self.layout, self.state_dir, self.log.agent)
        return artifacts

    def _upload_log(self) -> None:
        self.log.flush()
        try:
            artifact = upload_log(
                self._store(self.layout.output_prefix), self.log.path, self.layout
            )
        except (TrainopsError, OSError) as exc:
            if isinstance(exc, OSError) and not is_out_of_space(exc):
                raise
            self.log.agent(f"Uploading the host log failed: {exc}")
            return
        self._artifact(artifact)

    # Helpers -----------------------------------------------------------------------------

    def _phase(self, phase: Phase, message: str) -> None:
        self.reporter.emit(EventKind.PHASE, {"phase": str(phase), "message": message})

    def _artifact(self, artifact: Artifact) -> None:
        self.reporter.emit(EventKind.ARTIFACT, {"name": artifact.name, "uri": artifact.uri})

    def _marker(self) -> str:
        """The environment marker of one command of this host (see ``_reaper``)."""
        a = self.assignment
        return new_marker(a.job_name, f"attempt-{a.attempt}", a.current_host)

    def _store(self, uri: str) -> ObjectStore:
        scheme = uri.partition("://")[0]
        if scheme not in self._stores:
            self._stores[scheme] = store_for(uri, self.settings)
        return self._stores[scheme]

    def _disowned(self, why: str) -> HostResult:
        """The control plane revoked this host while its script ran (another attempt may hold
        the job's outputs and checkpoints now): stop the script at once and upload nothing."""
        self.log.agent(f"Stopping: {why}; nothing more is uploaded")
        if self._running is not None:
            self._running.terminate(min(self._stop.grace_seconds, INTERNAL_ERROR_GRACE_SECONDS))
            self._running.finish()
            self._running = None
        if self._sidecars is not None:
            self._sidecars.abort()
        return HostResult(HostOutcome.INTERNAL_ERROR, None, f"InternalError: {why}"[:1024])

    def _internal_error(self, exc: BaseException) -> HostResult:
        if self._running is not None:
            self._running.terminate(min(self._stop.grace_seconds, INTERNAL_ERROR_GRACE_SECONDS))
            self._running.finish()
        if self._sidecars is not None:
            self._sidecars.abort()
        summary = f"{type(exc).__name__}: {exc}"
        with (
            contextlib.suppress(OSError),  # a full disk must not keep the exit from being sent
            (self.state_dir / "agent.log").open("a", encoding="utf-8") as handle,
        ):
            handle.write(traceback.format_exc())
        self.log.agent(f"internal error: {summary}")
        return HostResult(HostOutcome.INTERNAL_ERROR, None, f"InternalError: {summary}"[:1024])
