"""Every epoch of a simulated cell logs how many GEMM calls (and products) took the fast and the generic CPU kernel;
ordinary training (LeNet-300-100 under am16 on digits) takes the fast one only where the build has it."""
from __future__ import annotations

from tests.orchestrator.helpers import TINY, run_data


def test_epoch_metrics_count_the_kernel_paths(workdir):
    from ops.build import cpu_target
    from orchestrator.cell.run import run_cell

    result = run_cell(workdir.cfg(*TINY, "mult=am16", "train.epochs=1"), supervise=False)
    assert result.status == "finished", result
    metrics = run_data(workdir.uri, result.run_id)["metrics"]
    fast, generic = metrics["gemm_fast_calls"], metrics["gemm_generic_calls"]
    # 44 steps x (3 forward + 3 filter-gradient + 2 input-gradient GEMMs), and 3 forward GEMMs for each of the 2
    # evaluation batches of the 360 test images
    calls = 44 * 8 + 2 * 3
    if cpu_target()[0].startswith(("x86-64-v4", "x86-64-v3")):
        assert fast == [(44, calls)] and generic == [(44, 0)], (fast, generic)
        assert metrics["gemm_generic_products"] == [(44, 0)] and metrics["gemm_fast_products"][0][1] > 0
    else:
        assert fast == [(44, 0)] and generic == [(44, calls)], (fast, generic)
