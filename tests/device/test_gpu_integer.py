"""The integer modes' forward conv on a GPU (torch.ops.amdnn.int_conv2d, ops/cc/integer_conv_cuda.cu) bit for bit
against numpy: the exact integer sums of ops/modes/integer_reference.accumulate on the im2col patches (padding taps
the code zero_a), then fl32(fl32(acc) x rescale), with random codes, tables, zero points and rescales; and the
quantiser that makes the codes (torch.ops.amdnn.quantise) against the reference's bytes and masks, and the ranges
its scales come from (torch.ops.amdnn.finite_range) against the reference's bounds and numpy's finiteness.

The CPU kernel (ops/cc/integer_conv_cpu.cc) must give the same bits, and is compared too. Needs torch with CUDA,
nvcc and a GPU (not part of CI): `bash tests/device/run_on_gpu.sh -k integer`.
"""

from __future__ import annotations

import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch

from ops.build.torch_library import load
from ops.modes.integer_reference import SMALLEST_NORMAL, accumulate
from tests.ops import quantiser_cases, range_cases

if not torch.cuda.is_available():
    pytest.fail("tests/device needs a CUDA GPU (run them on the GPU machine with tests/device/run_on_gpu.sh)",
                pytrace=False)

load()
DEVICE = torch.device("cuda")


def random_table(rng, signed: bool) -> np.ndarray:
    """A [256, 256] table of the kind's full range (int16 or uint16), not symmetric, with both extremes in it."""
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    table = rng.integers(lo, hi + 1, (256, 256), dtype=np.int64)
    table[0, 255], table[255, 0], table[128, 1], table[7, 200] = lo, hi, lo, hi
    return table


def random_case(rng, signed: bool, out_c: int):
    """Zero points in the codes' range, rescales over decades of both signs (one channel 1.0: y is fl32(acc))."""
    qmin, qmax = (-128, 127) if signed else (0, 255)
    zero_a = int(rng.integers(qmin, qmax + 1))
    zero_w = rng.integers(qmin, qmax + 1, out_c)
    rescale = (rng.choice([-1, 1], out_c) * 10.0 ** rng.uniform(-9, 1, out_c)).astype(np.float32)
    rescale[0] = 1.0
    return zero_a, zero_w, rescale


def arguments(rng, geometry, signed: bool, table: np.ndarray | None = None) -> tuple:
    """The op's arguments for a geometry of GEOMETRIES' form: random codes, zero points, rescales and (unless given)
    table."""
    n, h, wd, c, kh, kw, o, stride, padding, dilation = geometry
    x = rng.integers(0, 256, (n, h, wd, c), dtype=np.uint8)
    w = rng.integers(0, 256, (kh, kw, c, o), dtype=np.uint8)
    table = random_table(rng, signed) if table is None else table
    zero_a, zero_w, rescale = random_case(rng, signed, o)
    return x, w, table, zero_a, zero_w, rescale, signed, stride, padding, dilation


def values(codes: np.ndarray, signed: bool) -> np.ndarray:
    return codes.astype(np.int8 if signed else np.uint8).astype(np.int64)


def expected(x, w, table, zero_a, zero_w, rescale, signed, stride, padding, dilation) -> np.ndarray:
    """float32 [N, Ho, Wo, O] from the reference's integer sums on the im2col patches of the codes' values."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    (sh, sw), (top, bottom, left, right), (dh, dw) = stride, padding, dilation
    ho = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    wo = (wd + left + right - (kw - 1) * dw - 1) // sw + 1
    padded = np.pad(values(x, signed), ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=zero_a)
    taps = [padded[:, i * dh:i * dh + (ho - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw, :]
            for i in range(kh) for j in range(kw)]
    patches = np.stack(taps, axis=3).reshape(n * ho * wo, kh * kw * c)
    acc = accumulate(patches, zero_a, values(w, signed).reshape(-1, o), zero_w, table)
    with np.errstate(over="ignore", invalid="ignore"):
        y = acc.astype(np.float64).astype(np.float32) * rescale  # one rounding each (|acc| < 2^53), in float32
    y = np.where(np.abs(y) < SMALLEST_NORMAL, np.float32(0), y).astype(np.float32)
    return y.reshape(n, ho, wo, o)


def run(x, w, table, zero_a, zero_w, rescale, signed, stride, padding, dilation, device=DEVICE) -> np.ndarray:
    """The op on `device` (the GPU, or the CPU kernel of ops/cc/integer_conv_cpu.cc)."""
    def on(array, dtype):
        return torch.as_tensor(np.ascontiguousarray(array).astype(dtype)).to(device)

    y = torch.ops.amdnn.int_conv2d(on(x, np.uint8), on(w, np.uint8), on(table.reshape(-1), np.int32),
                                   on([zero_a], np.int32), on(zero_w, np.int32), on(rescale, np.float32), signed,
                                   list(stride), list(padding), list(dilation))
    return y.cpu().numpy()


def assert_same(got: np.ndarray, want: np.ndarray):
    """Equal values (+0 matching -0), NaN matching NaN; the first differences named."""
    assert got.shape == want.shape
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same)
    assert bad.size == 0, f"{len(bad)} of {got.size} differ, first at {bad[:3].tolist()}: {got[~same][:3]} against " \
                          f"{want[~same][:3]}"


# (batch, height, width, in_c, kh, kw, out_c, stride, padding [top, bottom, left, right], dilation): the GPU's paths
# are 8-code loads (in_c % 8 == 0) or single ones, slices of K (few tiles, K <= 8192) or not, partial channel tiles.
GEOMETRIES = {
    "3x3 same, 64 channels, sliced": (2, 9, 11, 64, 3, 3, 64, (1, 1), (1, 1, 1, 1), (1, 1)),
    "stride 2, same-like, 40 out": (3, 16, 16, 16, 3, 3, 40, (2, 2), (0, 1, 0, 1), (1, 1)),
    "dilation 2, 8 in, 70 out": (1, 20, 20, 8, 3, 3, 70, (1, 1), (2, 2, 2, 2), (2, 2)),
    "5x5, 3 in, odd out, asymmetric padding": (2, 7, 9, 3, 5, 5, 7, (1, 2), (2, 1, 0, 3), (1, 1)),
    "valid, 24 in, 33 out": (2, 10, 10, 24, 3, 3, 33, (1, 1), (0, 0, 0, 0), (1, 1)),
    "dense 1x1, K 4608": (37, 1, 1, 4608, 1, 1, 100, (1, 1), (0, 0, 0, 0), (1, 1)),
    "3x3 of 512 channels, K 4608": (2, 4, 4, 512, 3, 3, 64, (1, 1), (1, 1, 1, 1), (1, 1)),
    "dense 1x1, K 32768": (8, 1, 1, 32768, 1, 1, 16, (1, 1), (0, 0, 0, 0), (1, 1)),
    "73 row tiles, not sliced": (1, 192, 195, 8, 1, 1, 64, (1, 1), (0, 0, 0, 0), (1, 1)),
    "3x3 over 67 row tiles, not sliced": (1, 184, 186, 8, 3, 3, 72, (1, 1), (1, 1, 1, 1), (1, 1)),
}


@pytest.mark.parametrize("signed", [True, False], ids=["int8", "uint8"])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_int_conv2d_bit_exact(name, signed):
    rng = np.random.default_rng(zlib.crc32(name.encode()) + signed)
    args = arguments(rng, GEOMETRIES[name], signed)
    got = run(*args)
    assert_same(got, expected(*args))
    assert_same(got, run(*args, device=torch.device("cpu")))


@pytest.mark.parametrize("signed", [True, False], ids=["int8", "uint8"])
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_circuit_like_tables_bit_exact(name, signed):
    """Tables whose zero point's row is 0, as a circuit's is at a ReLU layer's or a symmetric zero point, with half
    the codes at the zero point: the differences T[a, w] - T[z, w] span 65535, the most the CPU kernel's permute
    look-ups take at AVX-512 (its gathers take the rest)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + signed + 2)
    x, w, table, zero_a, zero_w, rescale, *rest = arguments(rng, GEOMETRIES[name], signed)
    table[zero_a & 255] = 0
    x = np.where(rng.random(x.shape) < 0.5, np.uint8(zero_a & 255), x)
    args = (x, w, table, zero_a, zero_w, rescale, *rest)
    got = run(*args)
    assert_same(got, expected(*args))
    assert_same(got, run(*args, device=torch.device("cpu")))


@pytest.mark.parametrize("signed", [True, False], ids=["int8", "uint8"])
def test_extreme_codes_and_zero_points(signed):
    """Every code and every zero point at its extreme: the sums' largest magnitudes (K = 4608)."""
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    qmin, qmax = (-128, 127) if signed else (0, 255)
    for codes, entry, zero in ((qmin, hi, qmax), (qmax, lo, qmin), (qmax, hi, qmin)):
        x = np.full((2, 4, 4, 512), codes & 255, np.uint8)
        w = np.full((3, 3, 512, 64), codes & 255, np.uint8)
        table = np.full((256, 256), entry, np.int64)
        zero_w = np.full(64, zero, np.int64)
        rescale = np.ones(64, np.float32)
        args = (x, w, table, zero, zero_w, rescale, signed, (1, 1), (1, 1, 1, 1), (1, 1))
        assert_same(run(*args), expected(*args))


def test_table_beyond_16_bits_takes_the_direct_path():
    """|T| <= 65535 is all the op asks: a signed-codes table with entries past int16 is summed exactly too."""
    rng = np.random.default_rng(3)
    table = rng.integers(-65535, 65536, (256, 256), dtype=np.int64)
    for geometry in ((2, 6, 7, 16, 3, 3, 70, (1, 1), (1, 1, 1, 1), (1, 1)),
                     (1, 30, 30, 8, 3, 3, 64, (2, 2), (1, 1, 1, 1), (1, 1))):
        args = arguments(rng, geometry, True, table)
        assert_same(run(*args), expected(*args))


def test_special_rescales():
    """inf and 0 rescales (acc x inf overflows, 0 x inf is NaN) and a huge one that overflows to inf."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 5, 5, 16), dtype=np.uint8)
    w = rng.integers(0, 256, (3, 3, 16, 6), dtype=np.uint8)
    table = random_table(rng, True)
    rescale = np.array([np.inf, -np.inf, 0.0, 3e38, -1e-30, 2.0**-126], np.float32)
    args = (x, w, table, 3, np.array([0, 1, -2, 5, 0, 127]), rescale, True, (1, 1), (1, 1, 1, 1), (1, 1))
    assert_same(run(*args), expected(*args))


def test_deterministic_and_on_a_caller_stream():
    """Two runs give the same bits, also on a side stream and with a misaligned (offset) x."""
    rng = np.random.default_rng(7)
    args = arguments(rng, (4, 8, 8, 256, 3, 3, 128, (1, 1), (1, 1, 1, 1), (1, 1)), False)
    x, w, table, zero_a, zero_w, rescale = args[:6]
    first, second = run(*args), run(*args)
    assert np.array_equal(first.view(np.uint32), second.view(np.uint32))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        third = run(*args)
    assert np.array_equal(first.view(np.uint32), third.view(np.uint32))
    flat = torch.as_tensor(np.concatenate([[0], x.reshape(-1)]).astype(np.uint8)).to(DEVICE)
    offset = flat[1:].view(x.shape)  # one byte past an aligned start: the single-load path
    y = torch.ops.amdnn.int_conv2d(offset, torch.as_tensor(w).to(DEVICE), torch.as_tensor(table.reshape(-1)).int()
                                   .to(DEVICE), torch.tensor([zero_a], dtype=torch.int32, device=DEVICE),
                                   torch.as_tensor(zero_w).int().to(DEVICE), torch.as_tensor(rescale).to(DEVICE),
                                   False, [1, 1], [1, 1, 1, 1], [1, 1])
    assert np.array_equal(first.view(np.uint32), y.cpu().numpy().view(np.uint32))


def test_empty_output():
    x = torch.zeros(0, 5, 5, 8, dtype=torch.uint8, device=DEVICE)
    w = torch.zeros(3, 3, 8, 4, dtype=torch.uint8, device=DEVICE)
    y = torch.ops.amdnn.int_conv2d(x, w, torch.zeros(65536, dtype=torch.int32, device=DEVICE),
                                   torch.zeros(1, dtype=torch.int32, device=DEVICE),
                                   torch.zeros(4, dtype=torch.int32, device=DEVICE),
                                   torch.ones(4, device=DEVICE), True, [1, 1], [1, 1, 1, 1], [1, 1])
    assert y.shape == (0, 5, 5, 4)


@pytest.mark.parametrize("codes", quantiser_cases.CODE_SPACES, ids=lambda c: f"{c.kind}-{c.scheme}")
@pytest.mark.parametrize("shape,per_channel", [((7, 5, 33), True), ((300, 1000), True), ((3, 70001), False)])
def test_quantiser_bit_exact(codes, shape, per_channel):
    """torch.ops.amdnn.quantise on the GPU (integer_conv_cuda.cu): bytes and masks the reference's, and the CPU
    kernel's, on the values where each rule acts (tests/ops/quantiser_cases.py)."""
    scale, zero = quantiser_cases.scales(codes, shape[-1] if per_channel else 1)
    x = quantiser_cases.values(shape, float(scale[0]), float(zero[0]), codes.qmin, codes.qmax)
    want_bytes, want_mask = quantiser_cases.expected(x, scale, zero, codes)
    for device in (DEVICE, torch.device("cpu")):
        got_bytes, got_mask = torch.ops.amdnn.quantise(*(torch.as_tensor(t).to(device) for t in (x, scale, zero)),
                                                       codes.qmin, codes.qmax)
        assert np.array_equal(got_bytes.cpu().numpy(), want_bytes), device
        assert np.array_equal(got_mask.cpu().numpy(), want_mask), device


@pytest.mark.parametrize("shape,per_channel", range_cases.SHAPES)
def test_ranges_bit_exact(shape, per_channel):
    """torch.ops.amdnn.finite_range on the GPU (integer_conv_cuda.cu: per-thread bounds merged by atomics on their
    bit patterns): lo and hi bit for bit the reference's (a zero bound +0) and the CPU kernel's, finite numpy's, on
    the values where each rule acts (tests/ops/range_cases.py)."""
    x = range_cases.values(shape)
    want = range_cases.expected(x, per_channel)
    for device in (DEVICE, DEVICE, torch.device("cpu")):  # the GPU twice: its atomics' order differs run to run
        got = [t.cpu().numpy() for t in torch.ops.amdnn.finite_range(torch.as_tensor(x).to(device), per_channel)]
        for name, g, w in zip(("lo", "hi", "finite"), got, want):
            assert g.shape == w.shape and np.array_equal(g.view(np.uint8), np.asarray(w).view(np.uint8)), \
                (device, name, g[:8], w[:8])


# The bad calls run in a child process, one after the other: a binding built by a toolchain whose C++ exceptions
# cannot unwind into torch ends the process instead of raising (test_gpu_ops.py's test_raw_op_errors_raise_in_python
# says when), so each message is looked for in what the child printed for that call, raised or not, and a child that
# ended early is followed by one for the calls left: every such call is named, not only the first.
GOOD = ("x=torch.zeros(2,6,6,8,dtype=torch.uint8,device=d); w=torch.zeros(3,3,8,4,dtype=torch.uint8,device=d); "
        "t=torch.zeros(65536,dtype=torch.int32,device=d); za=torch.zeros(1,dtype=torch.int32,device=d); "
        "zw=torch.zeros(4,dtype=torch.int32,device=d); r=torch.ones(4,device=d); s=[1,1]; p=[1,1,1,1]; dl=[1,1]")
BAD_CALLS = {
    "x=x.float()": "the codes must be uint8 (bytes)",
    "x=x.cpu()": "tensors are on different devices",
    "w=w[0]": "codes must be 4-D NHWC and filter codes 4-D HWIO",
    "w=torch.zeros(3,3,5,4,dtype=torch.uint8,device=d)": "input channels 8 differ from weight input channels 5",
    "t=t[:100]": "table must hold 65536 int32 products",
    "t=t.cpu()": "tensors are on different devices",
    "za=za.float()": "zero_a must be 1 int32 value",
    "zw=zw[:3]": "zero_w must be 4 int32 values",
    "r=r.double()": "rescale must be 4 float32 values",
    "s=[0,1]": "stride must be 2 positive integers",
    "p=[1,1,1]": "padding must be 4 non-negative integers",
    "x=torch.zeros(1,1,1,32776,dtype=torch.uint8,device=d); w=torch.zeros(1,1,32776,4,dtype=torch.uint8,device=d)":
        "32776 taps per output",
}


@pytest.fixture(scope="module")
def bad_call_outputs() -> dict[str, str]:
    """What the child printed for each bad call."""
    outputs, left = {}, list(BAD_CALLS)
    while left:
        code = ["import torch", "from ops.build.torch_library import load", "load()", "d = torch.device('cuda')"]
        for number, change in enumerate(left):
            code += [f"print('<<{number}>>', flush=True)", GOOD, change,
                     "try:\n    torch.ops.amdnn.int_conv2d(x,w,t,za,zw,r,True,s,p,dl)\n    print('no error')\n"
                     "except RuntimeError as e:\n    print('raised:', e, flush=True)"]
        code.append(f"print('<<{len(left)}>>', flush=True)")
        result = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True, text=True)
        parts = [part.split(">>", 1)[1] for part in result.stdout.split("<<")[1:]]  # one a call begun, one at the end
        if len(parts) > len(left):
            outputs.update(zip(left, parts))
            break
        ended = max(len(parts), 1) - 1  # the call the child ended in: its output and stderr
        outputs.update(zip(left[:ended], parts[:ended]))
        outputs[left[ended]] = (parts[ended] if parts else "") + f"\n[child ended, status {result.returncode}]\n" + \
            result.stderr
        left = left[ended + 1:]
    return outputs


@pytest.mark.parametrize("change", list(BAD_CALLS))
def test_bad_input_errors(change, bad_call_outputs):
    output = bad_call_outputs[change]
    assert "no error" not in output, output[-2000:]
    assert "raised:" in output and BAD_CALLS[change] in output, output[-2000:]
