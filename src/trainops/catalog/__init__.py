"""Instance catalog: SageMaker instance types with their hardware and on-demand price.

The data lives in ``instances.json`` beside this module (with the date and source of the prices);
:func:`get_instance_type` looks a name up and says which names are close when it is unknown.
"""

from trainops.catalog._catalog import Catalog, InstanceType, get_instance_type, load_catalog

__all__ = ["Catalog", "InstanceType", "get_instance_type", "load_catalog"]
