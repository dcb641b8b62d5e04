"""The spot price a cost is computed at: the catalog's estimate, or the user's own figure."""

from __future__ import annotations

import pytest

from trainops.catalog import get_instance_type
from trainops.catalog._settings import SpotPriceSettings
from trainops.cost import prices_of


def test_the_catalog_estimate_is_labelled_with_its_source_and_date() -> None:
    prices = prices_of("ml.p3.2xlarge")
    p3 = get_instance_type("ml.p3.2xlarge")
    assert prices.on_demand_usd_per_hour == p3.on_demand_usd_per_hour == 3.825
    assert prices.spot_usd_per_hour == p3.spot_usd_per_hour == pytest.approx(1.1475)
    assert prices.spot_kind == "estimate"
    assert prices.spot_source.startswith("on-demand less 70%, a typical spot discount")
    assert "as of 2024-06-01" in prices.spot_source and "config.yaml" in prices.spot_source
    shown = prices.to_json()
    assert shown["SpotPriceKind"] == "estimate" and shown["OnDemandPricesAsOf"] == "2024-06-01"


def test_the_users_discount_replaces_the_estimates_discount() -> None:
    prices = prices_of("ml.p3.2xlarge", SpotPriceSettings(discount_percent=60))
    assert prices.spot_usd_per_hour == pytest.approx(3.825 * 0.40)
    assert prices.spot_kind == "estimate" and "your 60 %" in prices.spot_source


def test_the_users_own_price_wins_over_any_discount() -> None:
    own = SpotPriceSettings(discount_percent=60, prices=(("ml.p3.2xlarge", 1.05),))
    prices = prices_of("ml.p3.2xlarge", own)
    assert prices.spot_usd_per_hour == 1.05 and prices.spot_kind == "yours"
    assert "spot.prices" in prices.spot_source
    other = prices_of("ml.c5.xlarge", own)  # a type without a price of its own: the discount
    assert other.spot_usd_per_hour == pytest.approx(0.204 * 0.40)
