"""The deterministic training loop of one cell: resume, train, checkpoint, roll back NaNs, evaluate, log.

Runs in the worker process (orchestrator.cell.worker); the supervising parent restarts it after a crash. Determinism
(CPU): data order is a function of (seed, epoch) and the position is exact (epoch, step in epoch); the learning rate
is a function of the global step; the checkpoint holds every model variable (weights, BatchNorm statistics, Keras
seed-generator states), every optimizer variable and the running sums of the epoch's metrics; op determinism is on.
So a run interrupted anywhere and resumed ends bit-identical to one never interrupted.

An epoch's metrics mean the same whether or not it was interrupted. The checkpoint's State carries, besides the running
sums of loss and accuracy, the epoch's kernel-path counters (path_sums: the GEMM calls and products the epoch's steps
and its evaluation made, the same in a resumed epoch as in an uninterrupted one) and its training time (train_seconds).
Epoch time has one definition, logged as epoch_time_s and printed on the console: the wall time of the epoch's
training steps (checkpoints written during the epoch included; evaluation, logged as eval_time_s, not), summed over
the attempts that trained it, each up to its last checkpoint in the epoch (time an attempt spent after its last
checkpoint is lost with it, like the steps it redoes). A resumed epoch's epoch_time_s is therefore the time its steps
took, not the time since its first step; images_per_s is the epoch's trained images over epoch_time_s.

NaN/inf policy: a step whose loss or gradient norm is not finite rolls the model and optimizer back to the last good
checkpoint and that global step is skipped from then on (its batch is not trained on; the position and the learning
rate schedule move on as if it had been). Skipping the batch rather than lowering the learning rate keeps every other
step identical to the run without the bad batch, is the right cure for a corrupt example, and stays deterministic:
the skipped steps are stored (CELL_DIR/skips.json, written before the replay) and replayed by any resumed attempt.
A run that keeps producing NaNs (more than retries.nan_rollbacks rollbacks) fails: its learning rate is too high.

Collapse policy: an epoch whose training loss is back at chance level or far above its best (orchestrator.cell.collapse)
is neither logged nor kept. The run goes back to the end of the last healthy epoch (a copy of each healthy
epoch-end checkpoint is kept in CELL_DIR/last-good-epoch/, out of reach of keep_last), the checkpoints after it are
set aside as collapsed-step-*, and from that step on the learning rate is multiplied by train.collapse.lr_factor.
The factor and its first step are stored (skips.json, before the replay), so the rate stays a pure function of the
global step and a resumed run replays the same rates. After train.collapse.rollbacks such rollbacks a further
collapse fails the cell with the verdict as its reason: a collapsed run is never reported as a finished result.
"""
from __future__ import annotations

import io
import itertools
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import ops
from models import build_model, datasets, optim
from ops.atomic import write_bytes

from orchestrator.cell import artifacts, checkpoints, collapse, energy, engines, run_facts
from orchestrator.cell.progress import Progress
from orchestrator.common.cellfiles import FINAL_WEIGHTS, LAST_GOOD_EPOCH, SKIPS
from orchestrator.config.cell import CellConfig
from orchestrator.tracking.system_metrics import SystemSampler
from orchestrator.tracking.tracker import FINAL_KEY, Tracker

log = logging.getLogger(__name__)

EVAL_BATCH = 256  # evaluation batch size: memory only, results do not depend on it


class NanRollbacksExhausted(RuntimeError):
    """More non-finite steps than retries.nan_rollbacks allows."""


class CollapseRollbacksExhausted(NanRollbacksExhausted):
    """An epoch collapsed (or diverged) after train.collapse.rollbacks rollbacks with a lowered learning rate.
    A NanRollbacksExhausted: to the worker both are a diverged run that retrying would not cure."""


class _Collapsed(Exception):
    def __init__(self, epoch: int, reason: str):
        super().__init__(f"epoch {epoch + 1}: {reason}")
        self.epoch, self.reason = epoch, reason


class _NonFinite(Exception):
    def __init__(self, step: int, loss: float, grad_norm: float):
        super().__init__(f"non-finite loss {loss} / gradient norm {grad_norm} at global step {step}")
        self.step = step


@dataclass
class State:
    """Where the run is; saved in every checkpoint's metadata."""
    epoch: int = 0                 # current epoch (0-based)
    step_in_epoch: int = 0         # next step of that epoch
    global_step: int = 0           # steps done so far (skipped ones included)
    loss_sum: float = 0.0          # running sums over the current epoch's trained steps
    correct: int = 0
    seen: int = 0
    trained_steps: int = 0
    history: list = field(default_factory=list)  # per-epoch metric dicts (deterministic keys only)
    # Added later, with defaults: checkpoints written before them load as an epoch with nothing counted yet.
    path_sums: dict = field(default_factory=dict)  # the current epoch's kernel-path counters so far, by key
    train_seconds: float = 0.0     # the current epoch's training time so far, over every attempt (module docstring)


@dataclass
class Outcome:
    status: str                    # "finished" or "preempted"
    test_accuracy: float | None
    state: State


def _skips(cell_dir: Path) -> dict:
    try:
        return json.loads((cell_dir / SKIPS).read_text())
    except (OSError, ValueError):
        return {"steps": [], "rollbacks": 0}


def _variables(model, optimizer) -> list:
    return [("model", v) for v in model.variables] + [("optimizer", v) for v in optimizer.variables]


def _key(owner: str, path: str) -> str:
    """A variable's name for matching: optimizer paths lose their first part, which Keras numbers per process
    (sgd/..., sgd_1/...)."""
    return f"{owner}:{path.split('/', 1)[-1] if owner == 'optimizer' else path}"


def _snapshot(model, optimizer) -> tuple[dict, list[dict]]:
    arrays, described = {}, []
    for i, (owner, v) in enumerate(_variables(model, optimizer)):
        arrays[f"v{i:05d}"] = np.asarray(v.numpy())
        described.append({"owner": owner, "path": v.path, "shape": list(v.shape), "dtype": str(v.dtype)})
    return arrays, described


def _restore(model, optimizer, ckpt: checkpoints.Checkpoint) -> None:
    variables = _variables(model, optimizer)
    described = ckpt.meta["variables"]
    if len(described) != len(variables):
        raise checkpoints.CheckpointMismatch(
            f"refusing {ckpt.manifest_path}: it holds {len(described)} variables, this model and optimizer have "
            f"{len(variables)} (another architecture or optimizer)")
    for i, ((owner, v), d) in enumerate(zip(variables, described)):
        array = ckpt.arrays[f"v{i:05d}"]
        if _key(d["owner"], d["path"]) != _key(owner, v.path) or tuple(array.shape) != tuple(v.shape):
            raise checkpoints.CheckpointMismatch(
                f"refusing {ckpt.manifest_path}: variable {i} is {d['path']} {tuple(array.shape)}, this model has "
                f"{v.path} {tuple(v.shape)}")
        v.assign(array)


class _Run:
    """One attempt at a cell: its data, model and optimizer, and the steps that move them."""

    def __init__(self, cfg: CellConfig, identity: str, cell_dir: Path, tracker: Tracker):
        self.cfg, self.cell_dir, self.tracker, self.datasets = cfg, Path(cell_dir), tracker, datasets
        self.seed, self.train_cfg = cfg.seed, cfg.train.as_dict()  # models.optim takes the recipe as plain data
        self.engine = engines.start(cfg.engine, self.seed)
        self.data = datasets.load(cfg.dataset.name, cfg.paths.data_dir)
        self.batch_size, self.epochs = cfg.train.batch_size, cfg.train.epochs
        self.spe = datasets.steps_per_epoch(self.data, self.batch_size)
        self.model = build_model(cfg.model.name, cfg.mult.spec, self.data.input_shape, self.data.num_classes,
                                 exact_gradients=cfg.mult.exact_gradients, seed=self.seed,
                                 layers=cfg.mult.layer_multipliers(), table_gradients=cfg.mult.table_gradients)
        self.optimizer = optim.make_optimizer(self.train_cfg)
        self.optimizer.build(self.model.trainable_variables)
        self.expect = {"identity": identity, "model": cfg.model.name, "mult": cfg.mult.name,
                       "dataset": cfg.dataset.name}
        self.every = cfg.checkpoint.every_n_steps
        self.keep = cfg.checkpoint.keep_last
        self.nan_limit = cfg.retries.nan_rollbacks
        self.collapse_cfg = cfg.train.collapse
        self.skips = _skips(self.cell_dir)
        self.steps = self.engine.compile(self.model, self.optimizer, optim.coupled_l2(self.train_cfg["optimizer"]),
                                         self.batch_size)
        self.progress: Progress | None = None
        self.simulated = cfg.mult.simulated  # the AM layers' ops count which kernel path they took
        self.paths_mark = self.path_counts()    # the counters and clock as last folded into a State (account)
        self.clock_mark = time.monotonic()
        self.attempt_tags = run_facts.record(tracker, self.data, cfg.paths.data_dir, self.simulated, self.engine.name)
        self.energy = energy.EnergyMeter(self.cell_dir, uses_gpu=self.engine.uses_gpu())
        self.energy_tags = self.energy.tags()
        tracker.set_tags(self.energy_tags)

    def calibrate(self) -> None:
        """At a fresh start, train.calibration_batches forward passes set the integer layers' activation ranges
        (models.integer_calibration); the step-0 checkpoint written next holds them."""
        count = self.cfg.train.calibration_batches
        if not count:
            return
        # Here, not at the top: it imports Keras, which must load after the worker chose the engine (Keras' backend).
        from models import integer_calibration

        batches = (x for _, x, _ in self.datasets.batches(self.data, self.batch_size, self.seed, 0))
        used = integer_calibration.calibrate(self.model, itertools.islice(batches, count))
        if used:
            print(f"[amdnn] calibrated the integer layers' activation ranges on {used} batches", flush=True)

    def path_counts(self) -> dict[str, int]:
        if not self.simulated:
            return {}
        return self.engine.path_counts()

    def restart_marks(self) -> None:
        """From now on: the epoch's sums go on from the State just restored or started."""
        self.paths_mark, self.clock_mark = self.path_counts(), time.monotonic()

    def account(self, state: State, clock: bool = True) -> None:
        """Fold the kernel-path counts (and, with `clock`, the training time) since the last fold into the epoch's
        sums in `state`: what a checkpoint then carries over to a resumed attempt."""
        paths = self.path_counts()
        for key, count in paths.items():
            state.path_sums[key] = state.path_sums.get(key, 0) + count - self.paths_mark.get(key, 0)
        self.paths_mark = paths
        now = time.monotonic()
        if clock:
            state.train_seconds += now - self.clock_mark
        self.clock_mark = now

    # -- checkpoints --------------------------------------------------------------------------------------------
    def save(self, state: State, healthy_epoch_end: bool = False) -> None:
        arrays, described = _snapshot(self.model, self.optimizer)
        meta = {**self.expect, "state": state.__dict__, "variables": described, "skips": self.skips["steps"],
                "seed": self.seed, "time": time.time()}
        checkpoints.save(self.cell_dir, state.global_step, arrays, meta, self.keep)
        if healthy_epoch_end:  # where a collapse goes back to
            checkpoints.save(self.cell_dir / LAST_GOOD_EPOCH, state.global_step, arrays, meta, 1)

    def lr_scale(self, step: int) -> float:
        """The product of the factors of every collapse rollback at or before global step `step`."""
        return math.prod(r["lr_factor"] for r in self.skips.get("collapses", []) if step >= r["from_step"])

    def learning_rate(self, step: int) -> float:
        return optim.learning_rate(self.train_cfg, step, self.spe) * self.lr_scale(step)

    def resume(self) -> State | None:
        """Load the newest checkpoint that verifies (reporting the ones skipped); None if there is none."""
        ckpt, skipped = checkpoints.latest(self.cell_dir, self.expect)
        for line in skipped:
            log.warning("skipped checkpoint: %s", line)
            print(f"[amdnn] skipped checkpoint: {line}", file=sys.stderr, flush=True)
        if skipped:
            self.tracker.set_tags({"amdnn.skipped_checkpoints": " | ".join(skipped)[:4000]})
        self.restart_marks()  # what ran before (the profile, steps a rollback undoes) is not the epoch's
        if ckpt is None:
            return None
        _restore(self.model, self.optimizer, ckpt)
        print(f"[amdnn] resumed from {ckpt.manifest_path.name} (epoch {ckpt.meta['state']['epoch']}, "
              f"global step {ckpt.step})", file=sys.stderr, flush=True)
        return State(**ckpt.meta["state"])

    # -- training -----------------------------------------------------------------------------------------------
    def train_epoch(self, state: State, should_stop: Callable[[], bool]) -> bool:
        """Train the rest of state.epoch, updating `state`; True if stopped on request (checkpoint written).

        A step's numbers are read after the next step has been launched (the engine's PendingStep), so the host
        prepares a batch while the GPU trains on the one before. Every read that decides something comes before
        it: a checkpoint, a stop and the epoch's end read the step in flight first, and a non-finite step found one
        step late rolls back to a checkpoint written before it, as it would have found at once."""
        in_flight = None  # (global step, pending numbers, batch size) of the step launched last

        def settle() -> None:
            nonlocal in_flight
            if in_flight is None:
                return
            g, pending, images = in_flight
            in_flight = None
            loss, grad_norm, correct = pending.result()
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                raise _NonFinite(g, loss, grad_norm)
            state.loss_sum += loss
            state.correct += correct
            state.seen += images
            state.trained_steps += 1

        for step, x, y in self.datasets.batches(self.data, self.batch_size, self.seed, state.epoch,
                                                start_step=state.step_in_epoch,
                                                augment=self.cfg.dataset.augment):
            g = state.global_step
            launched = None
            if g not in self.skips["steps"]:
                launched = (g, self.steps.train_step(x, y, self.learning_rate(g)), len(y))
            settle()  # the step before this one, while this one runs
            in_flight = launched
            state.step_in_epoch, state.global_step = step + 1, g + 1
            self.progress.step()
            if self.every and state.global_step % self.every == 0 and state.step_in_epoch < self.spe:
                settle()
                self.account(state)
                self.save(state)  # (the epoch's last step is saved by end_epoch, after the metrics)
            if should_stop():
                settle()
                self.account(state)
                self.save(state)
                return True
        settle()
        self.account(state)  # the epoch's training ends here: its evaluation is timed apart
        return False

    def rollback(self, bad: _NonFinite) -> State:
        """Record the bad step as skipped, then go back to the last good checkpoint (bounded)."""
        self.skips["rollbacks"] += 1
        self.skips["steps"] = sorted(set(self.skips["steps"]) | {bad.step})
        write_bytes(self.cell_dir / SKIPS, json.dumps(self.skips).encode())  # before the replay: a crash keeps it
        self.tracker.set_tags({"amdnn.nan_rollbacks": self.skips["rollbacks"],
                               "amdnn.skipped_steps": ",".join(map(str, self.skips["steps"]))[:4000]})
        print(f"[amdnn] {bad}: rollback {self.skips['rollbacks']} of at most {self.nan_limit} to the last good "
              f"checkpoint; step {bad.step} will be skipped", file=sys.stderr, flush=True)
        if self.skips["rollbacks"] > self.nan_limit:
            raise NanRollbacksExhausted(f"{bad}; {self.skips['rollbacks']} rollbacks exceed retries.nan_rollbacks="
                                        f"{self.nan_limit} (learning rate too high, or bad data?)")
        state = self.resume()
        assert state is not None  # the step-0 checkpoint at least
        self.progress.restart(state)
        return state

    def collapse_rollback(self, bad: _Collapsed) -> State:
        """Go back to the last healthy epoch end with a lower learning rate from there on (bounded)."""
        done = self.skips.setdefault("collapses", [])
        limit, factor = self.collapse_cfg.rollbacks, self.collapse_cfg.lr_factor
        if len(done) >= limit:
            raise CollapseRollbacksExhausted(f"{bad}; {len(done)} rollback(s) with a lowered learning rate already "
                                             f"(train.collapse.rollbacks={limit}): learning rate too high?")
        good, _ = checkpoints.latest(self.cell_dir / LAST_GOOD_EPOCH, self.expect)
        if good is None:
            raise CollapseRollbacksExhausted(f"{bad}; no healthy epoch end to go back to")
        done.append({"epoch": bad.epoch + 1, "from_step": good.step, "lr_factor": factor, "reason": bad.reason})
        write_bytes(self.cell_dir / SKIPS, json.dumps(self.skips).encode())  # before the replay: a crash keeps it
        self.tracker.set_tags({"amdnn.collapse_rollbacks": len(done),
                               "amdnn.lr_scale": f"{self.lr_scale(good.step):.6g}",
                               "amdnn.last_collapse": str(bad)[:4000]})
        print(f"[amdnn] {bad}; rollback {len(done)} of at most {limit} to the end of epoch "
              f"{good.meta['state']['epoch']} (global step {good.step}), learning rate x{factor:g} from there on",
              file=sys.stderr, flush=True)
        folder = checkpoints.directory(self.cell_dir)
        for manifest in sorted(folder.glob("step-*.json")):  # never resumed from again; kept for inspection
            if int(manifest.stem.split("-")[1]) > good.step:
                for path in (manifest, manifest.with_suffix(".npz")):  # the manifest first, as checkpoints prunes
                    if path.exists():
                        path.replace(path.with_name("collapsed-" + path.name))
        _restore(self.model, self.optimizer, good)
        state = State(**good.meta["state"])
        self.restart_marks()
        self.save(state)  # the newest regular checkpoint is the healthy one again
        self.progress.restart(state)
        return state

    def test_accuracy(self) -> float:
        x, y = self.data.x_test, self.data.y_test
        hits = sum(int(np.sum(self.steps.predict(x[i:i + EVAL_BATCH]) == y[i:i + EVAL_BATCH]))
                   for i in range(0, len(x), EVAL_BATCH))
        return hits / len(x)

    def end_epoch(self, state: State) -> State:
        """Evaluate and log the finished epoch, then checkpoint the start of the next one. The metrics are queued
        (durably) before the checkpoint moves the position past them: a crash in between repeats the epoch's end,
        and the tracker logs an epoch's step only once."""
        seconds = state.train_seconds
        loss = state.loss_sum / max(state.trained_steps, 1)
        problem = collapse.verdict(loss, [h["loss"] for h in state.history], self.data.num_classes)
        if problem:
            raise _Collapsed(state.epoch, problem)
        evaluation_start = time.monotonic()
        metrics = {"epoch": state.epoch + 1,
                   "loss": loss,
                   "accuracy": state.correct / max(state.seen, 1),
                   "test_accuracy": self.test_accuracy(),
                   "lr": self.learning_rate(state.global_step - 1)}
        eval_seconds = time.monotonic() - evaluation_start
        state.history.append(dict(metrics))
        # GEMM calls and products of the epoch by kernel path, its evaluation included, over every attempt that
        # trained it (State.path_sums; the engine says which it counts: orchestrator.cell.engines): generic ones on
        # a CPU with the fast kernels mean operands out of the fast formulas' range (inf/NaN, over/underflowing
        # products); the products say how much of the work that was (the range is decided per block).
        self.account(state, clock=False)
        path_metrics = {f"gemm_{key}": count for key, count in state.path_sums.items()}
        joules = self.energy.epoch()  # only the counters that answered: a missing one is a tag, never a 0
        if self.energy.tags() != self.energy_tags:  # a counter stopped answering: its tag says so
            self.energy_tags = self.energy.tags()
            self.tracker.set_tags(self.energy_tags)
        times = {"epoch_time_s": seconds, "eval_time_s": eval_seconds,
                 "images_per_s": state.seen / seconds if seconds > 0 else 0.0}
        self.tracker.log_epoch(state.global_step, {**metrics, **path_metrics, **joules, **times})
        self.progress.epoch_end(state, metrics, seconds, eval_seconds)
        state = State(epoch=state.epoch + 1, global_step=state.global_step, history=state.history)
        self.save(state, healthy_epoch_end=True)
        self.tracker.flush_background()
        self.restart_marks()  # the next epoch's clock starts after its checkpoint and the logging
        return state


def train(cfg: CellConfig, identity: str, cell_dir: Path, tracker: Tracker,
          should_stop: Callable[[], bool] = lambda: False) -> Outcome:
    """Train the cell described by the resolved config `cfg` to its last epoch, or until `should_stop()` is true
    (then a checkpoint is written and the outcome is "preempted")."""
    run = _Run(cfg, identity, cell_dir, tracker)
    sampler = None
    if cfg.system_metrics:  # before the first background flush: both would import mlflow at once
        sampler = SystemSampler(tracker, cell_dir).start()
    artifacts.log_record(cfg, run.cell_dir, tracker, run.attempt_tags)
    artifacts.log_multiplier(cfg, run.cell_dir, tracker)
    artifacts.log_layers(cfg, run.cell_dir, tracker, run.model)
    artifacts.log_profile(cfg, run.cell_dir, tracker, run.model)
    state = run.resume()
    if state is None:
        state = State()
        run.calibrate()
        run.save(state)  # step 0: a NaN rollback or a crash before the first checkpoint has something to return to
    tracker.flush_background()  # the start record (RUNNING) goes out as training starts (supervised: run_cell's)
    run.progress = Progress(cfg, run.epochs, run.spe, state)
    try:
        while state.epoch < run.epochs:
            try:
                if run.train_epoch(state, should_stop):
                    return Outcome("preempted", None, state)
                state = run.end_epoch(state)
            except _NonFinite as bad:
                state = run.rollback(bad)
            except _Collapsed as bad:
                state = run.collapse_rollback(bad)
    finally:
        run.progress.close()
        run.energy.close()
        if sampler is not None:
            sampler.stop()
    final = state.history[-1]["test_accuracy"] if state.history else run.test_accuracy()
    if state.history:
        learned_nothing = collapse.final_verdict(final, state.history[-1]["loss"], run.data.num_classes)
        if learned_nothing:
            raise CollapseRollbacksExhausted(learned_nothing)
    save_final_weights(run.model, run.cell_dir / FINAL_WEIGHTS)
    tracker.log_metrics(state.global_step, {FINAL_KEY: final}, check=FINAL_KEY)
    artifacts.log_curves(cfg, run.cell_dir, tracker, state.history)
    artifacts.log_weights(run.cell_dir, tracker)
    return Outcome("finished", final, state)


def save_final_weights(model, path: Path) -> None:
    """The trained model's variables by their Keras paths (fc1/kernel, ...): np.load(path) gives them back."""
    buffer = io.BytesIO()
    np.savez(buffer, **{v.path: np.asarray(v.numpy()) for v in model.variables})
    write_bytes(path, buffer.getvalue())
