"""AMDNN orchestrator: the life of one grid cell, and the local launcher's helpers.

Kept free of heavy imports (stdlib only) so that `orchestrator.environment` can bootstrap a missing virtual
environment before TensorFlow, MLflow or Hydra are imported. Import the parts directly:

    orchestrator.config       validate(cfg), resolved paths, the config keys that define a cell
    orchestrator.identity     cell_identity(cfg), cell_name(cfg)
    orchestrator.checkpoints  atomic, checksummed checkpoints; newest-that-verifies resume
    orchestrator.trainer      the deterministic training loop (runs in the worker process)
    orchestrator.worker       `python -m orchestrator.worker CELL_DIR`: the supervised child process
    orchestrator.cell         run_cell(cfg) -> CellResult, request_checkpoint(): the one entry point of a job
    orchestrator.tracking     MLflow run per cell with a durable local queue
    orchestrator.report       the model x mult table read back from MLflow
    orchestrator.callbacks    Hydra callbacks: validate a sweep before it runs, print its table at the end
"""
