"""Tests of the object-storage seam and of archives."""
