"""Files written by real smdebug 1.0.34 (fixtures/smdebug-1.0.34, see its PROVENANCE.md) read
back by our trial, and our records framed as smdebug's reader insists."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from trainops.debugger import create_trial, modes
from trainops.debugger.format import TensorFileWriter, event_file_key
from trainops.debugger.format._records import SMDEBUG_NO_CHECKSUM_CRC

FIXTURE = Path(__file__).parent / "fixtures" / "smdebug-1.0.34"


def test_a_trial_written_by_smdebug_reads_back() -> None:
    trial = create_trial(FIXTURE)
    assert trial.tensor_names() == ["fc.bias", "fc.weight", "flags", "half", "ints", "loss"]
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.steps(modes.TRAIN) == [0, 1, 2] and trial.steps(modes.EVAL) == [0]
    assert trial.mode(3) == modes.EVAL and trial.global_step(modes.EVAL, 0) == 3
    assert trial.tensor_names(collection="weights") == ["fc.weight"]
    assert trial.tensor_names(collection="losses") == ["loss"]
    np.testing.assert_array_equal(
        trial.tensor("fc.weight").value(2, modes.TRAIN), np.arange(6).reshape(2, 3) * 2
    )
    half = trial.tensor("half").value(3)
    assert half.dtype == np.float16 and list(half) == [1, 2]
    assert trial.tensor("ints").value(1).tolist() == [1, -1]
    assert trial.tensor("flags").value(0).tolist() == [True, False]
    assert float(trial.tensor("loss").value(0, modes.EVAL)) == -1.5
    assert trial.tensor("fc.bias").reduction_value(2, "max", abs=True) == 20


def test_our_records_carry_smdebugs_constant_data_crc(tmp_path: Path) -> None:
    TensorFileWriter(tmp_path, "worker_0").write_step(5, modes.TRAIN, 5, [("w", np.ones(2))])
    data = (tmp_path / event_file_key(5, "worker_0")).read_bytes()
    (crc,) = struct.unpack("<I", data[-4:])
    assert crc == SMDEBUG_NO_CHECKSUM_CRC
