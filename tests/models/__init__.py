"""Tests of models/: the registry and builders, the AM layers on both Keras backends, the datasets. Shared helpers:
helpers.py (small indexed datasets); backend_probe.py is the script test_models_backends runs under the torch
backend."""
