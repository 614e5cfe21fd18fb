"""The results of a grid read back from MLflow: the model x multiplier table, its files and figures.

    python -m orchestrator.report [--experiment amdnn] [--out DIR] [--no-mlflow]     (__main__.py)

    table        the table's rows and cells (seeds of one setting), labelled by the settings that tell them apart
    scope        which runs a report covers: a sweep's cells, or every run of the experiment
    paired       a cell against its baseline over the shared seeds: mean difference, Student t 95 % interval
    comparisons  each cell's baseline (native, else acc32, of the same setting) and comparison; cells.csv
    histories    per-epoch curves read back from MLflow: the finished seeds' mean and spread, partial runs apart
    figures      the figures (matplotlib): heatmap, learning curves of a grid and of one cell; a colour per multiplier
    page         the self-contained HTML page
    files        the report as files: markdown, CSVs, the HTML page, heatmaps, learning curves
    summary_run  the experiment's "report" run in MLflow that carries the files
"""
