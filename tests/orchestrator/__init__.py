"""Tests of the orchestrator package (helpers.py: what several of them share; conftest.py: fixtures)."""
