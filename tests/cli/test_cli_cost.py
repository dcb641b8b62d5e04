"""``trainops cost``: the advice of a recorded job, worded; its refusals (unknown job, bad rates).

The job is tests/cost/_recorded.py's (twice interrupted, every figure worked out by hand in
tests/cost/test_spot_cost.py), read from the home's store with no server running.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cost._recorded import NAME, finish, open_store
from trainops.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRAINOPS_SERVER", "TRAINOPS_TOKEN", "TRAINOPS_SPOT_PRICES",
                 "TRAINOPS_SPOT_DISCOUNT_PERCENT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path))
    store = open_store(tmp_path / "trainops.db")
    finish(store)
    store.close()
    return tmp_path


def test_the_advice_reads_as_the_hand_figures(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", NAME, "--interruptions-per-hour", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{NAME} (Completed; a spot job, billed at the spot rate)"
    assert (
        lines[1] == "  billable 1850 s of 2030 s training: savings 8.9 % (1 - billable / training)"
    )
    assert lines[2].startswith(
        "  on-demand ≈ $3.93 (ml.p3.2xlarge \N{MULTIPLICATION SIGN} 2 at $3.825/h, prices as of"
    )
    assert lines[3].startswith("  spot      ≈ $1.18 (at $1.1475/h: an estimate, not a quote;")
    assert lines[4:8] == [
        "  interruptions: 2",
        "    1. 1970-01-01 00:27:00: lost 300 s of work (since the checkpoint written "
        "1970-01-01 00:22:00); training again 160 s later, from a checkpoint",
        "    2. 1970-01-01 00:39:40: lost 0.0 s of work (since the checkpoint written "
        "1970-01-01 00:39:45); training again 40 s later, from scratch",
        "  lost work 300 s (≈ $0.1913), restart overhead 200 s",  # at the spot rate
    ]
    assert lines[8:] == [
        "  checkpoints: 5 synced, 2 failed or incomplete",
        "  checkpoint interval (Young/Daly, 2 interruptions/h given; C = 4 s to write one "
        "(measured), R = 100 s to restart):",
        "    now  every 272 s: overhead 14.6%, ≈ 236 s lost per interruption",
        "    best every 120 s: overhead 12.2%, ≈ 160 s lost per interruption",
    ]


def test_json_is_the_apis_answer_and_the_users_price_is_named(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINOPS_SPOT_PRICES", "ml.p3.2xlarge=1.0")
    assert main(["cost", NAME[:6], "--json"]) == 0  # the start of a name will do
    data = json.loads(capsys.readouterr().out)
    assert data["Prices"]["SpotPriceKind"] == "yours" and data["SpotCostUsd"] == pytest.approx(
        1850 / 3600 * 2
    )
    assert data["CheckpointInterval"]["RateFrom"] == "this job"


def test_an_unknown_job_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "ghost"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainops: error: no job named 'ghost'") and len(err.splitlines()) == 1


def test_a_given_checkpoint_time_replaces_the_measured_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # C = 9 s at 2/h (M = 1800 s): tau* = sqrt(2 x 9 x 1800) = 180 s
    assert main(["cost", NAME, "--interruptions-per-hour", "2", "--checkpoint-seconds", "9"]) == 0
    out = capsys.readouterr().out
    assert "C = 9 s to write one (given)" in out and "best every 180 s:" in out


@pytest.mark.parametrize("seconds", ["0", "-3", "nan", "inf", "86401", "soon"])
def test_a_bad_checkpoint_time_is_refused_naming_the_flag(
    home: Path, capsys: pytest.CaptureFixture[str], seconds: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["cost", NAME, "--checkpoint-seconds", seconds])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "argument --checkpoint-seconds:" in err and "is not a time" in err


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf", "1e9", "two", "0.0001", "9" * 5000])
def test_a_bad_rate_is_refused_naming_the_flag(
    home: Path, capsys: pytest.CaptureFixture[str], rate: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["cost", NAME, "--interruptions-per-hour", rate])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "argument --interruptions-per-hour:" in err and "is not a rate" in err
    assert len(err) < 300


def test_short_intervals_are_not_shown_as_zero() -> None:
    from trainops.cli._cost import _interval_line

    line = _interval_line("best", 0.334, 0.497, 2.98)
    assert "every 0.33 s" in line and "3.0 s lost" in line
