"""Loading and querying the instance catalog data file."""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from importlib import resources

from trainops.catalog._local import LOCAL_TYPES, machine_hardware

__all__ = ["Catalog", "InstanceType", "SpotPrices", "get_instance_type", "load_catalog"]


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One SageMaker instance type: hardware, on-demand price per hour and the catalog's spot
    price per hour (an estimate: see :class:`SpotPrices`)."""

    name: str
    vcpus: int
    memory_gib: float
    gpus: int
    gpu_model: str | None
    gpu_memory_gib: float
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float

    def cost_usd(self, billable_seconds: float, instance_count: int = 1) -> float:
        """Billable seconds x price x instance count."""
        return billable_seconds / 3600.0 * self.on_demand_usd_per_hour * instance_count


@dataclass(frozen=True, slots=True)
class SpotPrices:
    """Where the catalog's spot prices come from: ``kind`` is ``estimate`` (the on-demand price
    less ``discount``, a fraction), never a quote; ``source`` says so in words."""

    kind: str
    discount: float
    as_of: str
    source: str


@dataclass(frozen=True, slots=True)
class Catalog:
    """All known instance types, with where their prices come from."""

    region: str
    currency: str
    prices_as_of: str
    source: str
    spot: SpotPrices
    instance_types: dict[str, InstanceType]

    def get(self, name: str) -> InstanceType:
        """Return the type called ``name`` or raise ``KeyError`` with close matches.

        ``local`` and ``local_gpu`` (SageMaker local mode) are this machine, priced at 0.
        """
        try:
            return self.instance_types[name]
        except KeyError:
            if name in LOCAL_TYPES:
                return _local_type(name)
            close = difflib.get_close_matches(name, self.instance_types, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"unknown instance type {name!r}{hint}") from None

    def families(self) -> list[str]:
        return sorted({name.split(".")[1] for name in self.instance_types})


def _local_type(name: str) -> InstanceType:
    hardware = machine_hardware(name)
    gpu_model = "this machine's" if hardware.gpus else None
    return InstanceType(
        name,
        *hardware,
        gpu_model=gpu_model,
        gpu_memory_gib=0.0,
        on_demand_usd_per_hour=0.0,
        spot_usd_per_hour=0.0,
    )


@functools.cache
def load_catalog() -> Catalog:
    """Read the packaged ``instances.json`` (cached)."""
    text = resources.files("trainops.catalog").joinpath("instances.json").read_text("utf-8")
    doc = json.loads(text)
    types = {row["name"]: InstanceType(**row) for row in doc["instance_types"]}
    return Catalog(
        region=doc["region"],
        currency=doc["currency"],
        prices_as_of=doc["prices_as_of"],
        source=doc["source"],
        spot=SpotPrices(**doc["spot"]),
        instance_types=types,
    )


def get_instance_type(name: str) -> InstanceType:
    """Look ``name`` up in the packaged catalog."""
    return load_catalog().get(name)
