"""Tests of trainops.client."""
