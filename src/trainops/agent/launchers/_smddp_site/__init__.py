"""SageMaker's data parallel library (``smdistributed.dataparallel``) as a job's script sees it.

The launcher ``agent/launchers/_smddp.py`` puts this directory last on the ``PYTHONPATH`` of
the ranks of a job whose distribution is ``smdistributed.dataparallel`` or ``pytorchddp``
(SageMaker's toolkit starts both with its SMDataParallel runner, in containers that have the
library), so a script written for the library runs unchanged: ``import
smdistributed.dataparallel.torch.torch_smddp`` and
``torch.distributed.init_process_group(backend="smddp")``, or the library's older API
(``smdistributed.dataparallel.torch.distributed`` and its ``DistributedDataParallel``).

The ``smddp`` backend is PyTorch's own NCCL where CUDA is available, and gloo elsewhere (the
library itself runs on GPUs only). The package under ``smdistributed/`` imports nothing of
trainops, so it works in an interpreter that does not have trainops installed (a job's Python
mapped from its image). trainops itself imports only this module, for the path.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SMDDP_SITE"]

#: The directory to put on a rank's ``PYTHONPATH``: it holds the ``smdistributed`` package.
SMDDP_SITE = Path(__file__).resolve().parent
