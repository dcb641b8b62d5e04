"""The ``logs`` service (CloudWatch Logs): DescribeLogStreams, GetLogEvents and FilterLogEvents on
the log group ``/aws/sagemaker/TrainingJobs``, read from the store's per-host logs, so that the
SDKs' log tailers (``estimator.logs()``, ``Session.logs_for_job``, ``aws logs tail``) follow a
job as they follow one on SageMaker.

A job's host in one attempt is a stream named as SageMaker names it (``_log_words.py``); its
events are the host's lines in time order, each masked as every other view of the job masks it
(``server/_views.job_masker``), a page at a time (at most :data:`PAGE_CHARS` of text, as the
service answers at most a megabyte).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server._redaction import Masker
from trainops.server._views import job_masker
from trainops.server.aws._errors import AwsError
from trainops.server.aws._log_words import (
    MAX_INT64,
    invalid,
    parse_token,
    stream_names,
    term_filter,
    token,
)
from trainops.server.aws._paging import page_of
from trainops.server.aws._sagemaker import ACCOUNT_ID
from trainops.server.aws._services import AwsOperation, AwsService
from trainops.store import LogPosition, LogStreamStats, MetadataStore, StreamLine

__all__ = ["LOG_GROUP", "PAGE_CHARS", "logs_service"]

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PAGE_CHARS = 1024 * 1024  # characters of messages in one answer (the service's 1 MB)
_SCAN_LINES = 100_000  # lines one FilterLogEvents call reads at most before it hands a token
_MAX_JOBS = 100_000  # jobs a stream listing looks at, as ListTrainingJobs


def logs_service(controller: JobController, settings: Settings) -> AwsService:
    """CloudWatch Logs as far as the SDKs read a training job's log."""
    ops = _Operations(controller, settings)
    return AwsService.of(
        "logs",
        "logs",
        [
            AwsOperation("DescribeLogStreams", ops.describe_log_streams),
            AwsOperation("GetLogEvents", ops.get_log_events),
            AwsOperation("FilterLogEvents", ops.filter_log_events),
        ],
    )


def _ms(ts: float) -> int:
    return int(ts * 1000)


def _window(body: dict[str, Any]) -> tuple[int | None, int | None]:
    """startTime and endTime, within what SQLite compares (the model bounds them below only)."""
    start, end = body.get("startTime"), body.get("endTime")
    return (
        None if start is None else min(int(start), MAX_INT64),
        None if end is None else min(int(end), MAX_INT64),
    )


class _Operations:
    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller, self.settings = controller, settings

    @property
    def store(self) -> MetadataStore:
        return self.controller.store

    def _group(self, body: dict[str, Any]) -> None:
        """Refuse a request naming no log group, both forms of it, or another group."""
        name, arn = body.get("logGroupName"), body.get("logGroupIdentifier")
        if name is None and arn is None:
            raise invalid("Should provide either logGroupName or logGroupIdentifier.")
        if name is not None and arn is not None:
            raise invalid("LogGroup name and LogGroup ARN are mutually exclusive parameters.")
        ours = f"arn:aws:logs:{self.settings.region}:{ACCOUNT_ID}:log-group:{LOG_GROUP}"
        if name != LOG_GROUP and arn not in (LOG_GROUP, ours, f"{ours}:*"):
            raise AwsError(
                400, "ResourceNotFoundException", "The specified log group does not exist."
            )

    def _streams(self, prefix: str | None) -> dict[str, LogStreamStats]:
        """The streams whose names start with ``prefix`` (all where ``None``), by name."""
        jobs: Collection[str] | None = None
        if prefix is not None and "/" in prefix:
            jobs = [prefix.split("/", 1)[0]]
        elif prefix is not None:
            found = self.store.list_jobs(name_contains=prefix, limit=_MAX_JOBS)
            jobs = [job.name for job in found if job.name.startswith(prefix)]
        named = stream_names(self.store.log_streams(jobs))
        return {k: v for k, v in named.items() if prefix is None or k.startswith(prefix)}

    def _arn(self, name: str) -> str:
        group = f"arn:aws:logs:{self.settings.region}:{ACCOUNT_ID}:log-group:{LOG_GROUP}"
        return f"{group}:log-stream:{name}"

    def describe_log_streams(self, body: dict[str, Any]) -> dict[str, Any]:
        self._group(body)
        prefix, order = body.get("logStreamNamePrefix"), body.get("orderBy", "LogStreamName")
        if prefix is not None and order == "LastEventTime":
            raise invalid("Cannot order by LastEventTime with a logStreamNamePrefix.")
        named = self._streams(prefix)
        if order == "LastEventTime":
            names = sorted(named, key=lambda n: (named[n].last_ts, n))
        else:
            names = sorted(named)
        if body.get("descending", False):
            names.reverse()
        page, token = page_of(names, body.get("nextToken"), int(body.get("limit", 50)), _bad_token)
        answer: dict[str, Any] = {"logStreams": [self._stream_summary(n, named[n]) for n in page]}
        if token is not None:
            answer["nextToken"] = token
        return answer

    def _stream_summary(self, name: str, stream: LogStreamStats) -> dict[str, Any]:
        first, last = _ms(stream.first_ts), _ms(stream.last_ts)
        return {
            "logStreamName": name,
            "creationTime": first,
            "firstEventTimestamp": first,
            "lastEventTimestamp": last,
            "lastIngestionTime": last,
            "arn": self._arn(name),
            "storedBytes": 0,
        }

    def get_log_events(self, body: dict[str, Any]) -> dict[str, Any]:
        self._group(body)
        name = body["logStreamName"]
        stream = self._streams(name).get(name)
        if stream is None:
            raise AwsError(
                400, "ResourceNotFoundException", "The specified log stream does not exist."
            )
        given = body.get("nextToken")
        if given is not None:
            backward, position = parse_token(given)
        else:
            backward = not body.get("startFromHead", False)
            position = LogPosition.tail() if backward else LogPosition.head()
        lines = self.store.stream_lines(
            [(stream.job, stream.host, stream.attempt)],
            position,
            backward=backward,
            window_ms=_window(body),
            max_lines=int(body.get("limit", 10_000)),
            max_chars=PAGE_CHARS,
        )
        if backward:
            lines.reverse()
        events = [
            {"timestamp": _ms(line.ts), "message": text, "ingestionTime": _ms(line.ts)}
            for line, text in zip(lines, _masked(self.store, lines), strict=True)
        ]
        first = LogPosition(lines[0].ts, lines[0].cursor) if lines else position
        last = LogPosition(lines[-1].ts, lines[-1].cursor) if lines else position
        if not lines and backward and given is None:  # an empty tail: go on from the stream's end
            last = LogPosition(stream.last_ts, stream.last_cursor)
        return {
            "events": events,
            "nextForwardToken": token("f", last),
            "nextBackwardToken": token("b", first),
        }

    def filter_log_events(self, body: dict[str, Any]) -> dict[str, Any]:
        self._group(body)
        names, prefix = body.get("logStreamNames"), body.get("logStreamNamePrefix")
        if names is not None and prefix is not None:
            raise invalid("logStreamNames and logStreamNamePrefix are mutually exclusive.")
        named = self._streams(prefix)
        if names is not None:
            named = {n: s for n, s in named.items() if n in set(names)}
        keep = term_filter(body.get("filterPattern") or "")
        given = body.get("nextToken")
        position = parse_token(given)[1] if given is not None else LogPosition.head()
        found, more = self._matches(body, named, position, keep)
        by_key = {(s.job, s.host, s.attempt): n for n, s in named.items()}
        events = [
            {
                "logStreamName": by_key[(line.job, line.host, line.attempt)],
                "timestamp": _ms(line.ts),
                "message": text,
                "ingestionTime": _ms(line.ts),
                "eventId": str(line.cursor),
            }
            for line, text in found
        ]
        answer: dict[str, Any] = {"events": events, "searchedLogStreams": []}
        if more is not None:
            answer["nextToken"] = token("f", more)
        return answer

    def _matches(
        self,
        body: dict[str, Any],
        named: dict[str, LogStreamStats],
        position: LogPosition,
        keep: Callable[[str], bool],
    ) -> tuple[list[tuple[StreamLine, str]], LogPosition | None]:
        """The matching lines of one page (masked first: a pattern never finds a secret) and
        where the next page starts (``None``: the streams are read to their end)."""
        keys = [(s.job, s.host, s.attempt) for s in named.values()]
        found: list[tuple[StreamLine, str]] = []
        limit, scanned, chars = int(body.get("limit", 10_000)), 0, 0
        window = _window(body)
        while keys:
            lines = self.store.stream_lines(keys, position, window_ms=window, max_chars=PAGE_CHARS)
            if not lines:
                return found, None
            for line, text in zip(lines, _masked(self.store, lines), strict=True):
                position = LogPosition(line.ts, line.cursor)
                if keep(text):
                    found.append((line, text))
                    chars += len(text)
                if len(found) >= limit or chars > PAGE_CHARS:
                    return found, position
            scanned += len(lines)
            if scanned >= _SCAN_LINES:
                return found, position
        return found, None


def _masked(store: MetadataStore, lines: list[StreamLine]) -> list[str]:
    """The lines' texts as every view of their jobs shows them (the jobs' secrets masked)."""
    texts = [line.line for line in lines]
    for name in {line.job for line in lines}:
        job = store.get_job(name)
        mask = job_masker(job.spec) if job is not None else Masker()
        where = [i for i, line in enumerate(lines) if line.job == name]
        for index, text in zip(where, mask.lines([texts[i] for i in where]), strict=True):
            texts[index] = text
    return texts


def _bad_token() -> AwsError:
    return invalid("The specified nextToken is invalid.")
