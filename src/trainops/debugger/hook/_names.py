"""Tensor names as smdebug's PyTorch hook gives them, and collection matching.

- a parameter of a registered model: ``<ModelClass>_<parameter path>`` (``Net_fc1.weight``);
- its gradient: ``gradient/<ModelClass>_<parameter path>``;
- a module's inputs and outputs: ``<module path>_input_<i>`` / ``<module path>_output_<i>``
  (``fc1_output_0``; a registered loss module is named by its class: ``CrossEntropyLoss_output_0``),
  ``i`` counting on through the step when a module runs more than once;
- a scalar from :meth:`Hook.save_scalar`: ``scalar/<name>``.

smdebug matches a collection's ``include_regex`` anywhere in a name (``re.search``), so this
module does too, whatever the collection's own ``matches`` does.
"""

from __future__ import annotations

import re
from functools import lru_cache

from trainops.debugger.config import Collection, CollectionKeys, CollectionManager

__all__ = [
    "ACTIVATION_TYPES",
    "GRADIENT_PREFIX",
    "INPUT_SUFFIX",
    "OUTPUT_SUFFIX",
    "SCALAR_PREFIX",
    "gradient_name",
    "io_name",
    "matches",
    "parameter_name",
    "pytorch_collections",
]

GRADIENT_PREFIX = "gradient/"
SCALAR_PREFIX = "scalar/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"

#: smdebug's PyTorch defaults (``smdebug/pytorch/collection.py``).
_DEFAULT_REGEX = {
    CollectionKeys.WEIGHTS: "^(?!gradient).*weight",
    CollectionKeys.BIASES: "^(?!gradient).*bias",
    CollectionKeys.GRADIENTS: "^gradient",
    CollectionKeys.LOSSES: "[Ll]oss_(?!input).*output",
}
#: Collections trainops adds: every module's inputs / outputs.
_IO_REGEX = {CollectionKeys.INPUTS: r"_input_\d+$", CollectionKeys.OUTPUTS: r"_output_\d+$"}

#: Module classes whose inputs and outputs a collection named ``<type>_input`` or
#: ``<type>_output`` (``relu_output``, as SageMaker's DeadRelu config asks) gathers by type.
ACTIVATION_TYPES = ("relu", "leakyrelu", "elu", "gelu", "sigmoid", "tanh", "softmax", "silu")


def parameter_name(model_class: str, path: str) -> str:
    return f"{model_class}_{path}"


def gradient_name(model_class: str, path: str) -> str:
    return GRADIENT_PREFIX + parameter_name(model_class, path)


def io_name(module: str, suffix: str, index: int) -> str:
    return f"{module}{suffix}{index}"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def matches(collection: Collection, name: str) -> bool:
    """Whether ``name`` belongs to ``collection`` (by name, or a regex found anywhere in it)."""
    if name in collection.tensor_names:
        return True
    return any(_compiled(p).search(name) for p in collection.include_regex)


def pytorch_collections() -> CollectionManager:
    """A manager holding smdebug's PyTorch default collections with their regexes."""
    manager = CollectionManager()
    for key in (CollectionKeys.ALL, CollectionKeys.DEFAULT):
        manager.get(key)
    for key, pattern in {**_DEFAULT_REGEX, **_IO_REGEX}.items():
        manager.get(key).include(pattern)
    return manager
