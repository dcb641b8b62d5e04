"""Optuna Dashboard on a 10,000-trial study, the peer of bench/ui.py's jobs page.

Run as a process of its own with ``optuna-dashboard`` importable (the bench extra; outside the
project's venv, put it on PYTHONPATH): it fills an in-memory study with ``TRIALS`` finished
trials (two parameters, one objective), serves the dashboard on ``PORT`` and prints ``ready``.

    python bench/_ui_optuna.py PORT TRIALS
"""

from __future__ import annotations

import math
import sys


def main(port: int, trials: int) -> None:
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution
    from optuna_dashboard import run_server

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(study_name="bench", storage=storage)
    lr, layers = FloatDistribution(1e-5, 1e-1, log=True), IntDistribution(1, 8)
    study.add_trials(
        optuna.trial.create_trial(
            params={"lr": 10 ** (-5 + 4 * (i % 997) / 997), "layers": 1 + i % 8},
            distributions={"lr": lr, "layers": layers},
            value=math.sin(i) + 2.0,
        )
        for i in range(trials)
    )
    print("ready", flush=True)
    run_server(storage, host="127.0.0.1", port=port)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
