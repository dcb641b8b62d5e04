"""AddTags, ListTags and DeleteTags, and the Tags of CreateTrainingJob: tags on any resource the
store names by an ARN's resource type (``training-job``, ``hyper-parameter-tuning-job``:
``trainops.store.TAGGED_KINDS``), kept in the store.

The model checks each key's and value's length and pattern; here the service's own rules: at most
50 tags on a resource (counted after the merge, in one transaction), and no key starting with
``aws:`` in any case (reserved for AWS). An ARN is ours when it names this server's region and
account; the name in it is matched in any case (the service writes ARNs in lower case).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from trainops._settings import Settings
from trainops.protocol import ACCOUNT_ID
from trainops.server.aws._errors import AwsError
from trainops.server.aws._services import AwsOperation
from trainops.store import TAGGED_KINDS, MetadataStore, TagLimitError

__all__ = ["MAX_TAGS", "Tagged", "check_tags", "tag_operations", "too_many_tags"]

MAX_TAGS = 50
_ARN = re.compile(
    r"arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]*):(?P<account>[0-9]{12}):(?P<kind>[a-z-]+)/(?P<name>[^/]+)"
)
_NOT_FOUND = "Requested resource not found."
_RESERVED = "aws:"


def _invalid(message: str) -> AwsError:
    return AwsError(400, "ValidationException", message)


def check_tags(tags: Sequence[dict[str, str]]) -> dict[str, str]:
    """A request's ``Tags`` as a dict (a repeated key: the last wins), refused in the
    service's words when a key is reserved or there are more than :data:`MAX_TAGS`."""
    for tag in tags:
        if tag["Key"].lower().startswith(_RESERVED):
            raise _reserved(tag["Key"])
    found = {tag["Key"]: tag.get("Value", "") for tag in tags}
    if len(found) > MAX_TAGS:
        raise too_many_tags(len(found))
    return found


def _reserved(key: str) -> AwsError:
    return _invalid(
        f"Tag key {key[:128]!r} is not valid: tag keys starting with 'aws:' are reserved for "
        "internal use"
    )


def too_many_tags(count: int) -> AwsError:
    """The service's refusal of a request that would leave a resource ``count`` tags."""
    return AwsError(
        400,
        "ResourceLimitExceeded",
        f"A resource can have at most {MAX_TAGS} tags; this request would give it {count}.",
    )


class Tagged(Protocol):
    """Where the tagged resources are: a store and the server's settings (read per request)."""

    @property
    def store(self) -> MetadataStore: ...

    @property
    def settings(self) -> Settings: ...


def tag_operations(plane: Tagged) -> list[AwsOperation]:
    """The tag operations of the ``sagemaker`` service over ``plane``'s resources."""
    ops = _TagOperations(plane)
    return [
        AwsOperation("AddTags", ops.add_tags),
        AwsOperation("ListTags", ops.list_tags),
        AwsOperation("DeleteTags", ops.delete_tags),
    ]


class _TagOperations:
    def __init__(self, plane: Tagged) -> None:
        self.plane = plane

    @property
    def store(self) -> MetadataStore:
        return self.plane.store

    def _resource(self, arn: str) -> tuple[str, str]:
        """The kind and stored name the ARN names; not found when it is not one of ours."""
        match = _ARN.fullmatch(arn)
        if (
            match is None
            or match["region"] != self.plane.settings.region
            or match["account"] != ACCOUNT_ID
            or match["kind"] not in TAGGED_KINDS
        ):
            raise _invalid(_NOT_FOUND)
        name = self.store.tagged_name(match["kind"], match["name"])
        if name is None:
            raise _invalid(_NOT_FOUND)
        return match["kind"], name

    def add_tags(self, body: dict[str, Any]) -> dict[str, Any]:
        kind, name = self._resource(body["ResourceArn"])
        tags = check_tags(body["Tags"])
        try:
            self.store.put_tags(kind, name, tags, MAX_TAGS)
        except TagLimitError as exc:
            raise too_many_tags(exc.count) from None
        return {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}

    def list_tags(self, body: dict[str, Any]) -> dict[str, Any]:
        kind, name = self._resource(body["ResourceArn"])
        tags = self.store.tags(kind, name)
        start = _start(body.get("NextToken"), tags)
        size = int(body.get("MaxResults", MAX_TAGS))
        page = tags[start : start + size]
        answer: dict[str, Any] = {"Tags": [{"Key": k, "Value": v} for k, v in page]}
        if start + size < len(tags):
            answer["NextToken"] = tags[start + size][0]
        return answer

    def delete_tags(self, body: dict[str, Any]) -> dict[str, Any]:
        kind, name = self._resource(body["ResourceArn"])
        for key in body["TagKeys"]:
            if key.lower().startswith(_RESERVED):
                raise _reserved(key)
        self.store.delete_tags(kind, name, body["TagKeys"])
        return {}


def _start(token: str | None, tags: list[tuple[str, str]]) -> int:
    """ListTags' page start: the token is the first key of the page (tags are in key order)."""
    if token is None:
        return 0
    for index, (key, _value) in enumerate(tags):
        if key >= token:
            return index
    return len(tags)
