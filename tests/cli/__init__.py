"""Tests of trainops.cli."""
