"""The PBS job script writer: a pure function from parameters to text, tested against golden files.

Two dialects: `pbspro` (NCI Gadi: -P project, `-l ncpus=..,ngpus=..,mem=..,jobfs=..`, -l storage, -l wd) and `torque`
(`-l nodes=1:ppn=..:gpus=..`, -A account), which Slurm's Torque wrappers also read. PBS sends SIGTERM at the walltime
and kills soon after, and only an operator can qrerun, so the script tells the job its walltime (AMDNN_WALLTIME_S) and
the job checkpoints and submits its own continuation AMDNN_WARN_BEFORE_S seconds before the limit.
"""
from __future__ import annotations

import shlex
import typing as tp
from pathlib import Path

from orchestrator.schedulers import scripts
from orchestrator.schedulers.resources import PBS_FLAVOURS, walltime_seconds, warn_before_s as warning_seconds

# The job's log files live next to submitit's pickles; %j is the job id, %t the task (always 0: one task per job).
_LOG_NAMES = {"out": "%j_%t_log.out", "err": "%j_%t_log.err"}


def _with_job_id(template: str) -> str:
    """A shell word for a path template holding %j/%t: quoted literally, with the job id spliced in by the shell."""
    parts = template.replace("%t", "0").split("%j")
    return '"${JOB_ID}"'.join(shlex.quote(p) if p else "" for p in parts)


# pylint: disable=too-many-arguments,too-many-locals,unused-argument
def make_pbs_script(
    command: str,
    folder: tp.Union[str, Path],
    job_name: str = "submitit",
    walltime: str = "01:00:00",
    ncpus: tp.Optional[int] = None,
    ngpus: tp.Optional[int] = None,
    mem: tp.Optional[str] = None,
    jobfs: tp.Optional[str] = None,
    queue: tp.Optional[str] = None,
    project: tp.Optional[str] = None,
    account: tp.Optional[str] = None,
    storage: tp.Optional[str] = None,
    flavour: str = "pbspro",
    warn_before_s: tp.Optional[int] = None,
    workdir: tp.Optional[str] = None,
    modules: tp.Optional[tp.List[str]] = None,
    env: tp.Optional[tp.Dict[str, str]] = None,
    setup: tp.Optional[tp.List[str]] = None,
    stderr_to_stdout: bool = False,
) -> str:
    """The text of a PBS job script that runs `command` (a shell command the executor builds, already quoted).

    folder: submitit's folder (may hold %j); logs go there. walltime: 'HH:MM:SS'. mem, jobfs: e.g. '96GB'.
    project: PBS Pro's -P (Gadi); account: -A. storage: Gadi's storage list, e.g. 'scratch/ab12+gdata/ab12'.
    modules/env/setup: see orchestrator.schedulers.scripts.environment_lines. warn_before_s: None derives it from the
    walltime by the rule of cluster.warn_before_s: null (orchestrator.schedulers.resources.warn_before_s).
    """
    if flavour not in PBS_FLAVOURS:
        raise ValueError(f"flavour={flavour!r}: valid PBS flavours are {', '.join(PBS_FLAVOURS)}")
    seconds = walltime_seconds(walltime)
    warn_before_s = warning_seconds({"walltime": walltime, "warn_before_s": warn_before_s})
    pro = flavour == "pbspro"
    d = ["#!/bin/bash", "", "# Parameters", f"#PBS -N {scripts.word('job_name', job_name)}"]
    if project is not None:
        d.append(f"#PBS -P {scripts.word('project', project)}")
    if account is not None:
        d.append(f"#PBS -A {scripts.word('account', account)}")
    if queue is not None:
        d.append(f"#PBS -q {scripts.word('queue', queue)}")
    d.append(f"#PBS -l walltime={scripts.word_list('walltime', walltime)}")
    if pro:
        res = [f"{k}={scripts.word_list(k, v)}" for k, v in
               (("ncpus", ncpus), ("ngpus", ngpus), ("mem", mem), ("jobfs", jobfs)) if v is not None]
        if res:
            d.append(f"#PBS -l {','.join(res)}")
        if storage is not None:
            d.append(f"#PBS -l storage={scripts.word_list('storage', storage)}")
        d.append("#PBS -l wd")
    else:
        node = "nodes=1" + (f":ppn={int(ncpus)}" if ncpus else "") + (f":gpus={int(ngpus)}" if ngpus else "")
        d.append(f"#PBS -l {node}")
        if mem is not None:
            d.append(f"#PBS -l mem={scripts.word_list('mem', mem)}")
        if jobfs is not None:
            d.append(f"#PBS -l file={scripts.word_list('jobfs', jobfs)}")
    d += ["#PBS -j oe", "#PBS -r n"]

    out = _with_job_id(str(Path(folder) / _LOG_NAMES["out"]))
    err = out if stderr_to_stdout else _with_job_id(str(Path(folder) / _LOG_NAMES["err"]))
    d += [
        "",
        "# Job identity and live logs (PBS copies its own .o file back only when the job ends)",
        "# Slurm's Torque wrappers run the job under Slurm, which sets SLURM_JOB_ID rather than PBS_JOBID.",
        'JOB_ID="${PBS_JOBID:-${SLURM_JOB_ID:?neither PBS_JOBID nor SLURM_JOB_ID is set}}"',
        f"mkdir -p {_with_job_id(str(folder))}",
        f"exec >> {out} 2>> {err}",
    ]
    if workdir is not None:
        d.append(f"cd {scripts.path('workdir', workdir)}")
    lines = scripts.environment_lines(modules or (), env or {}, setup or ())
    if lines:
        d += ["", "# setup"] + lines
    d += [
        "",
        "# command",
        "export SUBMITIT_EXECUTOR=pbs",
        f"export AMDNN_WALLTIME_S={seconds}",
        f"export AMDNN_WARN_BEFORE_S={int(warn_before_s)}",
        command,
        "",
    ]
    return "\n".join(d)


def valid_parameters() -> tp.Dict[str, tp.Any]:
    """Parameter name -> default, read from make_pbs_script's signature (command and folder are the executor's)."""
    import inspect  # pylint: disable=import-outside-toplevel
    sig = inspect.signature(make_pbs_script)
    return {k: p.default for k, p in sig.parameters.items() if k not in ("command", "folder")}
