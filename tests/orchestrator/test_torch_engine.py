"""engine=torch: a LeNet-300-100 cell under am16 trains through Keras' torch backend and the ops' PyTorch binding (this
machine's CPU; the GPU's captured step is run by tests/device), is SIGKILLed after random checkpoints, resumes and ends
bit-identical to an uninterrupted run; the engine is part of the cell identity; the torch engine's optimizer updates
(the learning rate in a device tensor) follow Keras' own optimizers.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import time

import pytest

from tests.orchestrator.helpers import (PYTHON, REPO, Workdir, assert_same_weights, cell_dirs, compose,
                                       deterministic_metrics, env, final_weights, newest_checkpoint_step, result_of,
                                       run_cell_process, run_data, wait_for)

# 89 steps an epoch on digits, 178 in all, a checkpoint every 7, every product through torch_ops.matmul.
CELL = ["engine=torch", "model=lenet300", "mult=am16", "train.epochs=2", "train.batch_size=16",
        "checkpoint.every_n_steps=7", "checkpoint.keep_last=3", "tracking_patience_s=5"]
STEPS = 178


def _finish(work: Workdir, timeout=300) -> dict:
    proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
    proc.wait(timeout=timeout)
    return result_of((work.path / "run.log").read_text())


@pytest.mark.slow
def test_torch_cell_killed_twice_resumes_bit_identical(tmp_path):
    reference_work = Workdir(tmp_path / "reference")
    reference_work.path.mkdir()
    reference = _finish(reference_work)
    assert reference["status"] == "finished", (reference_work.path / "run.log").read_text()[-3000:]
    ref_data = run_data(reference_work.uri, reference["run_id"])
    assert ref_data["metrics"]["test_accuracy"][-1][1] > 0.5  # it learned (chance is 0.1)
    assert json.loads(ref_data["tags"]["amdnn.defining_config"])["engine"] == "torch"
    # The binding counts its CPU kernels' paths as the TensorFlow library does: ordinary training is all fast.
    fast = [value for _, value in ref_data["metrics"]["gemm_fast_calls"]]
    assert len(fast) == 2 and min(fast) > 0, ref_data["metrics"].get("gemm_fast_calls")
    assert [value for _, value in ref_data["metrics"]["gemm_generic_calls"]] == [0, 0]

    seed = int(os.environ.get("AMDNN_TEST_SEED", time.time_ns() % 10**6))
    print(f"kill points drawn with AMDNN_TEST_SEED={seed}")
    work = Workdir(tmp_path / "killed")
    work.path.mkdir()
    for step in sorted(random.Random(seed).sample(range(10, STEPS - 5), 2)):
        proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
        wait_for(lambda: proc.poll() is not None or any(newest_checkpoint_step(d) >= step
                                                           for d in cell_dirs(work.path / "ck")), 240, f"step {step}")
        time.sleep(random.Random(seed + step).uniform(0, 0.05))
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
    result = _finish(work)
    assert result["status"] == "finished" and result["identity"] == reference["identity"]
    assert_same_weights(final_weights(result["cell_dir"]), final_weights(reference["cell_dir"]))
    data = run_data(work.uri, result["run_id"])
    assert [s for s, _ in data["metrics"]["epoch"]] == [89, 178]  # every epoch exactly once
    assert deterministic_metrics(data) == deterministic_metrics(ref_data)


def test_engine_is_part_of_the_identity_only_when_not_the_default():
    from orchestrator.config.identity import cell_identity, defining_config

    plain, tf, torch = (compose(*extra) for extra in ([], ["engine=tensorflow"], ["engine=torch"]))
    assert "engine" not in defining_config(plain)  # cells trained before engines existed keep their identities
    assert cell_identity(plain) == cell_identity(tf) != cell_identity(torch)


UPDATES = """
import os, sys
os.environ["KERAS_BACKEND"] = "torch"
import keras, numpy as np, torch
from models import optim
from orchestrator.cell.engines.torch_update import for_optimizer
torch.manual_seed(0)
results = {}
for name, opt in [("sgd", {"name": "sgd", "lr": 0.1}), ("momentum", {"name": "sgd", "lr": 0.1, "momentum": 0.9}),
                  ("nesterov", {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True}),
                  ("adam", {"name": "adam", "lr": 0.01}),
                  ("decoupled", {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.01,
                                 "weight_decay_mode": "decoupled"})]:
    start = [np.random.default_rng(i).standard_normal((5, 3)).astype("float32") for i in range(2)]
    grads = [[np.random.default_rng(10 * s + i).standard_normal((5, 3)).astype("float32") for i in range(2)]
             for s in range(4)]
    rates = [0.1, 0.05, 0.02, 0.01]
    finals = []
    for ours in (False, True):
        variables = [keras.Variable(w) for w in start]
        optimizer = optim.make_optimizer({"optimizer": opt})
        optimizer.build(variables)
        update = for_optimizer(optimizer, variables) if ours else None
        for g, lr in zip(grads, rates):
            g = [torch.from_numpy(x) for x in g]
            if ours:
                update(g, torch.tensor(lr, dtype=torch.float32))
            else:
                optimizer.learning_rate = lr
                optimizer.apply(g, variables)
        finals.append(([v.numpy() for v in variables], int(optimizer.iterations.numpy())))
    (keras_w, keras_it), (our_w, our_it) = finals
    assert keras_it == our_it == 4, (name, keras_it, our_it)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(keras_w, our_w))
    moved = max(float(np.max(np.abs(a - s))) for a, s in zip(keras_w, start))
    print(name, worst, moved, flush=True)
    assert worst <= 1e-6 and moved > 1e-3, (name, worst, moved)
print("ok")
"""


def test_torch_updates_follow_keras_optimizers():
    proc = subprocess.run([PYTHON, "-c", UPDATES], cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr[-3000:]
    print(proc.stdout)


LOADS_NO_TENSORFLOW = """
import os, sys
os.environ["KERAS_BACKEND"] = "torch"
from pathlib import Path
from tests.orchestrator.helpers import compose
from orchestrator.config.cell import resolve
from orchestrator.cell.trainer import train
from orchestrator.tracking.tracker import Tracker
root = Path(sys.argv[1])
cfg = resolve(compose("engine=torch", "model=lenet5", "mult=am16", "train.epochs=1", "train.batch_size=32",
                      f"checkpoint_root={root}/ck", f"tracking_uri=sqlite:///{root}/mlflow.db", "tracking_mode=queue"))
cell_dir = Path(cfg.cell_dir)
cell_dir.mkdir(parents=True)
outcome = train(cfg, cfg.identity, cell_dir, Tracker(cfg.tracking.uri, "test", cfg.identity, cell_dir, mode="queue"))
print("RESULT", outcome.status, outcome.test_accuracy, "tensorflow" in sys.modules)
"""


def test_a_torch_cell_never_loads_tensorflow(tmp_path):
    """TensorFlow is installed here, and a torch cell's process must not import it: seconds and hundreds of MB per
    cell, and its CUDA probing on a GPU node (Keras' seeding and serialisation import it when they can)."""
    result = subprocess.run([PYTHON, "-c", LOADS_NO_TENSORFLOW, str(tmp_path)], env=env(), cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    status, accuracy, loaded = result.stdout.split("RESULT ")[-1].split()
    assert status == "finished" and float(accuracy) > 0.5  # it trained (chance is 0.1)
    assert loaded == "False", "the torch cell's process imported tensorflow"


SATURATED = """
import os
os.environ["KERAS_BACKEND"] = "torch"
import keras, numpy as np, torch
from models import optim
from orchestrator.cell.engines.torch_engine import TorchEngine
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
kernel = np.zeros((4, 3), np.float32)
kernel[:, 0] = 100.0                          # class 0's logit 400, the others 0: the softmax saturated on class 0
model.layers[-1].kernel.assign(kernel)
optimizer = optim.make_optimizer({"optimizer": {"name": "sgd", "lr": 0.1}})
optimizer.build(model.trainable_variables)
steps = TorchEngine(0).compile(model, optimizer, 0.0, 2)
loss, grad_norm, hits = steps.train_step(np.ones((2, 4), np.float32), np.array([1, 2], np.int32), 0.1).result()
print("RESULT", loss, grad_norm, hits)
"""


def test_torch_loss_is_taken_from_the_logits():
    """A softmax saturated on a wrong class still has a gradient: the loss is the cross-entropy of the logits (400 per
    image here), as the TensorFlow engine's Keras loss takes it, not of the probabilities clipped at 1e-7 (16.1, and a
    zero gradient), which left ResNet-50 stuck at 29 % on a GPU."""
    proc = subprocess.run([PYTHON, "-c", SATURATED], cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss, grad_norm, hits = (float(v) for v in proc.stdout.split("RESULT ")[-1].split())
    assert abs(loss - 400.0) < 1e-3 and hits == 0
    # d(loss)/d(logits) = (softmax - onehot) / 2 per image: (1, -1, 0) / 2 and (1, 0, -1) / 2. With inputs of ones,
    # each of the 4 kernel rows and the bias get their sum (1, -0.5, -0.5): norm sqrt(5 x 1.5).
    assert abs(grad_norm - 7.5 ** 0.5) < 1e-5, grad_norm
