"""AMDNN orchestrator: the life of one grid cell, and the local launcher's helpers.

Kept free of heavy imports (stdlib only) so that `orchestrator.environment` can bootstrap a missing virtual
environment before TensorFlow, MLflow or Hydra are imported. Import the parts directly:

    orchestrator.cell         run_cell(cfg) -> CellResult, request_checkpoint(): the one entry point of a job
    orchestrator.config       validate(cfg) (also for cluster launchers, before submitting), ConfigError
    orchestrator.config_keys  the keys and group options conf/ defines: others are refused, naming the closest
    orchestrator.identity     cell_identity(cfg), cell_name(cfg): the same config is the same run
    orchestrator.checkpoints  atomic, checksummed checkpoints; the newest that verifies is resumed
    orchestrator.trainer      the deterministic training loop, NaN rollback (runs in the worker process)
    orchestrator.worker       `python -m orchestrator.worker CELL_DIR`: the supervised training process
    orchestrator.tracking     one MLflow run per cell, fed through a durable local queue
    orchestrator.cellfiles    the files of a cell's folder (done.json, events.jsonl, ...) that other tools read
    orchestrator.report       the model x mult table read back from MLflow (`python -m orchestrator.report`)
    orchestrator.report_files the report as files: markdown, CSV, HTML, heatmaps, learning curves
    orchestrator.summary_run  the experiment's "report" run in MLflow that carries those files
    orchestrator.figures      the report's figures (matplotlib): heatmap, learning curves
    orchestrator.histories    per-epoch curves read back from MLflow
    orchestrator.store_reads  a grid's cell runs and metric histories read at once (SQL on SQLite, else MLflow's API)
    orchestrator.cell_artifacts  what a cell logs beside its metrics: multiplier map, layer profile, curves
    orchestrator.launching    what launch.py does with one composed config
    orchestrator.callbacks    Hydra callbacks: validate a sweep before it runs, write its report at the end
    orchestrator.optim        optimizers and learning-rate schedules (the lists of valid names)
    orchestrator.paths        default locations of data/, checkpoints/ and the MLflow store
    orchestrator.progress     a progress bar in a terminal, one line per epoch in a log
    orchestrator.sweep_progress  a local sweep's cell i of n, done, time left
    orchestrator.devices      the devices a training process sees; TensorFlow's start without CUDA probe noise
    orchestrator.run_facts    the run's filterable tags (device, ops build, host, job id) and its dataset input
    orchestrator.energy       NVML and RAPL energy per epoch and per run; missing counters say why
    orchestrator.system_metrics  MLflow's system metrics through the cell's queue (system_metrics=true)
"""
