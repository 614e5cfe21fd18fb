"""Hydra launchers for cluster=slurm, cluster=pbs and cluster=gadi: one job per cell (a Slurm job array; single jobs
on PBS, where Gadi offers no arrays and a cell's continuation must be a job of its own), submitted through submitit,
recorded in the grid record, printed, and returned from at once. `cluster.wait=true` waits for the cells to end.

Cells that are already finished, or whose latest job is still queued or running, are not submitted again, so the
same command run twice (or alongside the resume cron, which takes the same lock) submits nothing twice.

Inside the job, the same launcher object runs the cell (Hydra's run_job -> launch.py's task function -> run_cell),
with the scheduler's warnings turned into checkpoint requests (preempt.py), periodic archiving (archive.py), and the
job ids recorded on the cell's MLflow run with its start (tag amdnn.job_ids: in the store before the run's end). The
job's pickle holds the cell's CellConfig resolved at launch (JobCell): the job trains it as is, nothing validated
again (the executor's parameters least of all), and its run is nested under the launch's run (the launch the sweep's
callback described: tracking.launches), also when the resume cron submits the pickle again.
"""
from __future__ import annotations

import logging
import shutil
import sys
import time
import typing as tp
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import submitit
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
from omegaconf import OmegaConf, open_dict

from orchestrator.cluster.archive import Periodic
from orchestrator.cluster.grid import Grid, latest_job, state_dir_of
from orchestrator.cluster.preempt import Warnings, continue_job
from orchestrator.cluster.status import cell_state, done_info, rows, scheduler_states, table
from orchestrator.config.cell import CellConfig, resolve as resolve_cell  # tracking.mode has a resolve too
from orchestrator.schedulers import job_status
from orchestrator.schedulers.params import executor_parameters
from orchestrator.schedulers.resources import check_scheduler, setting
from orchestrator.schedulers.submit import make_executor
from orchestrator.sweep.launching import launch_cell
from orchestrator.tracking.importer import import_for
from orchestrator.tracking.mode import DIRECT, resolve
from orchestrator.tracking.tracker import Tracker

log = logging.getLogger(__name__)

# The cell facts the pickles of older jobs hold instead of a JobCell (a job resubmitted by the cron still runs them).
_JOB_FIELDS = ("name", "identity", "cell_dir", "archive_dir", "archive_every_min", "tracking_uri", "tracking_mode",
               "experiment", "state_dir")


@dataclass(frozen=True)
class JobCell:
    """What a job gets from its launch: the cell resolved there, and the grid's places, resolved there too."""
    config: CellConfig
    state_dir: str                   # the grid record
    archive_dir: tp.Optional[str]    # cluster.archive_dir, absolute; None: no archive
    archive_every_min: float

    def facts(self) -> dict:
        """The _JOB_FIELDS of this cell: what the job's own code reads, from a JobCell or an older job's dict."""
        c = self.config
        return {"name": c.name, "identity": c.identity, "cell_dir": c.cell_dir, "archive_dir": self.archive_dir,
                "archive_every_min": self.archive_every_min, "tracking_uri": c.tracking.uri,
                "tracking_mode": c.tracking.mode, "experiment": c.tracking.experiment, "state_dir": self.state_dir}


class ClusterLauncher(BaseSubmititLauncher):
    """Submits and returns (see the module docstring). Subclasses name the scheduler."""

    _EXECUTOR = "abstract"

    # ---- in the launching process -----------------------------------------------------------------------------
    def launch(self, job_overrides: tp.Sequence[tp.Sequence[str]], initial_job_idx: int) -> tp.Sequence[JobReturn]:
        assert self.config is not None and self.hydra_context is not None
        cluster = tp.cast(dict, OmegaConf.to_container(self.config.cluster, resolve=True))
        scheduler = check_scheduler(str(cluster.get("scheduler")))
        if scheduler != self._EXECUTOR:
            raise ValueError(f"cluster.scheduler={scheduler} but hydra/launcher is the {self._EXECUTOR} launcher; "
                             f"choose the cluster with cluster=<name> and leave hydra/launcher to it")
        state_dir = state_dir_of(cluster)
        grid = Grid(state_dir)
        folder = Path(str(self.params["submitit_folder"])).expanduser().absolute()
        spec = {"scheduler": scheduler, "folder": str(folder), "max_num_timeout": int(setting(cluster, "max_requeues")),
                "python": cluster.get("python"), "parameters": executor_parameters(scheduler, cluster)}
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)

        cells, jobs_of = [], {}
        for idx, overrides in enumerate(job_overrides):
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):  # the cell's own keys; hydra's are only resolvable inside the job
                sweep_config.pop("hydra", None)
            c = resolve_cell(sweep_config)
            job_cell = JobCell(c, str(state_dir), str(Path(cluster["archive_dir"]).expanduser().resolve())
                               if cluster.get("archive_dir") else None, setting(cluster, "archive_every_min"))
            jobs_of[c.name] = job_cell
            cells.append({
                "idx": initial_job_idx + idx, "overrides": list(overrides), **job_cell.facts(),
                "model": c.model.name, "mult": c.mult.label, "dataset": c.dataset.name, "seed": c.seed,
                "epochs": c.train.epochs, "max_attempts": int(setting(cluster, "max_attempts"))})

        import_for(cell["tracking_uri"] for cell in cells)  # this login-node process is one of the store's writers
        # The resume cron's lock: a cron run and a launch never submit the same cell at the same time.
        with grid.locked("resume.lock"):
            previous = {cell["name"]: grid.cell(cell["name"]) for cell in cells}
            latest = {n: latest_job(r) for n, r in previous.items() if r and latest_job(r)}
            by_scheduler: tp.Dict[str, tp.List[str]] = {}
            for n, job in latest.items():
                by_scheduler.setdefault(tp.cast(dict, previous[n])["executor"]["scheduler"], []).append(job)
            states = {}
            for sched, ids in by_scheduler.items():
                states.update(job_status.job_states(sched, ids))
            to_submit, skipped = [], []
            for cell in cells:
                record = previous[cell["name"]]
                if record and done_info(record) or done_info(cell):
                    skipped.append((cell, "finished"))
                elif cell["name"] in latest and job_status.alive(states.get(latest[cell["name"]])):
                    skipped.append((cell, f"already {states[latest[cell['name']]].lower()} as job "
                                          f"{latest[cell['name']]}"))
                else:
                    to_submit.append(cell)
            jobs = self._submit(spec, to_submit, jobs_of) if to_submit else []
            for cell, job in zip(to_submit, jobs):
                record = dict(previous[cell["name"]] or {})
                record.update({k: v for k, v in cell.items() if k != "idx"})
                record["executor"] = spec
                record.setdefault("jobs", []).append({"id": job.job_id, "how": "launch", "time": time.time()})
                record["attempts"] = 1  # a launch by hand gives the cell a fresh budget for the resume cron
                grid.save_cell(record)
                shutil.copyfile(job.paths.submitted_pickle, grid.root / "cells" / f"{cell['name']}.pkl")
        grid.save_sweep(list(sys.argv), [c["name"] for c in cells])
        self._print(scheduler, folder, state_dir, to_submit, jobs, skipped)
        if cluster.get("wait"):
            wait_for(grid, [c["name"] for c in cells])
        submitted = {cell["name"]: job.job_id for cell, job in zip(to_submit, jobs)}
        reasons = {cell["name"]: why for cell, why in skipped}
        return [JobReturn(overrides=cell["overrides"], status=JobStatus.COMPLETED, task_name=cell["name"],
                          _return_value={"cell": cell["name"], "job_id": submitted.get(cell["name"]),
                                         "skipped": reasons.get(cell["name"])}) for cell in cells]

    def _submit(self, spec: dict, cells: tp.List[dict], jobs_of: tp.Dict[str, JobCell]) -> tp.List[tp.Any]:
        executor = make_executor(spec)
        job_params = [(c["overrides"], "hydra.sweep.dir", c["idx"], f"job_id_for_{c['idx']}", Singleton.get_state(),
                       jobs_of[c["name"]]) for c in cells]
        return executor.map_array(self, *zip(*job_params))

    @staticmethod
    def _print(scheduler: str, folder: Path, state_dir: Path, cells: tp.List[dict], jobs: tp.List[tp.Any],
               skipped: tp.List[tp.Tuple[dict, str]]) -> None:
        out = [f"[amdnn] {len(jobs)} cell(s) submitted to {scheduler}; job scripts and logs under {folder.parent}"]
        out += [f"[amdnn]   {c['model']} x {c['mult']} ({c['dataset']}, seed {c['seed']}) -> job {j.job_id}"
                for c, j in zip(cells, jobs)]
        out += [f"[amdnn]   {c['model']} x {c['mult']} ({c['dataset']}, seed {c['seed']}): not submitted, {why}"
                for c, why in skipped]
        out += sorted({f"[amdnn] tracking: {resolve(c['tracking_mode'], c['tracking_uri']).why}" for c in cells})
        out.append(f"[amdnn] follow the grid with: {sys.executable} -m orchestrator.cluster.status "
                   f"--state-dir {state_dir}")
        print("\n".join(out), flush=True)

    # ---- inside the job ---------------------------------------------------------------------------------------
    def __call__(self, sweep_overrides: tp.List[str], job_dir_key: str, job_num: int, job_id: str,
                 singleton_state: tp.Dict[type, tp.Any], job: tp.Union[JobCell, dict, None] = None) -> tp.Any:
        assert job is not None, "ClusterLauncher jobs are submitted by ClusterLauncher.launch"
        cell = job.facts() if isinstance(job, JobCell) else job  # an older job's pickle: the dict of _JOB_FIELDS
        env = submitit.JobEnvironment()
        warnings = Warnings().install()
        archiver = None
        if cell.get("archive_dir"):
            # In single-writer mode the job never opens the store: the resume cron archives it after importing.
            direct = resolve(cell.get("tracking_mode", "auto"), cell["tracking_uri"]).name == DIRECT
            archiver = Periodic(Path(cell["cell_dir"]), Path(cell["archive_dir"]), cell["archive_every_min"],
                                cell["tracking_uri"] if direct else None).start()
        grid = Grid(cell["state_dir"])
        task = self.task_function
        if isinstance(job, JobCell):  # launch.py's task, with the cell as the launch resolved it and the job ids
            # among the run's start tags, in the store before its end (an older job's pickle: its config is
            # resolved in the job, and the job tags its run after the cell)
            self.task_function = partial(launch_cell, cell=job.config, tags=self._job_tags(cell, grid, env.job_id))
        try:
            ret = super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)
        finally:
            self.task_function = task  # a checkpoint pickles this launcher again: as it was submitted
            if archiver is not None:
                archiver.stop()
        result = ret.return_value  # raises the task's exception: the job fails and says why
        status = result.get("status") if isinstance(result, dict) else getattr(result, "status", None)
        if status != "busy" and not isinstance(job, JobCell):
            self._tag_run(cell, grid, env.job_id)
        if status == "preempted" and warnings.warned:
            next_id = continue_job(env, self._EXECUTOR)
            if next_id != env.job_id:
                grid.add_job(cell["name"], next_id, "continuation")
                log.info(f"cell {cell['name']} continues as job {next_id}")
                return result
            # Slurm requeued this very job: leave without a result, as submitit does, so the requeued run starts over
            # from the same pickle (and resumes the cell from its checkpoint).
            sys.exit(-1)
        return result

    def _job_tags(self, cell: dict, grid: Grid, job_id: str) -> tp.Dict[str, str]:
        """Every job id that ran the cell, this one included (the grid record may not list it yet: the launcher
        records a submission after the scheduler took it, and a job can start first)."""
        record = grid.cell(cell["name"]) or {}
        ids = [j["id"] for j in record.get("jobs", [])]
        ids = ids if job_id in ids else ids + [job_id]
        return {"amdnn.job_ids": ",".join(ids), "amdnn.scheduler": self._EXECUTOR}

    def _tag_run(self, cell: dict, grid: Grid, job_id: str) -> None:
        """An older job's pickle (without JobCell): record the job ids on the cell's MLflow run after the cell
        (through the cell's durable tracking queue)."""
        try:
            tracker = Tracker(cell["tracking_uri"], cell["experiment"], cell["identity"], Path(cell["cell_dir"]),
                              run_name=cell["name"], mode=cell.get("tracking_mode", "auto"))
            tracker.set_tags(self._job_tags(cell, grid, job_id))
            tracker.flush(patience_s=10.0, force=True)
        except Exception as e:  # noqa: BLE001 - a missing tag must not fail a trained cell
            log.warning(f"could not tag the MLflow run of {cell['name']} with its job ids: {e}")


class SlurmLauncher(ClusterLauncher):
    _EXECUTOR = "slurm"


class PBSLauncher(ClusterLauncher):
    _EXECUTOR = "pbs"


def wait_for(grid: Grid, names: tp.List[str], poll_s: float = 15.0) -> None:
    """Block until none of the cells is queued or running; print the table of those cells."""
    print("[amdnn] waiting for the cells to finish (cluster.wait=true)", flush=True)
    while True:
        records = [r for r in (grid.cell(n) for n in names) if r]
        states = scheduler_states(records)
        if not any(cell_state(r, states) in ("queued", "running") for r in records):
            break
        time.sleep(poll_s)
    import_for(r["tracking_uri"] for r in grid.cells() if r["name"] in names)
    print(table([r for r in rows(grid) if r["cell"] in names]), flush=True)
