"""The entry point of the hand-submitted job scripts (jobs/slurm.sbatch, jobs/gadi.pbs): run one cell in this job and
treat the walltime as the launchers' jobs do (preempt.py): on the warning, checkpoint, then requeue (Slurm) or
submit this script again (PBS), at most --max-requeues times.

    python -m orchestrator.cluster.job model=resnet18 mult=am16 dataset=cifar10 train=cifar

Slurm: the script asks for `--signal=USR1@<s> --requeue`; the requeue count is Slurm's SLURM_RESTART_COUNT.
PBS: the script exports AMDNN_WALLTIME_S / AMDNN_WARN_BEFORE_S (a timer here signals this process) and
AMDNN_JOB_SCRIPT (what to qsub again); the cell's overrides travel in AMDNN_ARGS, the count in AMDNN_CONTINUATION.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import typing as tp

from hydra import compose, initialize_config_dir

from orchestrator.cell.run import run_cell
from orchestrator.cluster.preempt import Warnings
from orchestrator.common import paths
from orchestrator.config.cell import resolve
from orchestrator.schedulers import scripts
from orchestrator.schedulers.pbs.job_environment import arm_walltime_timer

_ARG = re.compile(r"^[A-Za-z0-9_.+/:=@-]+$")  # qsub -v splits on commas and PBS strips quotes: keep overrides plain


def _continue_pbs(overrides: tp.List[str], count: int) -> str:
    script = scripts.bare_path("AMDNN_JOB_SCRIPT", os.environ["AMDNN_JOB_SCRIPT"])
    bad = [a for a in overrides if not _ARG.match(a)]
    if bad:
        raise SystemExit(f"cannot pass {bad} to the continuation job through qsub -v; use overrides of letters, "
                         "digits and _ . + / : = @ - only")
    variables = f"AMDNN_ARGS={' '.join(overrides)},AMDNN_CONTINUATION={count}"
    out = subprocess.run(["qsub", "-v", variables, script], capture_output=True, text=True, timeout=300,
                         cwd=os.environ.get("PBS_O_WORKDIR") or None)
    if out.returncode != 0:
        raise SystemExit(f"qsub of the continuation failed: {out.stderr.strip()}")
    return out.stdout.strip()


def main(argv: tp.Optional[tp.List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the cell, e.g. model=lenet5 mult=am16")
    parser.add_argument("--max-requeues", type=int, required=True,
                        help="walltime continuations allowed (the launcher uses cluster.max_requeues)")
    args = parser.parse_args(argv)

    with initialize_config_dir(config_dir=str(paths.repo_root() / "conf"), version_base="1.3"):
        cell = resolve(compose(config_name="config", overrides=args.overrides))  # this job is the cell's launch
    warnings = Warnings().install()
    arm_walltime_timer()  # PBS only: no-op without AMDNN_WALLTIME_S
    result = run_cell(cell)
    print(f"[amdnn] {result.name}: {result.status}" + (f" ({result.error})" if result.error else ""), flush=True)
    if result.status != "preempted" or not warnings.warned:
        return 0 if result.status in ("finished", "preempted") else 1
    if os.environ.get("AMDNN_JOB_SCRIPT"):
        count = int(os.environ.get("AMDNN_CONTINUATION", "0")) + 1
        if count > args.max_requeues:
            print(f"[amdnn] not continuing: {args.max_requeues} continuations already (--max-requeues)", flush=True)
            return 1
        print(f"[amdnn] continues as job {_continue_pbs(args.overrides, count)}", flush=True)
        return 0
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        if int(os.environ.get("SLURM_RESTART_COUNT", "0")) >= args.max_requeues:
            print(f"[amdnn] not requeued: {args.max_requeues} requeues already (--max-requeues)", flush=True)
            return 1
        subprocess.run(["scontrol", "requeue", scripts.job_id(job)], check=True, timeout=60)
        print(f"[amdnn] requeued job {job}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
