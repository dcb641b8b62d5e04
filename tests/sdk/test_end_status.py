"""How ``fit()`` and ``wait()`` judge the status a job or tuning job ended in: Completed and
Stopped return, anything else raises :class:`UnexpectedStatusError` worded as the SageMaker SDK's
``UnexpectedStatusException`` (its ``_check_job_status``)."""

from __future__ import annotations

import pytest

from trainops import UnexpectedStatusError
from trainops._errors import check_end_status

TUNING = ("HyperParameterTuningJobStatus", "HyperParameterTuningJobName")


@pytest.mark.parametrize("status", ["Completed", "Stopped"])
def test_completed_and_stopped_return(status: str) -> None:
    check_end_status({"TrainingJobStatus": status}, "TrainingJobStatus", "TrainingJobName")
    check_end_status({TUNING[0]: status}, *TUNING)


def test_a_failed_tuning_job_is_worded_as_the_sdk_words_it() -> None:
    reason = "No training job succeeded after 5 attempts."
    described = {TUNING[0]: "Failed", TUNING[1]: "tune-1", "FailureReason": reason}
    with pytest.raises(UnexpectedStatusError) as caught:
        check_end_status(described, *TUNING)
    assert (
        str(caught.value) == f"Error for HyperParameterTuning job tune-1: Failed. Reason: {reason}"
    )
    assert caught.value.description is described


def test_a_failure_without_a_reason_says_so() -> None:
    described = {"TrainingJobStatus": "Failed", "TrainingJobName": "j"}
    with pytest.raises(UnexpectedStatusError, match=r"Reason: \(No reason provided\)$"):
        check_end_status(described, "TrainingJobStatus", "TrainingJobName")
