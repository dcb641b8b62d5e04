"""The hello job through Ray Train, the peer of ``trainops run hello.yaml``.

One ``TorchTrainer`` worker (``ScalingConfig(num_workers=1, use_gpu=False)``) runs hello.py with
``SM_CURRENT_HOST=algo-1``. With ``RAY_ADDRESS`` set it joins that cluster (warm); otherwise
``ray.init(address="local")`` starts a new local Ray inside this process (cold).
"""

from __future__ import annotations

import os
import runpy
import shutil
import tempfile
from pathlib import Path

HELLO = Path(__file__).resolve().with_name("hello.py")


def train_loop_per_worker() -> None:
    os.environ["SM_CURRENT_HOST"] = "algo-1"
    runpy.run_path(str(HELLO), run_name="__main__")


def start_ray() -> None:
    import ray

    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"])
    else:
        # A new local Ray even while the warm path's cluster runs on this machine, with Ray's
        # defaults except that the scratch folder is the one the benchmark cleans up.
        ray.init(address="local", _temp_dir=os.environ.get("HELLO_RAY_TEMP_DIR"))


def main() -> None:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    start_ray()
    storage = tempfile.mkdtemp(prefix="ray-hello-results-")
    try:
        trainer = TorchTrainer(
            train_loop_per_worker,
            scaling_config=ScalingConfig(num_workers=1, use_gpu=False),
            run_config=RunConfig(name="hello", storage_path=storage),
        )
        result = trainer.fit()
        if result.error is not None:
            raise result.error
    finally:
        shutil.rmtree(storage, ignore_errors=True)


if __name__ == "__main__":
    main()
