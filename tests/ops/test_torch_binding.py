"""The PyTorch binding on the CPU (what CI can run; tests/device runs the same on a GPU): torch.ops.amdnn.* built on
first use, bit for bit against the numpy reference product by product, layers against float64 references and torch's
own ops, autograd through the multiplier or exact, opcheck, torch.compile, errors, and ops importable without
TensorFlow or torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torch  # part of the test extras: the suite fails, never skips, without it

from ops.modes import reference  # noqa: E402
from ops import torch_ops  # noqa: E402

from ops.modes.operands import random_operands, same_bits, special_operands  # noqa: E402

from tests.ops.kernels import kernel_modes  # noqa: E402


def test_old_module_name():
    """`import ops.torch_ops`, the binding's older module name, is the binding's ops module."""
    import ops.torch_ops as old_name  # the import statement is what is tested

    assert old_name is torch_ops
    assert old_name.conv2d is torch_ops.conv2d

def assert_products(out, left, right, mode, what):
    expected = reference.product(left[:, None], right[None, :], mode)
    same = same_bits(np.asarray(out).reshape(expected.shape), expected)
    assert same.all(), f"{mode} {what}: {int((~same).sum())} of {same.size} products differ"


@pytest.mark.parametrize("operands", ["special", "random"])
def test_products_through_every_entry_point(operands):
    if operands == "special":
        left = right = special_operands()
    else:
        values = random_operands(600, seed=11)
        left, right = values[:300], values[300:]
    for mode in kernel_modes():
        attr, table = torch_ops.kernel_arguments_for(mode, torch.device("cpu"))
        a, b = torch.from_numpy(left), torch.from_numpy(right)
        assert_products(torch_ops.products(a[:, None].expand(-1, b.numel()), b[None, :].expand(a.numel(), -1),
                                           mode), left, right, mode, "scalar definitions")
        assert_products(torch_ops.matmul(a[:, None], b[None, :], mode), left, right, mode, "matmul")
        assert_products(torch.ops.amdnn.matmul(a[None, :].t(), b[:, None].t(), table, attr), left, right, mode,
                        "matmul of transposed views")
        y = torch_ops.conv2d(a.reshape(-1, 1, 1, 1), b.reshape(-1, 1, 1, 1), multiplier=mode)
        assert_products(y.reshape(a.numel(), b.numel()), left, right, mode, "conv2d")
        dx = torch.ops.amdnn.conv2d_backward_input([a.numel(), b.numel(), 1, 1], b.reshape(1, -1, 1, 1),
                                                   a.reshape(-1, 1, 1, 1), table, attr, [1, 1], [0, 0, 0, 0], [1, 1])
        assert_products(dx.reshape(a.numel(), b.numel()), left, right, mode, "conv2d_backward_input")
        dw = torch.ops.amdnn.conv2d_backward_filter(a.reshape(1, -1, 1, 1), [b.numel(), a.numel(), 1, 1],
                                                    b.reshape(1, -1, 1, 1), table, attr, [1, 1], [0, 0, 0, 0],
                                                    [1, 1])
        assert_products(dw.reshape(b.numel(), a.numel()).t(), left, right, mode, "conv2d_backward_filter")


def relative_error(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@pytest.mark.parametrize("stride,padding,dilation", [(1, "same", 1), (2, "same", 1), (2, "valid", 1), (1, "same", 2)])
def test_conv_layers_against_float64_reference(stride, padding, dilation):
    rng = np.random.default_rng(stride * 10 + dilation)
    x = rng.standard_normal((2, 9, 7, 5)).astype(np.float32)  # NHWC
    w = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)  # HWIO
    xt = torch.from_numpy(x).permute(0, 3, 1, 2)  # channels_last NCHW, read without a copy
    wt = torch.from_numpy(w).permute(3, 2, 0, 1).contiguous()
    for mode in ("acc32", "am16", "mit32", "fp16"):
        y = torch_ops.conv2d(xt, wt, stride=stride, padding=padding, dilation=dilation, multiplier=mode)
        assert y.is_contiguous(memory_format=torch.channels_last)
        ref = reference.conv2d(x, w, stride, padding.upper(), dilation, mode)
        assert relative_error(y.permute(0, 2, 3, 1), ref) <= 1e-5, mode
        dy = rng.standard_normal(ref.shape).astype(np.float32)
        xg = xt.clone().requires_grad_()
        wg = wt.clone().requires_grad_()
        out = torch_ops.conv2d(xg, wg, stride=stride, padding=padding, dilation=dilation, multiplier=mode)
        gx, gw = torch.autograd.grad(out, (xg, wg), torch.from_numpy(dy).permute(0, 3, 1, 2))
        ref_dx = reference.conv2d_backprop_input(x.shape, w, dy, stride, padding.upper(), dilation, mode)
        ref_dw = reference.conv2d_backprop_filter(x, w.shape, dy, stride, padding.upper(), dilation, mode)
        assert relative_error(gx.permute(0, 2, 3, 1), ref_dx) <= 1e-5, f"{mode} input gradient"
        assert relative_error(gw.permute(2, 3, 1, 0), ref_dw) <= 1e-5, f"{mode} filter gradient"


def test_acc32_and_exact_gradients_match_torch():
    torch.manual_seed(0)
    x = torch.randn(3, 4, 10, 10, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    native = torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    nx, nw = torch.autograd.grad(native.square().sum(), (x, w))
    ours = torch_ops.conv2d(x, w, stride=2, padding=1, multiplier="acc32")
    assert torch.allclose(ours, native, rtol=1e-5, atol=1e-5)
    ax, aw = torch.autograd.grad(ours.square().sum(), (x, w))
    assert torch.allclose(ax, nx, rtol=1e-4, atol=1e-4) and torch.allclose(aw, nw, rtol=1e-4, atol=1e-4)
    # am16 forward with exact gradients: the backward is torch's own conv gradient of the same dy
    y = torch_ops.conv2d(x, w, stride=2, padding=1, multiplier="am16", exact_gradients=True)
    dy = torch.randn_like(y)
    ex, ew = torch.autograd.grad(y, (x, w), dy)
    tx, tw = torch.autograd.grad(torch.nn.functional.conv2d(x, w, stride=2, padding=1), (x, w), dy)
    assert torch.allclose(ex, tx, rtol=1e-5, atol=1e-5) and torch.allclose(ew, tw, rtol=1e-5, atol=1e-5)
    # through the multiplier: close to exact, but not it
    gx, _ = torch.autograd.grad(torch_ops.conv2d(x, w, stride=2, padding=1, multiplier="am16"), (x, w), dy)
    assert not torch.equal(gx, tx) and (gx - tx).norm() / tx.norm() < 0.1


def test_matmul_gradients_keep_the_left_operand_first(tmp_path):
    """A non-symmetric table: da = dc (*) b^T and db = a^T (*) dc, each product with the left operand first."""
    table = np.random.default_rng(3).integers(0, 256, (128, 128), dtype=np.uint8)
    path = tmp_path / "asym.bin"
    path.write_bytes(table.tobytes())
    mode = f"lut:{path}"
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    dc = rng.standard_normal((5, 3)).astype(np.float32)
    at, bt = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    c = torch_ops.matmul(at, bt, multiplier=mode)
    assert relative_error(c.detach(), reference.matmul(a, b, mode)) <= 1e-6
    da, db = torch.autograd.grad(c, (at, bt), torch.from_numpy(dc))
    assert relative_error(da, reference.matmul(dc, b.T, mode)) <= 1e-6
    assert relative_error(db, reference.matmul(a.T, dc, mode)) <= 1e-6


def test_opcheck_compile_determinism_and_dtypes():
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    w = torch.randn(5, 4, 3, 3, requires_grad=True)
    attr, table = torch_ops.kernel_arguments_for("am16", torch.device("cpu"))
    torch.library.opcheck(torch.ops.amdnn.conv2d.default, (x, w, table, attr, [1, 1], [1, 1, 1, 1], [1, 1], False))
    a, b = torch.randn(5, 7, requires_grad=True), torch.randn(7, 3, requires_grad=True)
    torch.library.opcheck(torch.ops.amdnn.matmul.default, (a, b, table, attr, False))
    compiled = torch.compile(lambda u, v: torch_ops.conv2d(u, v, padding=1, multiplier="am16").relu(), fullgraph=True)
    eager = torch_ops.conv2d(x, w, padding=1, multiplier="am16").relu()
    assert torch.equal(compiled(x, w), eager)
    assert torch.equal(torch_ops.conv2d(x, w, padding=1, multiplier="am16").relu(), eager)  # same bits again
    half = torch_ops.matmul(a.detach().half(), b.detach().half(), multiplier="acc32")
    assert half.dtype == torch.float16
    assert torch_ops.matmul(torch.ones(2, 3, 0), torch.ones(0, 4), multiplier="am16").shape == (2, 3, 4)


def test_bad_input_is_refused_with_the_reason():
    x = torch.randn(2, 4, 6, 6)
    with pytest.raises(TypeError, match="floating-point"):
        torch_ops.conv2d(x.int(), torch.randn(5, 4, 3, 3).int())
    with pytest.raises(ValueError, match="input channels 4 differ from weight input channels 3"):
        torch_ops.conv2d(x, torch.randn(5, 3, 3, 3))
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        torch_ops.conv2d(torch.randn(1, 4, 2, 2), torch.randn(5, 4, 3, 3))
    with pytest.raises(ValueError, match="unknown multiplier 'am8'"):
        torch_ops.matmul(torch.randn(2, 3), torch.randn(3, 2), multiplier="am8")
    with pytest.raises(ValueError, match=r"needs a \[\.\.\., K\] and b \[K, N\]"):
        torch_ops.matmul(torch.randn(2, 3), torch.randn(4, 2))
    with pytest.raises(RuntimeError, match="grad_output has shape"):
        attr, table = torch_ops.kernel_arguments_for("am16", torch.device("cpu"))
        torch.ops.amdnn.conv2d_backward_input([2, 4, 6, 6], torch.randn(5, 4, 3, 3), torch.randn(2, 5, 3, 3), table,
                                              attr, [1, 1], [1, 1, 1, 1], [1, 1])


def test_ops_imports_without_tensorflow_or_torch():
    """ops/ (registry, reference, tables, build logic) imports with neither framework; only the bindings need one."""
    code = ("import sys; sys.modules['tensorflow'] = None; sys.modules['torch'] = None\n"
            "import ops, ops.build, ops.build.__main__, ops.build.torch_library, ops.modes.arguments, ops.modes.describe, "
            "ops.tf_binding.library, ops.tf_binding.kernel_paths, ops.torch_build, ops.describe\n"
            "print(ops.names(), ops.product(1.5, 1.25, 'am16'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "am16" in result.stdout


def test_build_commands_report_the_loaded_binding(capsys):
    """`python -m ops.build --torch` reports the binding this process loaded (in-process: a new process would only
    load the same cache entry again), and its older name `python -m ops.torch_build` runs the same command."""
    from ops.build.__main__ import main

    assert main(["--torch"]) == 0
    assert f"library      {torch_ops.BUILD.library}" in capsys.readouterr().out
    root = Path(__file__).resolve().parents[2]
    helps = {name: subprocess.run([sys.executable, "-m", name, "--help"], cwd=root, capture_output=True, text=True,
                                  timeout=120) for name in ("ops.build", "ops.torch_build")}
    assert all(result.returncode == 0 and "usage:" in result.stdout for result in helps.values()), helps
    assert "--torch" in helps["ops.build"].stdout


def test_cpu_kernels_split_over_torchs_threads_with_the_same_bits():
    """torch_binding.cc splits every CPU kernel's work with at::parallel_for, an OpenMP region compiled into the
    binding itself: built without -fopenmp it runs on one thread whatever torch.set_num_threads says. The library
    must call OpenMP's runtime, and one thread or two must give the same bits (float and integer kernels)."""
    symbols = subprocess.run(["nm", "-D", "--undefined-only", torch_ops.BUILD.library], capture_output=True,
                             text=True, timeout=60, check=True).stdout
    assert "GOMP_parallel" in symbols, "the binding was built without OpenMP: its CPU kernels run on one thread"
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 16, 12, 12, generator=generator)
    w = torch.randn(24, 16, 3, 3, generator=generator)
    codes = torch.randint(0, 256, (4, 12, 12, 16), generator=generator, dtype=torch.uint8)
    w_codes = torch.randint(0, 256, (3, 3, 16, 24), generator=generator, dtype=torch.uint8)
    table = torch.randint(-32768, 32768, (65536,), generator=generator, dtype=torch.int32)
    zero_a, zero_w = torch.tensor([3], dtype=torch.int32), torch.full((24,), -2, dtype=torch.int32)
    rescale = torch.full((24,), 1e-3)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            results.append((torch_ops.conv2d(x, w, padding=1, multiplier="am16"),
                            torch_ops.int_conv2d_codes(codes, w_codes, table, zero_a, zero_w, rescale, True, 1,
                                                       "same", 1)))
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*results):
        assert torch.equal(one.view(torch.int32), two.view(torch.int32))
