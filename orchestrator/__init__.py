"""AMDNN orchestrator: the life of one grid cell, the local sweep and the cluster grid around it.

Kept free of heavy imports (stdlib only), like environment.py, so that `orchestrator.environment` can bootstrap a
missing virtual environment before TensorFlow, MLflow or Hydra are imported. The subpackages' __init__ files import
nothing but cluster/'s, which puts Hydra's plugin root on sys.path (stdlib only): import the modules directly.

The packages, from the bottom layer up (a package imports only those below it; tests/test_layering.py checks it):

    environment  `python -m orchestrator.environment`: the virtual environment's bootstrap (stdlib only)
    common/      paths, filesystems, cellfiles: what every part shares
    tracking/    one MLflow run per cell through a durable queue (tracker, mode, queue, writer, importer), and
                 reading runs back (reads); MLflow's system metrics
    schedulers/  Slurm and PBS: resources, job scripts, executor parameters (params), limits, job states (job_status),
                 submission; pbs/ is the PBS submitit plugin
    config/      validate(cfg) and ConfigError (validate), the keys conf/ defines (keys), a cell's identity (identity),
                 resolve(cfg) -> CellConfig, what the cell's code reads (cell)
    report/      the model x mult table read back from MLflow and its files (`python -m orchestrator.report`)
    cell/        run_cell(cell): one cell, supervised (run), trained in its own process (worker, trainer) with its
                 checkpoints, collapse rollback, artifacts, progress, devices, energy and run facts
    sweep/       what launch.py does: one cell (launching), the sweep's Hydra callbacks and progress
    cluster/     the cluster grid: Hydra launchers, grid record, status, resume cron, archive, preemption, job entry

Optimizers and learning-rate schedules live with the models (models.optim).
"""
