"""Failure reasons (toolkit style, from output/failure or a real traceback) and metric scraping."""

from __future__ import annotations

import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from trainops.agent import (
    MetricScraper,
    exit_failure_reason,
    read_failure_file,
    stderr_excerpt,
)
from trainops.agent.reporting import _scrape_worker
from trainops.protocol import MetricSpec

FAILING = """
def load(path):
    raise ValueError("learning rate must be positive,\\ngot -1")

def main():
    try:
        open("/nonexistent/file")
    except OSError:
        load("x")

main()
"""


def test_reason_quotes_the_final_exception_of_a_real_traceback(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(FAILING)
    argv = [sys.executable, str(script), "--lr", "-1"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    reason = exit_failure_reason(done.returncode, argv, done.stderr.splitlines())
    assert reason == (
        "ExecuteUserScriptError:\n"
        "ExitCode 1\n"
        'ErrorMessage "ValueError: learning rate must be positive,\ngot -1"\n'
        f'Command "{sys.executable} {script} --lr -1"'
    )


def test_without_a_traceback_the_last_stderr_lines_are_quoted() -> None:
    tail = ["starting", "", "error: disk full", "giving up", ""]
    assert stderr_excerpt(tail) == "starting\nerror: disk full\ngiving up"
    reason = exit_failure_reason(3, ["/bin/sh", "run.sh"], tail)
    assert reason.startswith('ExecuteUserScriptError:\nExitCode 3\nErrorMessage "starting')
    assert reason.endswith('Command "/bin/sh run.sh"')


def test_a_signal_is_named() -> None:
    reason = exit_failure_reason(-9, ["python", "train.py"], [])
    assert 'ExitCode -9\nErrorMessage "killed by signal SIGKILL"' in reason


def test_failure_file_wins_and_is_cut_to_1024_characters(tmp_path: Path) -> None:
    failure = tmp_path / "failure"
    assert read_failure_file(failure) is None
    failure.write_text("")
    assert read_failure_file(failure) is None
    failure.write_text("x" * 2000)
    assert read_failure_file(failure) == "x" * 1024


def test_a_huge_sparse_failure_file_is_read_in_part(tmp_path: Path) -> None:
    failure = tmp_path / "failure"
    with failure.open("wb") as handle:  # the script writes it: 1 GiB of holes after a line
        handle.write(b"CUDA error: out of memory\n")
        handle.truncate(1 << 30)
    tracemalloc.start()
    try:
        reason = read_failure_file(failure)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reason is not None and reason.startswith("CUDA error: out of memory")
    assert peak < 1024 * 1024, peak  # read whole, the file would take 1 GiB


def test_reason_is_capped_for_huge_stderr() -> None:
    tail = ["Traceback (most recent call last):", '  File "x.py", line 1', "E: " + "y" * 5000]
    assert len(exit_failure_reason(1, ["python", "x.py"], tail)) <= 1024


def test_metrics_use_the_first_group_and_ignore_non_numbers() -> None:
    scraper = MetricScraper(
        [
            MetricSpec("loss", r"loss=([-0-9.e]+)"),
            ("acc", r"acc: (\S+)"),
            ("epoch", r"epoch (\d+)"),
        ]
    )
    assert scraper.scan("epoch 3 loss=0.25 acc: 0.9", 5.0) == [
        ("loss", 0.25, 5.0),
        ("acc", 0.9, 5.0),
        ("epoch", 3.0, 5.0),
    ]
    assert scraper.scan("loss=1e-3 acc: n/a", 6.0) == [("loss", 0.001, 6.0)]
    assert scraper.scan("acc: nan", 7.0) == []
    assert scraper.scan("nothing here", 8.0) == []


def test_a_regex_without_a_group_is_refused() -> None:
    with pytest.raises(ValueError, match="capture group"):
        MetricScraper([("loss", "loss")])


def test_the_scraping_worker_keeps_finite_numbers_only_whole_groups_or_not() -> None:
    progress = memoryview(bytearray(24)).cast("q")
    numbers = [f"loss={i}.5" for i in range(100)]
    mixed = ["loss=1.5", "loss=abc", "nothing", "loss=inf", "loss=nan", "loss=2", "loss="] * 30
    for lines in (numbers, mixed):
        for regex in (r"loss=([0-9a-z.]+)", r"loss=([0-9a-z.]+)?"):
            expected = [
                (at, value)
                for at, line in enumerate(lines)
                if (match := re.search(regex, line)) is not None
                and (value := _scrape_worker.number(match.group(1))) is not None
            ]
            found = _scrape_worker.scan([("loss", re.compile(regex))], lines, progress)
            got = [
                (at, value)
                for _n, ats, values in found
                for at, value in zip(ats, values, strict=True)
            ]
            assert got == expected
            encoded = _scrape_worker.encode_found(found)
            assert _scrape_worker.decode_found(encoded) == found
