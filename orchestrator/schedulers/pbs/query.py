"""Asking qstat about jobs so that no job is hidden and no state is guessed.

One `qstat -f` call for all ids (`-x -F json` on PBS Pro), then, for what that answer lacks:
- ids it does not mention are asked again one by one: recent OpenPBS builds answer `qstat -f -F json A B` with job
  A only (OpenPBS issue 2672), which would otherwise make B look forgotten, that is dead;
- PBS Pro jobs whose JSON could not be read even tolerantly (pbspro_json.py) are asked again in the text form
  (`qstat -x -f ID`), which has none of the JSON writer's bugs.
A job that is still unreadable after that gets the state UNKNOWN and `unreadable: True`: the watcher keeps waiting,
and `query_states` refuses to call it dead.
"""
from __future__ import annotations

import functools
import os
import subprocess
import typing as tp

from orchestrator.schedulers import scripts
from orchestrator.schedulers.pbs import qstat

Info = tp.Dict[str, tp.Dict[str, tp.Any]]
QSTAT_TIMEOUT_S = 120


@functools.lru_cache()
def qstat_flavour() -> str:
    """'pbspro' when qstat is PBS Pro's (it understands -F json), else 'torque' (Torque, or Slurm's wrappers).

    AMDNN_PBS_FLAVOUR overrides the detection.
    """
    forced = os.environ.get("AMDNN_PBS_FLAVOUR")
    if forced:
        return forced
    try:
        out = subprocess.run(["qstat", "--version"], capture_output=True, text=True, timeout=30)
        return "pbspro" if "pbs_version" in (out.stdout + out.stderr).lower() else "torque"
    except (OSError, subprocess.TimeoutExpired):
        return "torque"


def qstat_command(job_ids: tp.Iterable[str], text: bool = False) -> tp.List[str]:
    """The qstat call for these ids: PBS Pro's JSON (finished jobs included), or the text form."""
    ids = [scripts.job_id(j) for j in job_ids]
    if qstat_flavour() == "pbspro":
        return ["qstat", "-x", "-f", *([] if text else ["-F", "json"]), *ids]
    return ["qstat", "-f", *ids]


def parse_qstat(output: tp.Union[str, bytes]) -> Info:
    """One qstat answer in this machine's flavour -> {job id: attributes + State} for the jobs it could read."""
    return _parse(output)[0]


def _parse(output: tp.Union[str, bytes]) -> tp.Tuple[Info, tp.List[str]]:
    if qstat_flavour() == "pbspro":
        return qstat.read_pbspro_json(output)
    return qstat.parse_torque_text(output), []


def _ask(command: tp.List[str], run: tp.Callable[..., subprocess.CompletedProcess]) -> str:
    # qstat exits non-zero when one id is unknown but still prints the others: read stdout regardless.
    return run(command, capture_output=True, text=True, timeout=QSTAT_TIMEOUT_S).stdout


def _matching(job_ids: tp.Iterable[str], info: Info) -> Info:
    """The entries of `info` for `job_ids`, keyed by the ids as asked ('123' and '123.server' are one job)."""
    by_short = {qstat.short_id(k): v for k, v in info.items()}
    return {j: by_short[qstat.short_id(j)] for j in job_ids if qstat.short_id(j) in by_short}


Run = tp.Optional[tp.Callable[..., subprocess.CompletedProcess]]


def query_info(job_ids: tp.Iterable[str], run: Run = None) -> Info:
    """{asked id: attributes + State} for every job qstat knows; see the module docstring. `run`: a stand-in for
    subprocess.run (tests)."""
    run = run or subprocess.run
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    info, unreadable = _parse(_ask(qstat_command(ids), run))
    found = _matching(ids, info)
    unreadable_short = {qstat.short_id(j) for j in unreadable}
    if len(ids) > 1:
        for job in ids:
            if job not in found and qstat.short_id(job) not in unreadable_short:
                one, bad = _parse(_ask(qstat_command([job]), run))
                found.update(_matching([job], one))
                unreadable_short.update(qstat.short_id(j) for j in bad)
    for job in ids:
        if job in found or qstat.short_id(job) not in unreadable_short:
            continue
        text = qstat.parse_torque_text(_ask(qstat_command([job], text=True), run))
        found.update(_matching([job], text))
        if job not in found:
            found[job] = {"State": "UNKNOWN", "ExitStatus": None, "unreadable": True}
    return found


def query_states(job_ids: tp.Iterable[str], run: Run = None) -> tp.Dict[str, str]:
    """{job id: state name} for the jobs qstat still knows; unknown ones are left out (they are not alive).

    A job qstat knows but whose answer could not be read either way is an error, not a dead job: the resume
    command would otherwise submit a second copy of a running cell.
    """
    info = query_info(job_ids, run)
    unreadable = sorted(j for j, v in info.items() if v.get("unreadable"))
    if unreadable:
        raise RuntimeError(f"qstat's answer for job(s) {', '.join(unreadable)} could not be read, neither as JSON "
                           f"({' '.join(qstat_command(unreadable[:1]))}) nor as text: cannot tell whether they are "
                           "alive")
    return {j: v["State"] for j, v in info.items()}
