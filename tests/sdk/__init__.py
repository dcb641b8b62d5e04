"""Tests of trainops.sdk."""
