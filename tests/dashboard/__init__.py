"""Tests of the MLflow dashboard over a grid finished by a real local sweep (fixtures in conftest.py)."""
