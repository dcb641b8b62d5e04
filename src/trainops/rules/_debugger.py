"""Debugger rules in the rules service: a built-in debugger rule as one of a job's rules.

The rules services (``_service``: ``rules`` for the profiler rules, ``debugger-rules`` for the
debugger rules; ``_tracking`` for both) keep one row per rule of a job, with its ``kind``. A
profiler rule is evaluated on the job's profiler data; a debugger rule by
:class:`DebuggerRuleEvaluation`: a :class:`~trainops.debugger.rules.RuleRunner` over a trial on
the job's debug-output prefix (``<output_path>/<job>/debug-output`` unless the job's
``debugger_hook_config`` names another), which reads the steps written since the last tick
(bounded by the trial reader) and evaluates them, so a verdict follows a step within a tick
(:data:`~trainops.rules._service.TICK_SECONDS`) of the step's upload. A finding is final;
StalledTrainingRule with ``stop_training_on_fire`` stops the job itself, as SageMaker's does.
Everything the rule reads is the job's own: a ``SimilarAcrossRuns`` rule compares with another
job of this control plane, named by ``other_trials``, never a path.

What a job's files make the control plane hold is bounded: the rules of a job share their trials
(:class:`SharedTrials`, one per debug-output prefix), each trial holds at most
:data:`SERVICE_MAX_RECORDS` records (a few hundred bytes each: about 30 MB), and after each
rule's evaluation the trials forget the steps that every rule reading them is done with (each
rule says how far back it reads: :meth:`~trainops.debugger.rules.Rule.keep_from`; past half
the cap, only the steps a rule has yet to evaluate). A step over the cap is left out (and named
in the trial's errors) until the rules are done with older ones.
"""

from __future__ import annotations

from typing import Any, Protocol

from trainops.control.services import ServiceContext
from trainops.debugger.rules import (
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    RuleRunner,
    make_debugger_rule,
)
from trainops.debugger.trial import TrialLimits
from trainops.protocol import RuleSpec
from trainops.rules._base import IN_PROGRESS, ProfilerData, RuleResult
from trainops.storage import join_uri
from trainops.store import JobRecord

__all__ = [
    "DEBUG_OUTPUT",
    "SERVICE_MAX_RECORDS",
    "DebuggerRuleEvaluation",
    "Evaluates",
    "SharedTrials",
    "debug_output_prefix",
]

DEBUG_OUTPUT = "debug-output"
#: The records one trial of the service holds at once (~600 bytes each: ~30 MB).
SERVICE_MAX_RECORDS = 50_000

_RECOMMENDATIONS = {
    "VanishingGradient": "check the weight initialization, the activations and the learning rate",
    "ExplodingTensor": "lower the learning rate, clip gradients or check the data for bad values",
    "AllZero": "check the layer's initialization and whether it receives a signal",
    "UnchangedTensor": "check that the optimizer updates the parameters (learning rate, frozen layers)",
    "LossNotDecreasing": "change the learning rate or the model; check the data and the labels",
    "Overfit": "add regularization or data, or stop earlier",
    "Overtraining": "stop training earlier (early stopping)",
    "PoorWeightInitialization": "use an initialization suited to the activations (He, Xavier)",
    "SaturatedActivation": "normalize the inputs of the layer or lower the learning rate",
    "DeadRelu": "lower the learning rate, or use leaky ReLU; check the initialization",
    "WeightUpdateRatio": "adjust the learning rate to the scale of the weights",
    "TensorVariance": "check the tensor's layer: its values spread too much or too little",
    "ClassImbalance": "rebalance the classes (sampling, class weights)",
    "Confusion": "look at the classes the model confuses: more data or features for them",
    "CheckInputImages": "normalize the input images (zero mean, unit variance)",
    "NLPSequenceRatio": "check the padding and the tokenizer: one token dominates the inputs",
    "StalledTrainingRule": "check whether the job hangs (a deadlock, a data source that waits)",
    "SimilarAcrossRuns": "the runs differ: check the seeds, the data order and the code",
}


class Evaluates(Protocol):
    """What the service evaluates: a profiler rule, or a debugger rule's runner."""

    def evaluate(self, data: ProfilerData) -> RuleResult: ...


def debug_output_prefix(job: JobRecord) -> str:
    """Where the job's tensors are synced: ``<s3_output_path>/<job>/debug-output`` of its hook
    config, by default ``<output_path>/<job>/debug-output`` (SageMaker's places)."""
    hook = job.spec.debugger_hook_config
    if hook is not None:
        return hook.output_prefix(job.output_prefix, job.name)
    return join_uri(job.output_prefix, DEBUG_OUTPUT)


class SharedTrials:
    """The trials of one job's debugger rules, one per debug-output prefix, and the runners
    reading each: :meth:`forget` drops the steps every runner of a trial is done with."""

    def __init__(self, max_records: int = SERVICE_MAX_RECORDS) -> None:
        self.limits = TrialLimits(max_records=max_records)
        self.trials: dict[str, Any] = {}
        self._readers: dict[str, list[RuleRunner]] = {}

    def trial(self, prefix: str, context: ServiceContext) -> Any:
        """The trial on ``prefix`` (made on first use)."""
        from trainops.debugger import create_trial

        found = self.trials.get(prefix)
        if found is None:
            found = create_trial(prefix, settings=context.settings, limits=self.limits)
            self.trials[prefix] = found
        return found

    def read_by(self, runner: RuleRunner) -> None:
        """``runner``'s rule reads its trials: they keep what it still needs."""
        for prefix, trial in self.trials.items():
            if any(trial is mine for mine in runner.rule.trials):
                self._readers.setdefault(prefix, []).append(runner)

    def forget(self) -> None:
        """Each trial drops the steps before the oldest one a runner reading it still needs;
        past half its cap, the steps before the oldest one a runner has yet to evaluate (the
        new steps come first: a rule loses a comparison with an old step rather than every
        later step, as when a tensor saved once would keep UnchangedTensor's look back)."""
        for prefix, runners in self._readers.items():
            needs = {id(r): need for r in runners if (need := r.keep_from()) is not None}
            if not needs:
                continue  # every rule has found: none reads on
            trial = self.trials[prefix]
            oldest = min(needs.values())
            if trial.records_held > self.limits.max_records // 2:
                oldest = max(oldest, min(r.next_step for r in runners if id(r) in needs))
            trial.forget_before(oldest)


class DebuggerRuleEvaluation:
    """One built-in debugger rule of one job, evaluated on the steps that arrive.

    The rules of one job share their trials (``trials``: one per debug-output prefix, the
    job's own and any ``other_trials`` job's): a trial holds the tensor records it read
    (hundreds of bytes each), so one per rule would multiply what a job's files make the
    control plane hold, and its reads, by the number of rules; after each evaluation the
    trials forget the steps every rule reading them is done with."""

    def __init__(
        self,
        spec: RuleSpec,
        job: JobRecord,
        context: ServiceContext,
        trials: SharedTrials | None = None,
    ) -> None:
        self.spec, self.job, self.context = spec, job, context
        self._trials = SharedTrials() if trials is None else trials
        parameters = dict(spec.rule_parameters)
        parameters.pop("scan_interval_us", None)
        others = self._other_trials(parameters.pop("other_trials", None))
        self.runner = RuleRunner(
            make_debugger_rule(spec.rule, self._trial(job), parameters, others)
        )
        self._trials.read_by(self.runner)
        self._stopped = False

    def _trial(self, job: JobRecord) -> Any:
        return self._trials.trial(debug_output_prefix(job), self.context)

    def _other_trials(self, name: Any) -> list[Any] | None:
        if name is None or (isinstance(name, str) and name.strip() in ("", "None")):
            return None
        other = self.context.store.get_job(str(name))
        if other is None:
            raise ValueError(f"other_trials: no training job named {str(name)[:100]!r}")
        return [self._trial(other)]

    def evaluate(self, data: ProfilerData) -> RuleResult:
        """The rule's verdict on the steps read so far (final once ``data`` says the job
        ended)."""
        now = data.now if data.now is not None else self.context.now()
        verdict = self.runner.advance(now, ended=data.ended)
        self._trials.forget()
        if verdict.status == ISSUES_FOUND:
            self._stop_if_asked(verdict.details)
            recommendation = _RECOMMENDATIONS.get(self.spec.rule, "")
            return RuleResult(ISSUES_FOUND, verdict.details, recommendation, verdict.evidence)
        status = NO_ISSUES_FOUND if verdict.status == NO_ISSUES_FOUND else IN_PROGRESS
        return RuleResult(status, verdict.details)

    def _stop_if_asked(self, details: str) -> None:
        rule = self.runner.rule
        if getattr(rule, "stop_training_on_fire", False) and not self._stopped:
            self._stopped = True
            self.context.stop_job(self.job.name, f"rule {self.spec.name}: {details}"[:1024])
