"""Instance catalog: SageMaker instance types with their hardware, on-demand and spot price.

The data lives in ``instances.json`` beside this module (with the date and source of the prices;
the spot prices are an estimate, labelled as one: :class:`SpotPrices`);
:func:`get_instance_type` looks a name up and says which names are close when it is unknown.
"""

from trainops.catalog._catalog import (
    Catalog,
    InstanceType,
    SpotPrices,
    get_instance_type,
    load_catalog,
)

__all__ = ["Catalog", "InstanceType", "SpotPrices", "get_instance_type", "load_catalog"]
