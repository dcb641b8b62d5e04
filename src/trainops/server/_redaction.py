"""The masking rule, as the server's views use it (it lives in ``trainops._redaction``, shared
with the host agent)."""

from __future__ import annotations

from trainops._redaction import (
    MASK,
    Masker,
    hyperparameter_text,
    is_secret_name,
    mask_text,
    redact,
)

__all__ = ["MASK", "Masker", "hyperparameter_text", "is_secret_name", "mask_text", "redact"]
