"""SageMaker's distributed training libraries, as trainops provides them to a job's script.

Only ``smdistributed.dataparallel`` (PyTorch) is here; see
``trainops.agent.launchers._smddp_site``.
"""
