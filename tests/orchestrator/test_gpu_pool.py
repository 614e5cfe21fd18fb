"""The local sweep's GPU placement with fake GPU ids: how many cells run at once, which ids each gets, never one id to
two cells, a failed cell's GPUs lent again; and where the machine's GPUs are read from."""
from __future__ import annotations

import random
import subprocess

import pytest

from orchestrator.sweep.gpu_pool import (FAKE_IDS_VARIABLE, GpuPool, GpuRequestError, gpus_per_cell, machine_gpus,
                                         nvidia_smi_gpus)

FOUR = ("0", "1", "2", "3")


def _fill(pool: GpuPool) -> list[tuple[str, ...]]:
    taken = []
    while (ids := pool.take()) is not None:
        taken.append(ids)
    return taken


@pytest.mark.parametrize("per_cell, at_once", [(1, 4), (2, 2), (3, 1), (4, 1)])
def test_floor_of_gpus_over_gpus_per_cell_run_at_once(per_cell, at_once):
    pool = GpuPool(FOUR, per_cell)
    taken = _fill(pool)
    assert pool.at_once == at_once and len(taken) == at_once
    assert all(len(ids) == per_cell for ids in taken)
    assert len({g for ids in taken for g in ids}) == per_cell * at_once  # no id lent twice


def test_one_gpu_each_in_the_machines_order():
    assert _fill(GpuPool(FOUR, 1)) == [("0",), ("1",), ("2",), ("3",)]
    assert _fill(GpuPool(("GPU-a", "GPU-b"), 1)) == [("GPU-a",), ("GPU-b",)]


def test_a_failed_cells_gpus_go_to_the_next_cell():
    pool = GpuPool(FOUR, 2)
    first, second = _fill(pool)
    assert pool.take() is None                       # both pairs lent: the third cell waits
    pool.give_back(second)                           # the second cell failed
    assert pool.take() == second                     # the third cell gets its GPUs
    assert pool.take() is None


def test_no_id_is_ever_lent_twice_at_once():
    """A random run of starts and ends (failures and successes alike give their GPUs back)."""
    rng = random.Random(0)
    for per_cell in (1, 2, 3):
        pool, running = GpuPool(("a", "b", "c", "d", "e", "f", "g"), per_cell), []
        for _ in range(500):
            if running and rng.random() < 0.5:
                pool.give_back(running.pop(rng.randrange(len(running))))
            elif (ids := pool.take()) is not None:
                running.append(ids)
            lent = [g for ids in running for g in ids]
            assert len(lent) == len(set(lent)) and len(running) <= pool.at_once
            assert set(lent) | set(pool.free) == set(pool.ids) and not set(lent) & set(pool.free)


def test_giving_back_what_was_not_lent_is_an_error():
    pool = GpuPool(FOUR, 1)
    ids = pool.take()
    pool.give_back(ids)
    with pytest.raises(ValueError, match="not lent"):
        pool.give_back(ids)


@pytest.mark.parametrize("cluster, ids, expected", [
    ({"gpus": None}, FOUR, 1), ({"gpus": None}, (), 0), ({"gpus": 0}, FOUR, 0), ({"gpus": 2}, FOUR, 2), ({}, (), 0)])
def test_gpus_per_cell(cluster, ids, expected):
    assert gpus_per_cell(cluster, ids) == expected


@pytest.mark.parametrize("cluster, ids, message", [
    ({"gpus": 1}, (), r"cluster.gpus=1 GPUs per cell, but the GPUs here .* are none.*cluster.gpus=0"),
    ({"gpus": 3}, ("0", "1"), r"are 2 \(0,1\): set cluster.gpus<=2"),
    ({"gpus": -1}, FOUR, r"whole number"), ({"gpus": True}, FOUR, r"whole number")])
def test_a_request_the_machine_cannot_give_is_refused(cluster, ids, message):
    with pytest.raises(GpuRequestError, match=message):
        gpus_per_cell(cluster, ids)


class _Smi:
    def __init__(self, stdout: str = "", returncode: int = 0, missing: bool = False):
        self.stdout, self.returncode, self.missing = stdout, returncode, missing

    def __call__(self, *args, **kwargs):
        if self.missing:
            raise FileNotFoundError("nvidia-smi")
        return subprocess.CompletedProcess(args, self.returncode, self.stdout, "")


SMI = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
       "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-66666666-7777-8888-9999-000000000000)\n")


def test_where_the_gpus_come_from():
    assert machine_gpus({}, {}, _Smi(SMI)) == (("0", "1"), "nvidia-smi -L")
    assert machine_gpus({}, {}, _Smi(missing=True))[0] == ()
    assert machine_gpus({}, {}, _Smi("No devices found", returncode=6))[0] == ()
    assert machine_gpus({}, {"CUDA_VISIBLE_DEVICES": "2,3"}, _Smi(SMI)) == (("2", "3"), "CUDA_VISIBLE_DEVICES")
    assert machine_gpus({}, {"CUDA_VISIBLE_DEVICES": ""}, _Smi(SMI))[0] == ()     # set and empty: no GPU
    assert machine_gpus({}, {"CUDA_VISIBLE_DEVICES": "0,-1,1"}, _Smi(SMI))[0] == ("0",)  # CUDA stops at -1
    assert machine_gpus({"gpu_ids": [5, 7]}, {"CUDA_VISIBLE_DEVICES": "0"}, _Smi(SMI)) == (("5", "7"), "cluster.gpu_ids")
    assert machine_gpus({"gpu_ids": "5,7"}, {}, _Smi(SMI))[0] == ("5", "7")
    fake = machine_gpus({"gpu_ids": [5]}, {FAKE_IDS_VARIABLE: "f0,f1"}, _Smi(SMI))
    assert fake[0] == ("f0", "f1") and fake[1].startswith(FAKE_IDS_VARIABLE)
    with pytest.raises(GpuRequestError, match="twice"):
        machine_gpus({"gpu_ids": [1, 1]}, {}, _Smi(SMI))


def test_nvidia_smi_of_this_machine_answers_without_error():
    assert isinstance(nvidia_smi_gpus(), tuple)
