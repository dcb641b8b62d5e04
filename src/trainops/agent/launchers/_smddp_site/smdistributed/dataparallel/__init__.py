"""SageMaker's data parallel library, as trainops provides it: its PyTorch client only."""

__version__ = "2.0.1+trainops"
