"""In-job helpers for distributed training, imported by training scripts (no server needed).

Read this process's place from the environment any launcher sets (:class:`World`), join the
process group with the right backend, pin the process to its GPU and CPU share, scale learning
rate and batch size by world size, shard data by rank, run work on rank 0 only, report
throughput, make DDP topology-aware (reduce inside hosts first), and split a model into
pipeline stages or shard it (FSDP2) as the job's model-parallel parameters say. torch is imported only by
the functions that need it.
"""

from trainops.distributed._hierarchical import (
    HierarchicalState,
    data_parallel,
    enable_topology_aware,
    hierarchical_all_reduce,
    hierarchical_allreduce_hook,
    topology_aware_requested,
)
from trainops.distributed._parallel import ParallelLayout, Pipeline, shard_model
from trainops.distributed._scaling import (
    ThroughputMeter,
    global_batch_size,
    per_process_batch_size,
    rank_zero_only,
    scale_learning_rate,
    shard,
)
from trainops.distributed._setup import barrier, cpu_share, init_process_group, pin_process
from trainops.distributed._split import balanced_cuts, split_model
from trainops.distributed._world import DEFAULT_MASTER_PORT, DistributedError, World

__all__ = [
    "DEFAULT_MASTER_PORT",
    "DistributedError",
    "HierarchicalState",
    "ParallelLayout",
    "Pipeline",
    "ThroughputMeter",
    "World",
    "balanced_cuts",
    "barrier",
    "cpu_share",
    "data_parallel",
    "enable_topology_aware",
    "global_batch_size",
    "hierarchical_all_reduce",
    "hierarchical_allreduce_hook",
    "init_process_group",
    "per_process_batch_size",
    "pin_process",
    "rank_zero_only",
    "scale_learning_rate",
    "shard",
    "shard_model",
    "split_model",
    "topology_aware_requested",
]
