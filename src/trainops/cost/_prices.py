"""The prices a cost is computed at: on-demand from the catalog, spot from the user or estimated.

The catalog's spot price is an estimate (on-demand less a typical discount, ``instances.json``'s
``spot``): SageMaker managed spot bills at the EC2 spot rate, which moves and which no offline
table can quote. A user's own figure (``spot:`` in config.yaml) replaces it, and every view says
which one it used, so an estimate is never shown as a quote.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops.catalog import load_catalog
from trainops.catalog._settings import SpotPriceSettings

__all__ = ["Prices", "prices_of"]

ESTIMATE = "estimate"
YOURS = "yours"


@dataclass(frozen=True, slots=True)
class Prices:
    """One instance type's on-demand and spot price per hour, and where each comes from."""

    instance_type: str
    currency: str
    region: str
    on_demand_usd_per_hour: float
    on_demand_as_of: str
    spot_usd_per_hour: float
    spot_kind: str  # "estimate" (the catalog's) or "yours" (config.yaml's)
    spot_source: str

    def to_json(self) -> dict[str, object]:
        return {
            "InstanceType": self.instance_type,
            "Currency": self.currency,
            "Region": self.region,
            "OnDemandUsdPerHour": self.on_demand_usd_per_hour,
            "OnDemandPricesAsOf": self.on_demand_as_of,
            "SpotUsdPerHour": self.spot_usd_per_hour,
            "SpotPriceKind": self.spot_kind,
            "SpotPriceSource": self.spot_source,
        }


def prices_of(instance_type: str, own: SpotPriceSettings | None = None) -> Prices:
    """``instance_type``'s prices; ``own`` (the user's spot prices) wins over the estimate."""
    catalog = load_catalog()
    instance = catalog.get(instance_type)
    own = own or SpotPriceSettings()
    estimate = (instance.spot_usd_per_hour, catalog.spot.discount, catalog.spot.as_of)
    spot, kind, source = _spot(instance.on_demand_usd_per_hour, estimate, own, instance_type)
    return Prices(
        instance_type=instance_type,
        currency=catalog.currency,
        region=catalog.region,
        on_demand_usd_per_hour=instance.on_demand_usd_per_hour,
        on_demand_as_of=catalog.prices_as_of,
        spot_usd_per_hour=spot,
        spot_kind=kind,
        spot_source=source,
    )


def _spot(
    on_demand: float,
    estimate: tuple[float, float, str],
    own: SpotPriceSettings,
    instance_type: str,
) -> tuple[float, str, str]:
    """The spot price, its kind and where it comes from (the catalog's ``spot.source`` says
    at length why the estimate is one; this is the short form every answer carries)."""
    price = own.price_of(instance_type)
    if price is not None:
        return price, YOURS, f"your figure for {instance_type} (config.yaml spot.prices)"
    if own.discount_percent is not None:
        percent = own.discount_percent
        usd = round(on_demand * (100 - percent) / 100, 6)
        return usd, ESTIMATE, f"on-demand less your {percent} % (config.yaml spot.discount_percent)"
    usd, discount, as_of = estimate
    source = (
        f"on-demand less {discount:.0%}, a typical spot discount (the catalog's, as of {as_of}); "
        "spot rates move: set yours in config.yaml spot:"
    )
    return usd, ESTIMATE, source
