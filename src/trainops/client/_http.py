"""The HTTP client of the public REST API (docs/api.md), with errors mapped to trainops errors.

Every failure becomes a :class:`TrainopsError` subclass whose message a person can act on: an
unknown job is :class:`JobNotFoundError`, an invalid spec is :class:`SpecError` with the server's
problems, anything else (including an unreachable server) is :class:`ServerError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from trainops._errors import TUNING_JOB, JobNotFoundError, ServerError, SpecError
from trainops._transport import HttpResponse, HttpTransport, TransportError, TransportTimeout

if TYPE_CHECKING:
    from trainops.spec import JobSpec

__all__ = ["Client", "JobNameTakenError", "page_lines"]

API = "/api/v1"
# Long-polls hold the request open for up to `wait` seconds; the read timeout must outlast that.
POLL_MARGIN_S = 30.0
# A long job's report reads every profiler chunk it recorded: give the server time.
REPORT_TIMEOUT_S = 300.0


class JobNameTakenError(ServerError):
    """A job with the submitted name already exists (409 on submission)."""


class Client:
    """A connection to one trainops server. The token is sent as a Bearer header, never logged."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        embedded: bool = False,
        fix: str = "",
    ) -> None:
        """``fix`` says what to do when the server cannot be reached (it ends that error)."""
        self.url = url.rstrip("/")
        self.embedded = embedded
        #: An embedded server's web UI login links (``EmbeddedServer.ui_link``); None otherwise.
        self.ui_link: Callable[[], str] | None = None
        self._fix = fix
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            self._http = HttpTransport(self.url, headers, timeout)
        except ValueError as exc:
            raise ServerError(f"bad trainops server URL: {exc}") from None

    def __repr__(self) -> str:
        return f"Client({self.url!r}, embedded={self.embedded})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/health")

    def info(self) -> dict[str, Any]:
        """Server version, backend, ``default_output_uri``, region and capacity."""
        return self._json("GET", "/info")

    def cluster(self) -> dict[str, Any]:
        """The backend's name and its nodes, each with its capacity and what is free of it."""
        return self._json("GET", "/cluster")

    def new_job_name(self, base: str) -> str:
        """A fresh ``<base>-<timestamp>`` name from the server, unique among all its jobs."""
        return str(self._json("POST", "/job-names", body={"base_job_name": base})["job_name"])

    def submit(
        self, job_name: str, spec: JobSpec | Mapping[str, Any], code_uri: str
    ) -> dict[str, Any]:
        """Create the job; the packed source must already be at ``code_uri``. Returns its description.

        ``spec`` is a :class:`JobSpec` or its fields as plain data (which the server validates:
        an invalid one is a :class:`SpecError` listing the server's problems).
        :class:`JobNameTakenError` if a job named ``job_name`` exists.
        """
        fields = spec if isinstance(spec, Mapping) else spec.model_dump(mode="json")
        body = {"job_name": job_name, "spec": dict(fields), "code_uri": code_uri}
        try:
            return self._json("POST", "/jobs", body=body)
        except _Conflict as exc:
            raise JobNameTakenError(str(exc)) from None

    def list_jobs(
        self,
        status: str | Sequence[str] | None = None,
        name_contains: str | None = None,
        limit: int = 50,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
    ) -> list[dict[str, Any]]:
        """Job summaries, newest first."""
        params: list[tuple[str, str | int]] = [("limit", limit)]
        statuses = [status] if isinstance(status, str) else list(status or [])
        params += [("status", s) for s in statuses]
        if name_contains:
            params.append(("name_contains", name_contains))
        for key, when in (("created_after", created_after), ("created_before", created_before)):
            if when is not None:
                params.append((key, when.isoformat() if isinstance(when, datetime) else when))
        jobs: list[dict[str, Any]] = self._json("GET", "/jobs", params=list(params))["jobs"]
        return jobs

    def describe(self, name: str, shape: str = "rest") -> dict[str, Any]:
        """The DescribeTrainingJob-shaped description of job ``name``: ``rest`` (the REST
        describe) or ``sagemaker`` (the API's members and nesting, trainops' own under
        ``Trainops``: what ``trainops describe`` prints)."""
        return self._json("GET", _job_path(name), params=[("shape", shape)])

    def stop(self, name: str) -> dict[str, Any]:
        """Ask every host of job ``name`` to stop; returns the description (``Stopping``)."""
        return self._json("POST", _job_path(name, "stop"))

    def interrupt_job(
        self,
        name: str,
        *,
        hosts: list[str] | None = None,
        capacity_gap_seconds: float = 0.0,
        notice_seconds: float | None = None,
        message: str = "",
    ) -> dict[str, Any]:
        """Interrupt spot job ``name`` as a spot reclaim would (every host stops with
        ``notice_seconds`` of notice, the job waits ``capacity_gap_seconds`` in Pending, then
        resumes as a new attempt); returns the description (``Interrupted``)."""
        body: dict[str, Any] = {"capacity_gap_seconds": capacity_gap_seconds, "message": message}
        if hosts:
            body["hosts"] = list(hosts)
        if notice_seconds is not None:
            body["notice_seconds"] = notice_seconds
        return self._json("POST", _job_path(name, "interrupt"), body=body)

    def logs(
        self,
        name: str,
        after: int = 0,
        host: str | None = None,
        limit: int = 1000,
        wait: float = 0,
        *,
        runs: bool = False,
    ) -> dict[str, Any]:
        """Log lines after cursor ``after``; ``wait`` > 0 long-polls until a line or a status change.

        With ``runs``, the page comes as runs of lines that share host, stream, rank and time
        (``{"runs": [{"cursor", "host", "stream", "timestamp", "lines": [...]}]}``): a fraction of
        the bytes and of the decoding of ``{"lines": [...]}``; :func:`page_lines` reads either.
        """
        params: list[tuple[str, Any]] = [("after", after), ("limit", limit), ("wait", wait)]
        if host is not None:
            params.append(("host", host))
        if runs:
            params.append(("format", "runs"))
        return self._json(
            "GET", _job_path(name, "logs"), params=params, timeout=wait + POLL_MARGIN_S
        )

    def metrics(self, name: str, metric_name: str | None = None) -> list[dict[str, Any]]:
        """Metric points of job ``name`` in time order (optionally one metric only)."""
        params = [("name", metric_name)] if metric_name else []
        points: list[dict[str, Any]] = self._json("GET", _job_path(name, "metrics"), params=params)[
            "metrics"
        ]
        return points

    def profiler_report(self, name: str) -> dict[str, Any]:
        """The profiler report's data of job ``name`` (running or ended), computed by the server;
        :class:`JobNotFoundError` for an unknown job or one without profiler data."""
        return self._json("GET", _job_path(name, "profiler-report"), timeout=REPORT_TIMEOUT_S)

    def job_cost(
        self,
        name: str,
        interruptions_per_hour: float | None = None,
        checkpoint_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Job ``name``'s cost advice (``trainops.cost.SpotCost.to_json``), computed by the
        server; the checkpoint interval at ``interruptions_per_hour`` (default: the job's own)
        with ``checkpoint_seconds`` to write one (default: as the job's records measured it)."""
        asked = (("interruptions_per_hour", interruptions_per_hour),
                 ("checkpoint_seconds", checkpoint_seconds))  # fmt: skip
        params: list[tuple[str, Any]] = [(k, v) for k, v in asked if v is not None]
        return self._json("GET", _job_path(name, "cost"), params=params)

    # --- tuning jobs (server/routes/_tuning.py) -----------------------------------------------

    def create_tuning_job(self, config: Mapping[str, Any], code_uri: str) -> dict[str, Any]:
        """Create a tuning job from its config (as JSON); returns its description."""
        body = {"config": dict(config), "code_uri": code_uri}
        try:
            return self._json("POST", "/tuning-jobs", body=body)
        except _Conflict as exc:
            raise JobNameTakenError(str(exc)) from None
        except SpecError as exc:
            raise SpecError(exc.problems, subject=TUNING_JOB) from None

    def list_tuning_jobs(self, limit: int = 50) -> list[dict[str, Any]]:
        """Tuning job summaries, newest first."""
        found: list[dict[str, Any]] = self._json("GET", "/tuning-jobs", params=[("limit", limit)])[
            "tuning_jobs"
        ]
        return found

    def describe_tuning_job(self, name: str) -> dict[str, Any]:
        """The DescribeHyperParameterTuningJob-shaped description, with its trials."""
        return self._json("GET", _tuning_path(name))

    def best_tuning_trial(self, name: str) -> dict[str, Any]:
        """The best trial's summary; :class:`JobNotFoundError` while none has an objective."""
        return self._json("GET", _tuning_path(name, "best"))

    def tuning_analysis(self, name: str) -> dict[str, Any]:
        """The tuning job's report as data (``TuningAnalysis.to_json``)."""
        return self._json("GET", _tuning_path(name, "analysis"))

    def stop_tuning_job(self, name: str) -> dict[str, Any]:
        """Stop the tuning job and its running trials; returns its description (Stopping)."""
        return self._json("POST", _tuning_path(name, "stop"))

    # --- scaling studies (server/routes/_studies.py) -------------------------------------------

    def put_study(self, study: Mapping[str, Any]) -> dict[str, Any]:
        """Record a study as it stands (name, title, status, target_metric, rows); a study
        already recorded under its name is replaced. Returns the study as recorded."""
        return self._json("POST", "/studies", body=dict(study))

    def list_studies(self, limit: int = 50) -> list[dict[str, Any]]:
        """The recorded studies, newest first, with their rows."""
        found: list[dict[str, Any]] = self._json("GET", "/studies", params=[("limit", limit)])[
            "studies"
        ]
        return found

    def describe_study(self, name: str) -> dict[str, Any]:
        """Study ``name`` with its rows; :class:`JobNotFoundError` if there is none."""
        return self._json("GET", f"/studies/{quote(name, safe='')}")

    def events(
        self, since: str | None = None, topics: Sequence[str] = (), wait: float = 0
    ) -> dict[str, Any]:
        """The change stream (``GET /events``): ``{"cursor", "changed"}``, which of ``topics``
        (``jobs``, ``hosts``, ``output``, ``tuning``, ``studies``; all where empty) changed
        after cursor ``since``, waiting up to ``wait`` s for one to; without ``since``, the
        cursor of now. Pass each answer's ``cursor`` as the next ``since``."""
        params: list[tuple[str, Any]] = [("topics", t) for t in topics] + [("wait", wait)]
        if since is not None:
            params.append(("since", since))
        return self._json("GET", "/events", params=params, timeout=wait + POLL_MARGIN_S)

    def _json(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, Any]] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        try:
            response = self._http.request(
                method, API + path, params=params, body=body, timeout=timeout
            )
        except TransportTimeout:
            raise ServerError(f"trainops server at {self.url} did not answer in time") from None
        except TransportError as exc:
            fix = f"; {self._fix}" if self._fix else ""
            raise ServerError(f"cannot reach trainops server at {self.url}: {exc}{fix}") from None
        if response.ok:
            return _body(response, self.url)
        raise _error_for(response, self.url)


class _Conflict(ServerError):
    """A 409 answer (a name taken, a job already ended)."""


def _tuning_path(name: str, *rest: str) -> str:
    return "/".join([f"/tuning-jobs/{quote(name, safe='')}", *rest])


def _job_path(name: str, *rest: str) -> str:
    return "/".join([f"/jobs/{quote(name, safe='')}", *rest])


def _body(response: HttpResponse, url: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise ServerError(
            f"trainops server at {url} answered with something other than JSON"
        ) from None
    if not isinstance(data, dict):
        raise ServerError(f"trainops server at {url} answered with unexpected JSON")
    return data


def _error_for(response: HttpResponse, url: str) -> Exception:
    detail = _detail(response)
    message = str(detail.get("message") or response.reason or "error")
    if response.status == 404:
        return JobNotFoundError(message)
    if response.status == 422:
        return SpecError(_problems(detail) or [("", message)])
    if response.status == 409:
        return _Conflict(message)
    if response.status == 400:
        return ServerError(message)
    if response.status == 401:
        return ServerError(
            f"trainops server at {url} refused the request ({message}); "
            "set TRAINOPS_TOKEN to the server's token (a local server's is in its "
            "$TRAINOPS_HOME/token)"
        )
    if response.status == 403:
        return ServerError(f"trainops server at {url} refused the request: {message}")
    return ServerError(f"trainops server at {url} answered {response.status}: {message}")


def _detail(response: HttpResponse) -> dict[str, Any]:
    """The ``detail`` object of an error body; a FastAPI-shaped server's own errors put a string or a list there."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return {"message": response.text.strip()[:500]}
    if isinstance(detail, dict):
        return detail
    if isinstance(detail, list):
        return {"message": "invalid request", "problems": _fastapi_problems(detail)}
    return {"message": str(detail) if detail is not None else ""}


def _problems(detail: dict[str, Any]) -> list[tuple[str, str]]:
    raw = detail.get("problems") or []
    return [(str(item[0]), str(item[1])) for item in raw if isinstance(item, list | tuple)]


def _fastapi_problems(items: list[Any]) -> list[list[str]]:
    out = []
    for item in items:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            out.append([loc, str(item.get("msg", ""))])
    return out


def page_lines(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines of a log page, one ``{"cursor", "host", "stream", "timestamp", "line"}`` each
    (and ``rank`` where the host ran several), whether it came as lines or as runs."""
    if "runs" not in reply:
        lines: list[dict[str, Any]] = reply.get("lines") or []
        return lines
    found = []
    for run in reply["runs"] or []:
        first, host, stream, when = run["cursor"], run["host"], run["stream"], run["timestamp"]
        rank = {} if run.get("rank") is None else {"rank": run["rank"]}
        found += [
            {"cursor": first + i, "host": host, "stream": stream, "timestamp": when, "line": line}
            | rank
            for i, line in enumerate(run["lines"])
        ]
    return found
