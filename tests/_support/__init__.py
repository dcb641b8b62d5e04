"""Support code shared by the test suites: real servers started on loopback for tests."""
