"""The SageMaker contract on a host: what a script written for SageMaker finds when it starts.

- ``_tree``: the host's /opt/ml-shaped tree and the three config files the toolkit reads;
- ``_hyperparameters``: hyperparameters as the SDK writes them and the toolkit reads them;
- ``_environment``: every ``SM_*`` variable and the toolkit's ``Environment``;
- ``_entry_point``: what to run for an entry point (script, module, ``*.sh``);
- ``_installer``: the job's Python (``requirements.txt``, a package in the source directory);
- ``_setup``: the config files, the environment and the command, put together for a host;
- ``_resources``: a declared instance type simulated honestly (CPU pinning, warnings);
- ``_failure``: ``output/failure`` and the toolkit-style error excerpt;
- ``_outputs``: where ``model.tar.gz`` and ``output.tar.gz`` go, and uploading them.

The modules are private; the agent's public names are exported by :mod:`trainops.agent`. This
package imports nothing itself, so that importing one module costs only that module.
"""
