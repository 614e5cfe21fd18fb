"""The results of a grid read back from MLflow: the model x multiplier table, its files and figures.

    python -m orchestrator.report [--experiment amdnn] [--out DIR] [--no-mlflow]     (__main__.py)

    table        the table's rows and cells (seeds of one experiment averaged), markdown and CSV
    files        the report as files: markdown, CSV, a self-contained HTML page, heatmaps, learning curves
    figures      the figures (matplotlib): heatmap, learning curves of a grid and of one cell
    histories    per-epoch curves read back from MLflow
    summary_run  the experiment's "report" run in MLflow that carries the files
"""
