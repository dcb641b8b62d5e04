"""Per-job S3 identities on the served SeaweedFS (``trainops server --s3``).

A job's agents and script get a key of their own instead of the server's: it may read the
job's inputs (its channels' prefixes and its code) and write (and read back, list and delete)
only under the job's output prefixes (its output, checkpoints, profiler, debugger and
TensorBoard folders). SeaweedFS scopes an identity's actions by bucket and key pattern
(``Read:<bucket>/<key prefix>*``, and ``List:`` on the prefix a listing names), so the grants are
as narrow as the job's own URIs.

The identities live in weed's identity file (``-s3.config``, written atomically, mode 0600)
beside the server's own, and weed reloads that file on SIGHUP. A reload replaces an identity of
the same name but never drops one the file no longer names, so a revoked identity stays in the
file, disabled and without keys, until weed has applied it (then it is dropped from the file:
the next weed start never knew it). Each change is confirmed by a request signed with the
job's key before :meth:`JobIdentities.issue` or :meth:`JobIdentities.revoke` returns: a key is
usable when the agent starts, and refused once its job has ended.
"""

from __future__ import annotations

import json
import secrets
import string
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainops._errors import StorageError
from trainops._home import write_private
from trainops.storage._grants import JobGrant
from trainops.storage._settings import S3Settings

__all__ = ["JobIdentities", "identity_actions"]

_PREFIX = "trainops-job-"
_PROBE = ".trainops-identity-probe"
_KEY_ALPHABET = string.ascii_uppercase + string.digits
_APPLY_TIMEOUT_S = 10.0
_APPLY_POLL_S = 0.01
_RELOAD_AGAIN_S = 1.0


def identity_actions(grant: JobGrant, probe: str) -> list[str]:
    """weed's actions for ``grant``, plus reading ``probe`` (``bucket/key``: how a change is
    confirmed). A read URI is a key prefix as S3 lists it; a write URI a folder (``/`` ends it,
    so job ``a`` cannot write under ``a2/``)."""
    actions = [f"Read:{probe}*"]  # (weed matches a path only as a pattern)
    for pattern in _patterns(grant.read, folder=False):
        actions += [f"Read:{pattern}", f"List:{pattern}"]
    for pattern in _patterns(grant.write, folder=True):
        actions += [f"Write:{pattern}", f"Read:{pattern}", f"List:{pattern}"]
    return list(dict.fromkeys(actions))


def _patterns(uris: Iterable[str], *, folder: bool) -> list[str]:
    patterns = []
    for uri in uris:
        if not uri.startswith("s3://"):
            continue
        path = uri.removeprefix("s3://")
        if "/" not in path:
            path += "/"
        if folder and not path.endswith("/"):
            path += "/"
        patterns.append(f"{path}*")
    return patterns


class JobIdentities:
    """The job identities of one SeaweedFS: issued, revoked, and kept across its restarts.

    ``config`` is weed's identity file; ``admin`` the server's own identity (always first in
    it); ``reload`` asks weed to read the file again (SIGHUP); ``settings`` how weed is
    reached (once it runs); ``bucket`` where the probe key lies."""

    def __init__(
        self,
        config: Path,
        admin: dict[str, Any],
        reload: Callable[[], None],
        settings: Callable[[], S3Settings],
        bucket: str,
    ) -> None:
        self._config = config
        self._admin = admin
        self._reload = reload
        self._settings = settings
        self._bucket = bucket
        self._live: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Take the job identities a previous run left in the file (jobs that outlived it keep
        their keys) and write the file afresh (no revoked ones: weed starts from it)."""
        try:
            previous = json.loads(self._config.read_text()).get("identities", [])
        except (OSError, ValueError, AttributeError):
            previous = []
        for identity in previous if isinstance(previous, list) else []:
            name = identity.get("name") if isinstance(identity, dict) else None
            if isinstance(name, str) and name.startswith(_PREFIX) and identity.get("credentials"):
                self._live[name] = identity
        self._write([])

    def jobs(self) -> list[str]:
        """The jobs that hold an identity now."""
        with self._lock:
            return sorted(name.removeprefix(_PREFIX) for name in self._live)

    def issue(self, job: str, grant: JobGrant) -> dict[str, str]:
        """The variables that give an agent of ``job`` its new key (see :meth:`issue_key`)."""
        # The key names the endpoint, so the agent must not also start or look for a server's
        # S3 (TRAINOPS_S3_SERVE, s3.serve in the home's config.yaml), nor use client.json's.
        return {**self.issue_key(job, grant).client_env(), "TRAINOPS_S3_SERVE": "0"}

    def issue_key(self, job: str, grant: JobGrant) -> S3Settings:
        """A new key for ``job`` scoped to ``grant`` (a job's earlier key stops working), usable
        when this returns. Raises :class:`StorageError` when weed does not take it."""
        name = _PREFIX + job
        key = "TOJB" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(16))
        secret = secrets.token_urlsafe(30)
        identity = {
            "name": name,
            "credentials": [{"accessKey": key, "secretKey": secret}],
            "actions": identity_actions(grant, self._probe_path(name)),
        }
        issued = replace(self._settings(), access_key_id=key, secret_access_key=secret)
        with self._lock:
            self._live[name] = identity
            self._write([])
            self._reload()
            self._await(issued, name, usable=True)
        return issued

    def revoke(self, job: str) -> None:
        """End ``job``'s key (no-op when it has none); refused by weed when this returns."""
        name = _PREFIX + job
        with self._lock:
            identity = self._live.pop(name, None)
            if identity is not None:
                self._retire([identity])

    def retain(self, jobs: Collection[str]) -> None:
        """Revoke the key of every job not in ``jobs`` (those that ended while nobody watched)."""
        keep = {_PREFIX + job for job in jobs}
        with self._lock:
            gone = [self._live.pop(name) for name in list(self._live) if name not in keep]
            if gone:
                self._retire(gone)

    def _retire(self, identities: list[dict[str, Any]]) -> None:
        tombstones = [{"name": i["name"], "disabled": True, "actions": []} for i in identities]
        self._write(tombstones)
        self._reload()
        for identity in identities:
            credential = identity["credentials"][0]
            revoked = replace(
                self._settings(),
                access_key_id=credential["accessKey"],
                secret_access_key=credential["secretKey"],
            )
            self._await(revoked, identity["name"], usable=False)
        self._write([])  # applied: weed keeps them disabled until it stops

    def _write(self, tombstones: list[dict[str, Any]]) -> None:
        identities = [self._admin, *self._live.values(), *tombstones]
        write_private(self._config, json.dumps({"identities": identities}))

    def _probe_path(self, name: str) -> str:
        """The folder whose keys only ``name`` may read (none exists): where a change is tried."""
        return f"{self._bucket}/{_PROBE}/{name}/"

    def _await(self, s3: S3Settings, name: str, *, usable: bool) -> None:
        """Wait until a request signed with ``s3``'s key is answered as ``usable`` says."""
        from trainops._settings import Settings
        from trainops.storage._registry import store_for

        probe = f"s3://{self._probe_path(name)}probe"
        started = time.monotonic()
        deadline, again = started + _APPLY_TIMEOUT_S, started + _RELOAD_AGAIN_S
        while True:
            store = store_for(probe, Settings(home=self._config.parent, s3=s3))
            try:
                store.exists(probe)
                accepted = True
            except StorageError:
                accepted = False
            if accepted == usable:
                return
            if time.monotonic() > deadline:
                what = "take a new job key" if usable else "revoke a job key"
                raise StorageError(f"SeaweedFS did not {what} within {_APPLY_TIMEOUT_S:.0f} s")
            if time.monotonic() > again:  # a weed that was (re)starting missed the signal
                self._reload()
                again = time.monotonic() + _RELOAD_AGAIN_S
            time.sleep(_APPLY_POLL_S)
