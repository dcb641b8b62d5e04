"""The instance catalog covers the required families and prices jobs."""

from __future__ import annotations

import pytest

from trainops.catalog import get_instance_type, load_catalog

REQUIRED_FAMILIES = {"c5", "m5", "g4dn", "g5", "p3", "p3dn", "p4d"}


def test_required_families_and_provenance() -> None:
    catalog = load_catalog()
    assert set(catalog.families()) >= REQUIRED_FAMILIES
    assert catalog.prices_as_of and catalog.source and catalog.region == "us-east-1"


def test_every_entry_is_plausible() -> None:
    for item in load_catalog().instance_types.values():
        assert item.vcpus > 0 and item.memory_gib > 0 and item.on_demand_usd_per_hour > 0
        assert (item.gpus == 0) == (item.gpu_model is None)


def test_gpu_types() -> None:
    p4d = get_instance_type("ml.p4d.24xlarge")
    assert p4d.gpus == 8 and p4d.gpu_model == "NVIDIA A100"


def test_cost_is_seconds_times_price_times_count() -> None:
    m5 = get_instance_type("ml.m5.large")
    assert m5.cost_usd(3600, 2) == pytest.approx(2 * m5.on_demand_usd_per_hour)


def test_unknown_type_message() -> None:
    with pytest.raises(KeyError, match="did you mean"):
        get_instance_type("ml.p4d.24xlrge")


def test_every_type_has_a_spot_price_below_on_demand_labelled_an_estimate() -> None:
    catalog = load_catalog()
    for item in catalog.instance_types.values():
        assert 0 < item.spot_usd_per_hour < item.on_demand_usd_per_hour
        assert item.spot_usd_per_hour == pytest.approx(item.on_demand_usd_per_hour * 0.30, abs=1e-4)
    spot = catalog.spot
    assert spot.kind == "estimate" and spot.discount == 0.70 and spot.as_of
    assert "not a quote" in spot.source and "config.yaml" in spot.source


def test_local_types_cost_nothing_on_spot_either() -> None:
    assert get_instance_type("local").spot_usd_per_hour == 0.0
