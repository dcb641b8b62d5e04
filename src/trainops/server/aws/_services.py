"""The seam of the AWS wire layer: a registry of AWS services and their operations.

An :class:`AwsService` is named by its SigV4 signing name (``sagemaker``; later ``logs``,
``sts``, ``monitoring``...), the ``X-Amz-Target`` prefix of its JSON operations and the botocore
service model that validates its requests and shapes its answers. Each :class:`AwsOperation` is a
plain function from the request's parsed body to the answer's body (Python values; timestamps as
epoch seconds or ISO text, put on the wire by the model's output shape). docs/internals/
aws-services.md says how to add one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainops._registry import Registry
from trainops.server.aws._protocols import WireProtocol, protocol_of

if TYPE_CHECKING:
    from botocore.model import OperationModel, ServiceModel

    from trainops._settings import Settings
    from trainops.control import JobController

__all__ = [
    "AWS_SERVICES",
    "AwsOperation",
    "AwsService",
    "Handler",
    "ServiceFactory",
    "service_model",
]

Handler = Callable[[dict[str, Any]], dict[str, Any]]
ServiceFactory = Callable[["JobController", "Settings"], "AwsService"]

#: The AWS services the server answers: signing name -> factory of the service for a control
#: plane (entries are lazy: ``server/aws/__init__.py`` registers them).
AWS_SERVICES: Registry[ServiceFactory] = Registry("AWS service", error=ValueError)


@dataclass(frozen=True, slots=True)
class AwsOperation:
    """One operation: its name in the model (``DescribeTrainingJob``) and its handler."""

    name: str
    handler: Handler


@dataclass(frozen=True, slots=True)
class AwsService:
    """One AWS service answered on the server's port."""

    signing_name: str
    target_prefix: str
    model_name: str
    operations: Mapping[str, AwsOperation] = field(default_factory=dict)

    @classmethod
    def of(
        cls, signing_name: str, model_name: str, operations: Iterable[AwsOperation]
    ) -> AwsService:
        """The service, with its target prefix read from the model; every operation must be one
        the model has (a typo fails at start-up, not at a user's request)."""
        model = service_model(model_name)
        table = {op.name: op for op in operations}
        unknown = sorted(set(table) - set(model.operation_names))
        if unknown:
            raise ValueError(f"{model_name} has no operation {unknown[0]!r}")
        prefix = str(model.metadata.get("targetPrefix", ""))
        protocol_of(model)  # a protocol we do not answer fails at start-up too
        return cls(signing_name, prefix, model_name, table)

    def operation_model(self, name: str) -> OperationModel:
        return service_model(self.model_name).operation_model(name)

    @property
    def protocol(self) -> WireProtocol:
        """How botocore speaks to this service (JSON, query...)."""
        return protocol_of(service_model(self.model_name))


@functools.cache
def service_model(name: str) -> ServiceModel:
    """botocore's model of the service ``name`` (loaded once; it ships inside botocore).
    botocore is imported only here, on the first AWS request: a server that answers none
    never loads it."""
    import botocore.session

    return botocore.session.get_session().get_service_model(name)
