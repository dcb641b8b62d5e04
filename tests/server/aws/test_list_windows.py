"""ListTrainingJobs' time windows at the API's precision: a job's time as botocore reads it from
an answer, sent back as a bound in the precision botocore sends, names the job's own moment
(so a strict window excludes it), for times all over the millisecond."""

from __future__ import annotations

import random

from botocore.serialize import JSONSerializer
from botocore.utils import parse_timestamp

from trainops.server.aws._sagemaker import _ms


def test_a_time_read_from_an_answer_and_sent_back_is_that_same_millisecond() -> None:
    rng = random.Random(7)
    serializer = JSONSerializer()
    for _ in range(20_000):
        stored = 1_764_256_345 + rng.random() * 1e6  # a job's time as the store keeps it
        read = parse_timestamp(stored)  # what the answer's epoch number becomes in the client
        sent = serializer._timestamp_unixtimestamp(read)  # what the client sends back
        assert _ms(sent) == _ms(stored), (stored, sent)
        assert _ms(float(int(stored))) <= _ms(stored)  # a whole second before or at it
