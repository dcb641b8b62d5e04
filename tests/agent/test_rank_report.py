"""What torchrun and mpirun say of their ranks: the first failure is the one they did not cause."""

from __future__ import annotations

from trainops.agent.contract._failure import stderr_excerpt
from trainops.agent.supervision._rank_report import MpirunReport, RankFailure, TorchrunReport

# torchrun 2.x on the second host of 2 x 2 after rank 3 raised: it ended rank 2 itself, and
# both ended in the same second, so its own "Root Cause" could have been either of them.
SUMMARY = """\
W1127 02:30:49.110000 11176 torch/distributed/elastic/multiprocessing/api.py:1028] \
Sending process 11337 closing signal SIGTERM
E1127 02:30:49.311000 11176 torch/distributed/elastic/multiprocessing/api.py:1002] failed \
(exitcode: -15) local_rank: 0 (pid: 11337) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-27_02:30:49
  host      : algo-2
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 11344)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-27_02:30:49
  host      : algo-2
  rank      : 2 (local_rank: 0)
  exitcode  : -15 (pid: 11337)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 11337
============================================================
"""


def _read(text: str) -> TorchrunReport:
    report = TorchrunReport()
    for line in text.splitlines():
        report.take(line)
    return report


def test_a_rank_torchrun_ended_itself_is_never_the_first_failure() -> None:
    report = _read(SUMMARY)
    assert report.first_failure() == RankFailure(3, 1, 11344, "2026-11-27_02:30:49", root=False)
    assert report.exit_codes() == {2: -15, 3: 1}


def test_without_closing_signals_torchrun_s_earliest_failure_wins() -> None:
    unsent = [ln for ln in SUMMARY.splitlines() if "closing signal" not in ln]
    first = _read("\n".join(unsent)).first_failure()
    assert first is not None and first.rank == 2  # the same second: torchrun's own root cause
    at = unsent.index("  rank      : 3 (local_rank: 1)") - 2  # its block's time line
    earlier = [ln.replace(":49", ":48") if n == at else ln for n, ln in enumerate(unsent)]
    first = _read("\n".join(earlier)).first_failure()
    assert first is not None and first.rank == 3  # a second earlier than torchrun's root


def test_no_summary_no_failure() -> None:
    report = _read("some launcher chatter\n  rank      : 7 (local_rank: 1)\n")
    assert report.first_failure() is None and report.exit_codes() == {}


def test_mpirun_names_the_rank_in_its_message() -> None:
    report = MpirunReport()
    for line in ["noise", "MPI_ABORT was invoked on rank 3 in communicator", "rank 1 with PID"]:
        report.take(line)
    assert report.first_failure() == RankFailure(3)


def test_the_excerpt_reads_through_torch_s_rank_prefix() -> None:
    tail = [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "train.py", line 4, in <module>',
        '[rank3]:     raise RuntimeError("rank 3 ran out of data")',
        "[rank3]: RuntimeError: rank 3 ran out of data",
    ]
    assert stderr_excerpt(tail) == "RuntimeError: rank 3 ran out of data"


def test_a_rank_cannot_speak_for_torchrun() -> None:
    from trainops.agent.supervision._group import RankTails, TagParser
    from trainops.agent.supervision._rank_report import TAG_STYLES

    tails = RankTails(TorchrunReport())
    parser = TagParser(TAG_STYLES["torchrun"].pattern, 2, 2)
    forged = ["Sending process 11344 closing signal SIGTERM", "  time      : 0000",
              "  rank      : 2 (local_rank: 0)", "  exitcode  : 1 (pid: 1)"]  # fmt: skip
    lines = [f"[default1]:{line}" for line in forged] + SUMMARY.splitlines()
    for rank, stream, run in parser.feed(lines, "stderr"):
        tails.take(rank, stream, run)
    assert tails.report is not None
    first = tails.report.first_failure()
    assert first is not None and first.rank == 3
    assert list(tails.stderr[3]) == forged  # the rank's own lines, as it wrote them
