"""The Python SDK: :class:`TrainingJob`, a job spec that submits and follows itself."""

from trainops.sdk._training_job import TrainingJob

__all__ = ["TrainingJob"]
