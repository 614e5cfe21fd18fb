"""Which runs a report covers, said in one line above its tables.

A sweep's table (its end, orchestrator.sweep.callbacks) covers that sweep's cells; `python -m orchestrator.report`
and the resume cron cover every cell run of the experiment. The two can disagree on a cell, rightly: a cell of the
experiment's report also holds the seeds other sweeps ran with the same setting.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from orchestrator.report.table import Row

STATES = (("FINISHED", "finished"), ("RUNNING", "running"), ("FAILED", "failed"), ("KILLED", "killed"),
          ("MISSING", "not started"))


def _counts(rows: Sequence[Row]) -> str:
    counts = Counter(r.status for r in rows)
    parts = [f"{counts.pop(state)} {text}" for state, text in STATES if state in counts]
    parts += [f"{n} {state.lower()}" for state, n in sorted(counts.items())]
    return ", ".join(parts) or "none"


def experiment_scope(rows: Sequence[Row], experiment: str) -> str:
    return (f"Covers every cell run of experiment {experiment}: {len(rows)} run(s), {_counts(rows)}; "
            "the seeds of one setting are one cell, whichever sweep ran them.")


def sweep_scope(rows: Sequence[Row], experiment: str) -> str:
    return (f"Covers this sweep's {len(rows)} cell(s) of experiment {experiment}: {_counts(rows)}. "
            "`python -m orchestrator.report` covers every run of the experiment: where other sweeps ran more seeds "
            "of a cell's setting, its cell there holds them too.")
