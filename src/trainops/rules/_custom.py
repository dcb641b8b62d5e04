"""Custom debugger rules in the rules service: the job's own rule class, run confined.

A custom rule (SageMaker's ``Rule.custom``: ``rules: [{name, source, rule_to_invoke,
rule_parameters}]``, or ``{rule: custom, rule_parameters: {source, rule_to_invoke, ...}}``) is
code from the job's source, so it never runs in the server. :class:`CustomRuleEvaluation`
takes the job's source archive (its ``code_uri``, unpacked with the archive limits into a
scratch folder), and starts ``trainops.debugger.rules._evaluator`` as a process of its own: a
new session, an empty environment (no token, no credentials), ``nice``, bounded in memory and
CPU time, confined by Landlock to reading the Python installation, the unpacked source and the
job's debug output, writing nothing and opening no TCP connection. A job whose tensors are in
object storage (``s3://``) has them copied by the control plane into the rule's scratch folder
each tick, as a reader may trust them (``_mirror``: an index file after its event file,
bounded), and the rule reads that folder: it gets the job's tensors, never a credential nor a
request of its own. The process writes a verdict line whenever its verdict changes; each tick
takes the latest. When the job ends, the service closes its stdin: it evaluates what is left
and ends with the final verdict (waited for at most :data:`FINAL_WAIT_S`). Where the machine
cannot confine it (no Landlock), the rule is an Error row saying so.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from trainops._errors import StorageError
from trainops.archive import safe_extract
from trainops.control.services import ServiceContext
from trainops.debugger.rules import ISSUES_FOUND, NO_ISSUES_FOUND
from trainops.debugger.rules._sandbox import landlock_abi
from trainops.protocol import RuleSpec
from trainops.rules._base import IN_PROGRESS, ProfilerData, RuleResult
from trainops.rules._debugger import debug_output_prefix
from trainops.rules._mirror import MirrorError, PrefixMirror
from trainops.storage import store_for
from trainops.store import JobRecord

__all__ = ["FINAL_WAIT_S", "CustomRuleError", "CustomRuleEvaluation"]

#: How long the service waits for a custom rule's final verdict once the job has ended.
FINAL_WAIT_S = 30.0
MEMORY_MB = 1024
CPU_SECONDS = 600
_LINE_LIMIT = 64 * 1024
_EVALUATOR = Path(__file__).resolve().parents[1] / "debugger" / "rules" / "_evaluator.py"
_log = logging.getLogger(__name__)
_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


class CustomRuleError(RuntimeError):
    """The custom rule failed (its own error, or the process that ran it)."""


class CustomRuleEvaluation:
    """One custom rule of one job, evaluated by its confined process."""

    def __init__(self, spec: RuleSpec, job: JobRecord, context: ServiceContext) -> None:
        if landlock_abi() < 1:
            raise ValueError("custom rules need Landlock (Linux 5.13+) to run confined here")
        self.spec, self.job, self.context = spec, job, context
        self.scratch = Path(tempfile.mkdtemp(prefix="trainops-rule-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.scratch, True)
        prefix = debug_output_prefix(job)
        self.mirror: PrefixMirror | None = None
        local = _local_path(prefix)
        if local is None:  # in object storage: copied here by the control plane, each tick
            local = self.scratch / "tensors"
            store = store_for(prefix, context.settings)
            self.mirror = PrefixMirror(prefix, store, local)
        self.tensors = local
        self.code = self._unpack(job)
        self.process: subprocess.Popen[bytes] | None = None
        self.latest: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    @property
    def _source(self) -> str:
        """The rule's file in the job's source: the spec's ``source`` (``Rule.custom``'s
        form), else the ``source`` rule parameter."""
        return str(self.spec.source or self.spec.rule_parameters["source"])

    @property
    def _rule_to_invoke(self) -> str:
        return str(self.spec.rule_to_invoke or self.spec.rule_parameters["rule_to_invoke"])

    def _unpack(self, job: JobRecord) -> Path:
        archive = self.scratch / "sourcedir.tar.gz"
        store_for(job.code_uri, self.context.settings).download(job.code_uri, archive)
        code = self.scratch / "code"
        code.mkdir()
        safe_extract(archive, code)
        archive.unlink()
        source = code / self._source
        if not source.is_file():
            raise ValueError(f"the job's source has no {self._source}")
        return code

    def evaluate(self, data: ProfilerData) -> RuleResult:
        """The latest verdict of the rule's process (its final one once ``data`` says the job
        ended)."""
        self._copy_new_tensors()
        if self.process is None:
            if not self.tensors.is_dir():
                if data.ended:
                    return RuleResult(NO_ISSUES_FOUND, "the job saved no tensors")
                return RuleResult(IN_PROGRESS, "waiting for the job's first tensors")
            self._start()
        if data.ended:
            self._finish()
        return self._verdict(data.ended)

    def _copy_new_tensors(self) -> None:
        """Copy the tensors that arrived (a job whose tensors are in object storage); a
        storage failure waits for the next tick, a prefix past the bounds ends the rule."""
        if self.mirror is None:
            return
        try:
            self.mirror.refresh()
        except StorageError as exc:
            _log.warning("custom rule %s: copying the tensors: %s", self.spec.name, exc)
        except MirrorError as exc:
            raise CustomRuleError(
                f"the job's tensors cannot be copied for the rule: {exc}"
            ) from None

    def _start(self) -> None:
        parameters = dict(self.spec.rule_parameters)
        parameters.pop("source", None)
        parameters.pop("rule_to_invoke", None)
        request = {
            "source": str(self.code / self._source),
            "code": str(self.code),
            "rule_to_invoke": self._rule_to_invoke,
            "parameters": parameters,
            "trial": str(self.tensors),
            "memory_mb": MEMORY_MB,
            "cpu_seconds": CPU_SECONDS,
            "poll_seconds": 1.0,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-I", str(_EVALUATOR)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.scratch,
            env=_ENVIRONMENT,
            start_new_session=True,
        )
        weakref.finalize(self, _kill, self.process)
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        self._reader = threading.Thread(target=self._read, daemon=True, name="custom-rule")
        self._reader.start()

    def close(self) -> None:
        """End the rule's process and remove its scratch folder (the service drops the job)."""
        if self.process is not None:
            _kill(self.process)
            if self._reader is not None:
                self._reader.join(FINAL_WAIT_S)
        self._finalizer()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with contextlib.suppress(OSError, ValueError):  # closed by close(): no longer needed
            self._read_lines(self.process.stdout)

    def _read_lines(self, stdout: Any) -> None:
        while line := stdout.readline(_LINE_LIMIT):
            try:
                verdict = json.loads(line)
            except (ValueError, RecursionError):  # the rule's own code wrote it: any line
                continue
            if isinstance(verdict, dict):
                with self._lock:
                    self.latest = verdict

    def _finish(self) -> None:
        assert self.process is not None and self.process.stdin is not None
        if not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(FINAL_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill(self.process)
        if self._reader is not None:
            self._reader.join(FINAL_WAIT_S)  # the last line is read
        _kill(self.process)

    def _verdict(self, ended: bool) -> RuleResult:
        with self._lock:
            latest = dict(self.latest or {})
        status = str(latest.get("status", IN_PROGRESS))
        details = str(latest.get("details", "waiting for the rule's first verdict"))[:1024]
        if status == "Error":
            raise CustomRuleError(details)
        if status == ISSUES_FOUND:
            evidence = latest.get("evidence")
            return RuleResult(
                ISSUES_FOUND, details, "", evidence if isinstance(evidence, dict) else {}
            )
        if status == NO_ISSUES_FOUND or ended:
            if ended and status != NO_ISSUES_FOUND and self.process is not None:
                code = self.process.poll()
                raise CustomRuleError(
                    f"the rule gave no final verdict (its process ended with {code})"
                )
            return RuleResult(NO_ISSUES_FOUND, details)
        return RuleResult(IN_PROGRESS, details)


def _local_path(uri: str) -> Path | None:
    """The folder of a ``file://`` URI (or a plain path); None for object storage."""
    parts = urlsplit(uri)
    if parts.scheme not in ("", "file"):
        return None
    return Path(unquote(parts.path) if parts.scheme else uri)


def _kill(process: subprocess.Popen[bytes]) -> None:
    """End the rule's process (its whole session) and close our ends of its pipes."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None and not pipe.closed:
            with contextlib.suppress(OSError):
                pipe.close()
