"""One SDK v2 ``PyTorch(...).fit(wait=True, logs="All")`` of the hello job, its phases timed.

Run by ``sagemaker_sdk_fit.py`` in a child process with only the variables ``trainops server``
prints (the profile and the SDK's defaults file), as a user runs it. The SDK is observed, never
changed: its upload function, its client's CreateTrainingJob and its stdout are wrapped to note
the time, and a second boto3 client (on a thread) polls DescribeTrainingJob every 0.1 s to note
when the job's status and secondary status first read each value. The last stdout line is a JSON
object of wall-clock times (``time.time()``).

    python _sdk_fit_driver.py SOURCE_DIR TRAIN_URI
"""

from __future__ import annotations

import time

STARTED = time.time()

import json  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

import boto3  # noqa: E402
import sagemaker  # noqa: E402
import sagemaker.estimator  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402
from sagemaker.session_settings import SessionSettings  # noqa: E402

IMPORTED = time.time()
MARKS: dict[str, float] = {"process_start": STARTED, "imported": IMPORTED}
SEEN: dict[str, float] = {}
REAL_STDOUT = sys.stdout


class _Watch:
    """stdout as the SDK writes the job's log to it: notes when the script's line first shows."""

    def write(self, text: str) -> int:
        if "hello from" in text and "first_log_line" not in MARKS:
            MARKS["first_log_line"] = time.time()
        return REAL_STDOUT.write(text)

    def flush(self) -> None:
        REAL_STDOUT.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(REAL_STDOUT, name)


def _timed(name: str, call: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        MARKS[f"{name}_start"] = time.time()
        try:
            return call(*args, **kwargs)
        finally:
            MARKS[f"{name}_end"] = time.time()

    return wrapper


def _poll(client: Any, name: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            job = client.describe_training_job(TrainingJobName=name)
        except client.exceptions.ResourceNotFound:
            time.sleep(0.05)
            continue
        now = time.time()
        for key in (job["TrainingJobStatus"], job.get("SecondaryStatus", "")):
            SEEN.setdefault(key, now)
        if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            return
        stop.wait(0.1)


def main() -> None:
    source, train = sys.argv[1], sys.argv[2]
    boto = boto3.Session()
    session = sagemaker.Session(
        boto_session=boto, settings=SessionSettings(encrypt_repacked_artifacts=False)
    )
    estimator = PyTorch(
        entry_point="hello.py",
        source_dir=source,
        role="arn:aws:iam::000000000000:role/SageMakerRole",
        framework_version="2.3",
        py_version="py311",
        instance_count=1,
        instance_type="ml.m5.large",
        sagemaker_session=session,
    )
    MARKS["estimator_ready"] = time.time()
    sagemaker.estimator.tar_and_upload_dir = _timed(
        "upload", sagemaker.estimator.tar_and_upload_dir
    )
    client = session.sagemaker_client
    client.create_training_job = _timed("create", client.create_training_job)
    watcher = boto.client("sagemaker")
    stop = threading.Event()
    poller: list[threading.Thread] = []

    def created(*args: Any, **kwargs: Any) -> Any:
        answer = create(*args, **kwargs)
        thread = threading.Thread(
            target=_poll, args=(watcher, kwargs["TrainingJobName"], stop), daemon=True
        )
        thread.start()
        poller.append(thread)
        return answer

    create = client.create_training_job
    client.create_training_job = created
    sys.stdout = _Watch()
    try:
        estimator.fit({"train": train}, wait=True, logs="All")
    finally:
        sys.stdout = REAL_STDOUT
    MARKS["fit_returned"] = time.time()
    stop.set()
    for thread in poller:
        thread.join(timeout=5)
    job = estimator.latest_training_job.describe()
    times = {
        k: job[k].timestamp()
        for k in ("CreationTime", "TrainingStartTime", "TrainingEndTime")
        if k in job
    }
    print(
        json.dumps({"status": job["TrainingJobStatus"], "marks": MARKS, "seen": SEEN, "job": times})
    )


if __name__ == "__main__":
    main()
