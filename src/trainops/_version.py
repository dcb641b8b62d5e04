"""The package version (single source, read by pyproject through setuptools)."""

__version__ = "0.1.0"
