"""Every conformance suite parametrizes over its registry: an implementation registered anywhere
is in the suite without a line added to it.

A child pytest collects every suite with a plugin (``tests/_throwaway_registrations.py``) that
registers a ``throwaway`` entry in each registry, and each suite must have made tests for it.
(The services suite goes further and runs a conforming and a broken throwaway service:
tests/control/test_service_conformance.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: registry -> its conformance suite.
SUITES = {
    "BACKENDS": "tests/backends/test_backend_conformance.py",
    "STORES": "tests/storage/test_object_store.py",
    "LAUNCHERS": "tests/agent/test_launchers.py",
    "KINDS": "tests/agent/channels/test_conformance.py",
    "SIDECARS": "tests/agent/sidecars/test_conformance.py",
    "SERVICES": "tests/control/test_service_conformance.py",
    "RULES": "tests/rules/test_conformance.py",
    "ACTIONS": "tests/actions/test_action_conformance.py",
    "FORMATS": "tests/data/test_pack.py",
    "SHARD_SOURCES": "tests/data/test_shard_source_conformance.py",
    "PAGES": "tests/ui/test_page_conformance.py",
}


@pytest.mark.slow  # a child pytest that imports every suite (torch among them)
def test_every_conformance_suite_picks_up_a_newly_registered_implementation() -> None:
    plugin = "tests._throwaway_registrations"
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", plugin]
    argv += ["-p", "no:cacheprovider", *SUITES.values()]
    result = subprocess.run(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    missing = [
        f"{registry} ({suite})"
        for registry, suite in SUITES.items()
        if not any(line.startswith(suite) and "throwaway" in line for line in collected)
    ]
    assert missing == [], "these suites do not run over their registry"
