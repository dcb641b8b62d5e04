"""The trainops test suites (a package, so suites import shared helpers as ``tests.<area>``)."""
