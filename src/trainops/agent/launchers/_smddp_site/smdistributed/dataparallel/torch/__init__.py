"""The data parallel library's PyTorch client: ``torch_smddp`` registers the ``smddp``
backend; ``distributed`` and ``parallel`` are the library's older API (before 1.4.0)."""
