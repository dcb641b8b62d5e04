"""ListTrainingJobs' time windows at the API's precision: a job's time as botocore reads it from
an answer, sent back as a bound in the precision botocore sends, names the job's own moment
(so a strict window excludes it), for times all over the millisecond."""

from __future__ import annotations

import random

import pytest
from botocore.serialize import JSONSerializer
from botocore.utils import parse_timestamp

from trainops.server.aws._paging import api_ms as _ms


def test_a_time_read_from_an_answer_and_sent_back_is_that_same_millisecond() -> None:
    rng = random.Random(7)
    serializer = JSONSerializer()
    for _ in range(20_000):
        stored = 1_764_256_345 + rng.random() * 1e6  # a job's time as the store keeps it
        read = parse_timestamp(stored)  # what the answer's epoch number becomes in the client
        sent = serializer._timestamp_unixtimestamp(read)  # what the client sends back
        assert _ms(sent) == _ms(stored), (stored, sent)
        assert _ms(float(int(stored))) <= _ms(stored)  # a whole second before or at it


def test_a_page_token_resumes_where_the_last_page_ended_and_a_forged_one_is_refused() -> None:
    from trainops.server.aws._errors import AwsError
    from trainops.server.aws._paging import offset_token, page_of

    def refusal() -> AwsError:
        return AwsError(400, "ValidationException", "Invalid pagination token")

    items = list(range(7))
    first, token = page_of(items, None, 3, refusal)
    second, token2 = page_of(items, token, 3, refusal)
    last, end = page_of(items, token2, 3, refusal)
    assert (list(first), list(second), list(last), end) == ([0, 1, 2], [3, 4, 5], [6], None)
    for forged in ("x", offset_token(-1), "eyJvZmZzZXQiOiB0cnVlfQ=="):  # the last: offset true
        with pytest.raises(AwsError, match="Invalid pagination token"):
            page_of(items, forged, 3, refusal)
