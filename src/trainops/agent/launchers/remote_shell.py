"""A remote shell between the hosts of a job, for launchers that start daemons with ``ssh``.

There is no sshd between the hosts of a trainops job. A launcher that reaches other hosts with a
remote shell (Open MPI's ``mpirun`` runs ``<agent> algo-2 orted …``) is given this module as its
agent instead:

``python remote_shell.py rsh [ssh options] HOST WORD…``
    asks this host's trainops agent (over the Unix socket in ``$TRAINOPS_REMOTE_SHELL``, with the
    key in ``$TRAINOPS_REMOTE_SHELL_KEY``) to run
    ``WORD…`` on ``HOST``; the control plane passes the request to that host's agent, which hands
    it to the host's keeper. It exits with the remote command's exit status, as ssh does, or 255
    with the reason when the command could not be run.

``python remote_shell.py keeper --socket PATH``
    the process a launcher starts on the hosts it reaches this way. It runs each command it is
    handed (in the host's namespace and environment: it is a process of the job), reports when it
    started and how its first process ended, and adopts whatever the command leaves running (it
    is a child subreaper, so ``orted --daemonize`` stays its descendant). It ends once it has
    run a command and everything that command started has ended; SIGTERM is passed on to all of
    it.

Both sockets let in only the job's own processes on their host: the caller must run as the
socket's owner (``SO_PEERCRED``, checked before its request is read), a caller of ``rsh.sock``
must descend from the host's agent (a process of this host's job), and its request must carry
the host's key (a secret of one host of one attempt, made by its agent and given only to the
job's processes in their environment), compared in constant time before anything of the request
is acted on. The keeper takes the key out of
its own environment, so the commands it runs do not inherit it.

The words are read as a remote shell reads its command line (quotes; ``NAME=value`` and
``export`` statements and ``cd`` before ``;``, as Open MPI's ``--prefix`` sends them); anything
else of a shell (pipes, redirection, substitution) is refused. Nothing is ever run by a shell.

Standard library only, and run by path: it starts once per remote command.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import hmac
import json
import os
import re
import select
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "KEY_ENV",
    "SOCKET_ENV",
    "RemoteCommand",
    "ShellSyntaxError",
    "check_caller",
    "main",
    "parse_command",
    "read_lines",
    "send_line",
]

SOCKET_ENV = "TRAINOPS_REMOTE_SHELL"
KEY_ENV = "TRAINOPS_REMOTE_SHELL_KEY"
WAIT_FIRST_ENV = "TRAINOPS_KEEPER_WAIT_SECONDS"
PR_SET_CHILD_SUBREAPER = 36
_SSH_OPTIONS_WITH_VALUE = frozenset("bcDEeFIiJLlmOopQRSWw")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# $NAME, ${NAME}, ${NAME:-default} and ${NAME-default} (the default taken literally)
_REFERENCE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)
_SEPARATORS = frozenset({";", "&&"})
_MAX_LINE = 1 << 20


class ShellSyntaxError(ValueError):
    """The remote command uses shell syntax this remote shell does not run."""


@dataclass(frozen=True, slots=True)
class RemoteCommand:
    """A remote command line read as a shell would: the program's argv, environment, directory."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    cwd: str | None = None


def parse_command(words: Sequence[str], env: Mapping[str, str]) -> RemoteCommand:
    """Read ``words`` (joined with spaces, as ssh sends them) as a remote shell would."""
    lexer = shlex.shlex(" ".join(words), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise ShellSyntaxError(f"cannot read the command line: {exc}") from None
    statements: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            statements.append([])
        elif token and set(token) <= set(";&|<>()"):
            raise ShellSyntaxError(f"{token!r} (pipes, redirection, subshells) is not supported")
        elif "`" in token or "$(" in token:
            raise ShellSyntaxError(f"command substitution ({token!r}) is not supported")
        else:
            statements[-1].append(token)
    variables, cwd = dict(env), None
    statements = [s for s in statements if s]
    if not statements:
        raise ShellSyntaxError("the command line is empty")
    for statement in statements[:-1]:
        cwd = _run_builtin(statement, variables, cwd)
    assignments, argv = _split_assignments(statements[-1])
    for name, value in assignments:
        variables[name] = _expand(value, variables)
    if not argv:
        raise ShellSyntaxError("the command line names no program to run")
    return RemoteCommand(argv, variables, cwd)


def _split_assignments(statement: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``NAME=value`` words at the front of a statement, and the rest of it."""
    assignments: list[tuple[str, str]] = []
    index = 0
    while index < len(statement) and (match := _ASSIGNMENT.fullmatch(statement[index])):
        assignments.append((match[1], match[2]))
        index += 1
    return assignments, statement[index:]


def _run_builtin(statement: list[str], variables: dict[str, str], cwd: str | None) -> str | None:
    """One statement before the last: assignments, ``export``, ``cd``; returns the directory."""
    assignments, rest = _split_assignments(statement)
    for name, value in assignments:
        variables[name] = _expand(value, variables)
    if not rest:
        return cwd
    if rest[0] == "export":
        for word in rest[1:]:
            match = _ASSIGNMENT.fullmatch(word)
            if match:
                variables[match[1]] = _expand(match[2], variables)
            elif not _NAME.fullmatch(word):
                raise ShellSyntaxError(f"export {word!r}: not a variable name")
        return cwd
    if rest[0] == "cd" and len(rest) == 2:
        return _expand(rest[1], variables)
    raise ShellSyntaxError(f"only the last statement may run a program, not {rest[0]!r}")


def _expand(value: str, variables: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match[1] or match[4]
        if match[3] is None:
            return variables.get(name, "")
        current = variables.get(name)
        unset = current is None or (match[2] == ":" and not current)
        return match[3] if unset else str(current)

    return _REFERENCE.sub(replace, value)


# --- rsh: this side ---------------------------------------------------------------------------


def _target_and_words(args: Sequence[str]) -> tuple[str, list[str]]:
    """Skip ssh's options (``-x``, ``-o Opt=v``, ``-p 22`` …); then the host, then the words."""
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "--":
        option = args[index]
        takes_value = len(option) == 2 and option[1] in _SSH_OPTIONS_WITH_VALUE
        index += 2 if takes_value else 1
    if index < len(args) and args[index] == "--":
        index += 1
    if index + 1 >= len(args):
        raise SystemExit("usage: remote_shell.py rsh [ssh options] HOST COMMAND [ARG…]")
    return args[index], list(args[index + 1 :])


def _rsh(args: Sequence[str]) -> int:
    host, words = _target_and_words(args)
    path, key = os.environ.get(SOCKET_ENV), os.environ.get(KEY_ENV)
    if not path or not key:
        missing = SOCKET_ENV if not path else KEY_ENV
        print(f"trainops rsh: {missing} is not set: run by a trainops job only", file=sys.stderr)
        return 255
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            send_line(conn, {"key": key, "host": host, "words": words})
            for reply in read_lines(conn):
                if reply.get("state") in ("exited", "failed"):
                    return _ended(host, reply)
    except OSError as exc:
        print(f"trainops rsh: cannot reach this host's agent at {path}: {exc}", file=sys.stderr)
        return 255
    print(f"trainops rsh: this host's agent went away before {host} answered", file=sys.stderr)
    return 255


def _ended(host: str, reply: Mapping[str, object]) -> int:
    if reply.get("error"):
        print(f"trainops rsh: {host}: {reply['error']}", file=sys.stderr)
    code = reply.get("exit_code")
    if reply.get("state") == "exited" and isinstance(code, int):
        return code if 0 <= code < 256 else 255
    return 255


def check_caller(conn: socket.socket, key: str, ancestor: int | None = None) -> dict[str, Any]:
    """The first request of ``conn`` if its caller is the job's own, else :class:`PermissionError`
    (nothing of the request is acted on): a process of this uid (and, with ``ancestor``, one
    that descends from that process: the host's agent) whose request carries ``key``. A
    stranger's request is read only up to its first line (1 MiB at most)."""
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    if uid != os.geteuid():
        raise PermissionError(f"refused pid {pid}: it runs as uid {uid}, not {os.geteuid()}")
    if ancestor is not None and not _descends_from(pid, ancestor):
        raise PermissionError(f"refused pid {pid}: it is not a process of this host's job")
    request = next(read_lines(conn), None)
    given = request.get("key") if request is not None else None
    # Compared as bytes of the same kind: a wrong key of any length takes the same path.
    if (
        not key
        or not isinstance(given, str)
        or not hmac.compare_digest(given.encode("utf-8", "surrogatepass"), key.encode("utf-8"))
    ):
        raise PermissionError(f"refused pid {pid}: it did not give this host's remote-shell key")
    assert request is not None
    return request


def _descends_from(pid: int, ancestor: int) -> bool:
    """True if ``ancestor`` is ``pid`` or one of its parents (read from /proc)."""
    for _ in range(4096):  # deeper than any real process tree
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def send_line(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode("utf-8") + b"\n")


def read_lines(conn: socket.socket) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``conn``, one a line, until it closes (other lines are skipped;
    a line over 1 MiB is an :class:`OSError`). Shared with the agent's side (``_remote``)."""
    buffer = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buffer += chunk
        if len(buffer) > _MAX_LINE:
            raise OSError("a reply line is too long")
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                parsed = json.loads(line)
                if isinstance(parsed, dict):
                    yield parsed


# --- keeper: the target side ------------------------------------------------------------------


class _Keeper:
    """Runs the commands handed over its socket and waits for all they start."""

    def __init__(self, path: Path, wait_first: float, key: str) -> None:
        self.path = path
        self.wait_first = wait_first
        self.key = key
        self.waiting: dict[int, tuple[socket.socket, subprocess.Popen[bytes]]] = {}
        self.served = 0
        self.failed = 0  # commands that could not be started: the host did not do its part
        self.stopping = False
        self.started = time.monotonic()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def run(self) -> int:
        _become_subreaper()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.listener.listen(16)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            return self._loop()
        finally:
            self.listener.close()
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _loop(self) -> int:
        while True:
            readable, _, _ = select.select([self.listener], [], [], 0.2)
            if readable and not self.stopping:
                self._accept()
            if not self._reap() and (self.served or self.stopping):
                if self.stopping and not self.served:
                    return 143
                return 1 if self.failed else 0
            if not self.served and time.monotonic() - self.started > self.wait_first:
                print(
                    f"trainops keeper: no remote command came within {self.wait_first:g} s "
                    "(the host that launches the job's daemons never reached this host)",
                    file=sys.stderr,
                )
                return 1

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10.0)
        try:
            request = check_caller(conn, self.key)
        except OSError as exc:  # a stranger (PermissionError) or a broken request: nothing runs
            print(f"trainops keeper: {exc}", file=sys.stderr)
            with contextlib.suppress(OSError):
                send_line(conn, {"state": "failed", "error": str(exc)})
            conn.close()
            return
        try:
            self._start(conn, request)
        except (OSError, ValueError) as exc:
            with contextlib.suppress(OSError):
                send_line(conn, {"state": "failed", "error": f"bad request: {exc}"})
            conn.close()

    def _start(self, conn: socket.socket, request: Mapping[str, object]) -> None:
        words = request.get("words")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError("words must be a list of strings")
        self.served += 1
        try:
            command = parse_command(words, os.environ)
            process = subprocess.Popen(
                command.argv, env=command.env, cwd=command.cwd, stdin=subprocess.DEVNULL
            )
        except (OSError, ShellSyntaxError) as exc:
            self.failed += 1
            print(f"trainops keeper: cannot run {' '.join(words)[:200]}: {exc}", file=sys.stderr)
            send_line(conn, {"state": "exited", "exit_code": 127, "error": str(exc)})
            conn.close()
            return
        send_line(conn, {"state": "started", "pid": process.pid})
        self.waiting[process.pid] = (conn, process)

    def _reap(self) -> bool:
        """Collect every child that has ended; ``False`` once none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            entry = self.waiting.pop(pid, None)
            if entry is not None:
                conn, process = entry
                process.returncode = os.waitstatus_to_exitcode(status)
                with contextlib.suppress(OSError):
                    code = process.returncode
                    send_line(
                        conn, {"state": "exited", "exit_code": code if code >= 0 else 128 - code}
                    )
                conn.close()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


def _become_subreaper() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("trainops keeper: cannot become a child subreaper", file=sys.stderr)


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _wait_first() -> float:
    """``$TRAINOPS_KEEPER_WAIT_SECONDS`` (from the job's environment), else an hour."""
    try:
        value = float(os.environ.get(WAIT_FIRST_ENV) or 3600.0)
    except ValueError:
        return 3600.0
    return value if 0 < value < float("inf") else 3600.0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["rsh"]:
        return _rsh(args[1:])
    parser = argparse.ArgumentParser(prog="remote_shell.py keeper")
    parser.add_argument("mode", choices=["keeper"])
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--wait-first", type=float, default=_wait_first())
    parsed = parser.parse_args(args)
    key = os.environ.pop(KEY_ENV, "")  # the commands it runs do not inherit it
    if not key:
        print(f"trainops keeper: {KEY_ENV} is not set: run by a trainops job only", file=sys.stderr)
        return 1
    return _Keeper(parsed.socket, parsed.wait_first, key).run()


if __name__ == "__main__":
    sys.exit(main())
