"""Design-space exploration run as grids: which layers tolerate a multiplier, and per-layer mixes that trade accuracy
for multiplication energy (docs/exploration.md).

    python -m orchestrator.explore sensitivity model=lenet5 dataset=mnist mult=am16 [--exact-one] [overrides]
    python -m orchestrator.explore search model=lenet5 dataset=mnist mult=am16 [--steps N] [overrides]

    grid         the overrides of a study: the model and multipliers, the user's other overrides, and the
                 `mult.layers` choice that makes one cell per layer; the launch.py command that runs them
    sensitivity  the layer sensitivity grid: one layer approximated (or kept exact) at a time, with both ends
    search       from a finished sensitivity study: the layers in order of accuracy lost per share of the
                 multiply-accumulates, and a cell per prefix of that order (report.front draws the result)

Both end in one `launch.py -m` sweep, so a study runs wherever a grid runs (locally, Slurm, PBS, resumed by the
cron), every cell with its identity, checkpoints and MLflow run, and the report shows it (report.sensitivity,
report.front).
"""
