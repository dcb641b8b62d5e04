"""What the AWS services' list operations share: offset page tokens, a page of a sorted list,
and the API's millisecond time windows (``…After`` / ``…Before``, strict bounds).

A token is an opaque base64 of ``{"offset": N}``; a forged or broken one is refused with the
error the calling service words (SageMaker's and CloudWatch Logs' differ)."""

from __future__ import annotations

import base64
import binascii
import calendar
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from trainops.server.aws._errors import AwsError

__all__ = ["api_ms", "offset_of", "offset_token", "page_of", "within_windows"]

T = TypeVar("T")

_EPOCH_SPAN = 6e10  # seconds either side of 1970 a datetime holds (years 69 to 3871): clamped


def offset_token(offset: int) -> str:
    """The page token that resumes a listing at ``offset``."""
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def offset_of(token: str | None, refusal: Callable[[], AwsError]) -> int:
    """The offset a token names (0 for none); ``refusal()`` is raised where it is not ours."""
    if token is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        offset = None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise refusal()
    return offset


def page_of(
    items: Sequence[T], token: str | None, size: int, refusal: Callable[[], AwsError]
) -> tuple[Sequence[T], str | None]:
    """The page of ``items`` that ``token`` starts, and the token of the next (None at the end)."""
    start = offset_of(token, refusal)
    more = start + size < len(items)
    return items[start : start + size], (offset_token(start + size) if more else None)


def api_ms(when: float) -> int:
    """A time in whole milliseconds, the API's precision, read as botocore reads an answer's
    time (a datetime, to the nearest microsecond): a time read from an answer and sent back as
    a bound (in microseconds, milliseconds or seconds) names that same moment."""
    moment = datetime.fromtimestamp(min(max(when, -_EPOCH_SPAN), _EPOCH_SPAN), UTC)
    return calendar.timegm(moment.timetuple()) * 1000 + moment.microsecond // 1000


def within_windows(creation: float, modified: float, body: dict[str, Any]) -> bool:
    """Whether the creation and last-modified times are strictly inside the request's
    ``CreationTimeAfter/Before`` and ``LastModifiedTimeAfter/Before`` windows."""
    for when, field in ((creation, "CreationTime"), (modified, "LastModifiedTime")):
        after, before = body.get(f"{field}After"), body.get(f"{field}Before")
        if (after is not None and not api_ms(when) > api_ms(after)) or (
            before is not None and not api_ms(when) < api_ms(before)
        ):
            return False
    return True
