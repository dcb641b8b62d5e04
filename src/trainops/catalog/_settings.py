"""The user's own spot prices: they replace the catalog's estimate where they are given.

The catalog's spot price of a type is an estimate (its on-demand price less a typical discount,
``instances.json``'s ``spot``). Someone who knows what they pay sets, in config.yaml::

    spot:
      discount_percent: 65            # every type: on-demand less 65 %
      prices: [ml.p3.2xlarge=1.05]    # this type: 1.05 USD per hour (wins over the discount)

or ``TRAINOPS_SPOT_DISCOUNT_PERCENT`` and ``TRAINOPS_SPOT_PRICES`` (``type=price`` pairs, comma
separated). The cost advice says which figure it used: the catalog's estimate or the user's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["SpotPriceSettings"]

_MAX_USD_PER_HOUR = 10_000.0  # far above any instance type: a typo, not a price


@dataclass(frozen=True, slots=True)
class SpotPriceSettings:
    """Spot prices the user gives instead of the catalog's estimate."""

    discount_percent: int | None = None
    """Spot = on-demand less this share (0-99 %), for every type without a price of its own."""
    prices: tuple[tuple[str, float], ...] = ()
    """USD per hour per instance type (``ml.p3.2xlarge=1.05``)."""

    def price_of(self, instance_type: str) -> float | None:
        """The user's own price of ``instance_type``, if they gave one."""
        return next((usd for name, usd in self.prices if name == instance_type), None)

    @classmethod
    def read(cls, source: SettingsSource) -> SpotPriceSettings:
        """``spot.discount_percent`` and ``spot.prices``; their variables win."""
        spot = source.within("spot")
        discount = spot.whole_number(
            "discount_percent", "TRAINOPS_SPOT_DISCOUNT_PERCENT", label="the spot discount"
        )
        if discount is not None and discount > 99:
            raise spot.error(
                "discount_percent",
                "TRAINOPS_SPOT_DISCOUNT_PERCENT",
                problem=f"the spot discount is a percentage below 100, got {discount}",
            )
        pairs = spot.names("prices", "TRAINOPS_SPOT_PRICES", noun="type=price pairs") or ()
        return cls(discount, tuple(_price(spot, pair) for pair in pairs))


def _price(source: SettingsSource, pair: str) -> tuple[str, float]:
    name, _, figure = pair.partition("=")
    try:
        usd = float(figure)
    except ValueError:
        usd = math.nan
    if not name.strip() or not 0 < usd < _MAX_USD_PER_HOUR:
        raise source.entry_error(
            "prices",
            "TRAINOPS_SPOT_PRICES",
            pair,
            "is not TYPE=PRICE with a price in USD per hour above 0 (ml.p3.2xlarge=1.05)",
        )
    return name.strip(), usd
