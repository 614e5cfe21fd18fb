"""The CUDA kernels through the PyTorch binding, on a GPU: bit for bit against the scalar definitions, layers against
float64 references and cuDNN, every geometry, determinism, path counts and bad input.

Needs torch with CUDA, nvcc and a GPU (not part of CI, which has none): `bash tests/device/run_on_gpu.sh`.
Products are checked with no accumulation ([N,1] x [1,K] matmuls and 1x1 convs with one input or output channel),
so each output element is one product; the expected bits come from multiplier.h's scalar functions compiled for the
host (torch.ops.amdnn.products) and from the numpy reference (ops.modes.reference).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

torch.backends.cudnn.allow_tf32 = False  # cuDNN in fp32, as the references assume
torch.backends.cuda.matmul.allow_tf32 = False

from ops.modes import reference  # noqa: E402
from ops.modes.table_make import write_table  # noqa: E402
from ops.modes.operands import bits, fast_operands, random_operands, special_operands  # noqa: E402
from ops.modes.operands import same_bits as _same_bits  # noqa: E402
from ops import torch_ops  # noqa: E402
from ops.modes.multipliers import names  # noqa: E402

if not torch.cuda.is_available():
    pytest.fail("tests/device needs a CUDA GPU (run them on the GPU machine with tests/device/run_on_gpu.sh)",
                pytrace=False)

DEVICE = torch.device("cuda")
RNG = np.random.default_rng(20261123)


def _lut_modes(tmp_dir) -> list[str]:
    """The published tables as written by the project (byte-identical to MBM_7, MIT_7, ACC_7) and a random table
    that is not symmetric, so the operand order of every op is checked."""
    paths = []
    for name in ("am16", "mit16", "acc16"):
        paths.append(write_table(name, tmp_dir / f"{name}.bin"))
    rng = np.random.default_rng(5)
    asymmetric = rng.integers(0, 256, (128, 128), dtype=np.uint8)
    path = tmp_dir / "asymmetric7.bin"
    path.write_bytes(asymmetric.tobytes())
    paths.append(path)
    small = rng.integers(0, 256, (16, 16), dtype=np.uint8) & np.uint8(0x8F)  # m = 4: entries c << 7 | M, M < 16
    path = tmp_dir / "asymmetric4.bin"
    path.write_bytes(small.tobytes())
    paths.append(path)
    return [f"lut:{p}" for p in paths]


@pytest.fixture(scope="module")
def modes(tmp_path_factory) -> list[str]:
    """Every mode, or those named in AMDNN_DEVICE_MODES (comma-separated; "lut" for all the tables) when checking
    one kernel's variant (e.g. a tuning knob in AMDNN_NVCC_FLAGS)."""
    every = names(include_native=False) + _lut_modes(tmp_path_factory.mktemp("luts"))
    chosen = [name for name in os.environ.get("AMDNN_DEVICE_MODES", "").split(",") if name]
    unknown = sorted(set(chosen) - set(names(include_native=False)) - {"lut"})
    if unknown:
        pytest.fail(f"AMDNN_DEVICE_MODES names {unknown}; valid: {names(include_native=False) + ['lut']}", pytrace=False)
    return [mode for mode in every if not chosen or mode.split(":")[0] in chosen]


def same_bits(x, y) -> np.ndarray:
    """Equal fp32 bits, +0 matching -0 (rule 4 of the definitions); NaNs must match bit for bit."""
    return _same_bits(x, y, nan_payloads=True)


OPERAND_SETS = {
    "special": lambda: (special_operands(), special_operands()),
    "random": lambda: (random_operands(1000, 1), random_operands(1000, 2)),  # 10^6 pairs
    "fast": lambda: (fast_operands(1000, 3), fast_operands(1000, 4)),
}


def gpu(x) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(x)).to(DEVICE)


def expected_products(left: np.ndarray, right: np.ndarray, mode: str) -> np.ndarray:
    a = torch.as_tensor(np.repeat(left[:, None], right.size, 1))
    b = torch.as_tensor(np.repeat(right[None, :], left.size, 0))
    return torch_ops.products(a, b, mode).numpy()


def assert_same(out, expected, what: str, left, right):
    out = np.asarray(out, np.float32).reshape(expected.shape)
    same = same_bits(out, expected)
    if not same.all():
        i, j = np.argwhere(~same)[0]
        pytest.fail(f"{what}: {int((~same).sum())} of {same.size} products differ; first 0x{bits(left[i]):08x} x "
                    f"0x{bits(right[j]):08x}: GPU 0x{bits(out[i, j]):08x}, host 0x{bits(expected[i, j]):08x}")


# ------------------------------------------------------------------------------------------------ products


@pytest.mark.parametrize("operands", sorted(OPERAND_SETS))
def test_every_product_bit_exact(modes, operands):
    """Every mode, every entry point, one product per output: GPU bits == host scalar functions; the host
    functions agree with the numpy reference (NaN payloads aside, which numpy does not define)."""
    left, right = OPERAND_SETS[operands]()
    for mode in modes:
        expected = expected_products(left, right, mode)
        ref = reference.product(left[:, None], right[None, :], mode.replace("lut:", "lut:"))
        agree = same_bits(expected, ref) | (np.isnan(expected) & np.isnan(ref))
        assert agree.all(), f"{mode}: host functions and numpy reference differ at {np.argwhere(~agree)[0]}"
        a, b = gpu(left[:, None]), gpu(right[None, :])
        assert_same(torch_ops.matmul(a, b, mode).cpu(), expected, f"{mode} matmul", left, right)
        # transposed views (read without a copy) and the exact-order gradient forms
        assert_same(torch.ops.amdnn.matmul(gpu(left[None, :]).t(), gpu(right[:, None]).t(),
                                           torch_ops.kernel_arguments_for(mode, DEVICE)[1],
                                           torch_ops.kernel_arguments_for(mode, DEVICE)[0]).cpu(),
                    expected, f"{mode} matmul transposed", left, right)
        # 1x1 conv: x [N=len(left), C=1, 1, 1] with w [O=len(right), 1, 1, 1]: y[n, o] = x[n] (*) w[o]
        x = gpu(left.reshape(-1, 1, 1, 1))
        w = gpu(right.reshape(-1, 1, 1, 1))
        assert_same(torch_ops.conv2d(x, w, multiplier=mode).reshape(left.size, right.size).cpu(), expected,
                    f"{mode} conv2d", left, right)
        attr, table = torch_ops.kernel_arguments_for(mode, DEVICE)
        # input gradient with one output channel: dx[n, c] = dy[n] (*) w[c]
        dx = torch.ops.amdnn.conv2d_backward_input([left.size, right.size, 1, 1], gpu(right.reshape(1, -1, 1, 1)),
                                                   gpu(left.reshape(-1, 1, 1, 1)), table, attr, [1, 1],
                                                   [0, 0, 0, 0], [1, 1])
        assert_same(dx.reshape(left.size, right.size).cpu(), expected, f"{mode} conv2d_backward_input", left, right)
        # filter gradient over one pixel: dw[o, c] = x[c] (*) dy[o]
        dw = torch.ops.amdnn.conv2d_backward_filter(gpu(left.reshape(1, -1, 1, 1)), [right.size, left.size, 1, 1],
                                                    gpu(right.reshape(1, -1, 1, 1)), table, attr, [1, 1],
                                                    [0, 0, 0, 0], [1, 1])
        assert_same(dw.reshape(right.size, left.size).t().cpu(), expected, f"{mode} conv2d_backward_filter", left,
                    right)


# ------------------------------------------------------------------------------------------------ sums


def x86_add(acc: np.ndarray, p: np.ndarray) -> np.ndarray:
    """acc + p in float32 by x86's SSE rules (addss acc, p), which the kernels' sums follow: a NaN acc stays, else
    a NaN p is the sum, inf + -inf is the default NaN 0xFFC00000 (the GPU's own FADD gives 0x7FFFFFFF)."""
    ua, up = acc.view(np.uint32), p.view(np.uint32)
    with np.errstate(all="ignore"):
        total = (acc + p).astype(np.float32).view(np.uint32)
    magnitude_a, magnitude_p = ua & np.uint32(0x7FFFFFFF), up & np.uint32(0x7FFFFFFF)
    opposite_infinities = (magnitude_a == 0x7F800000) & (magnitude_p == 0x7F800000) & (ua != up)
    total = np.where(opposite_infinities, np.uint32(0xFFC00000), total)
    total = np.where(magnitude_p > 0x7F800000, up | np.uint32(0x400000), total)
    total = np.where(magnitude_a > 0x7F800000, ua | np.uint32(0x400000), total)
    return total.view(np.float32)


def sums_in_k_order(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """a @ b as each output's running float32 sum of the host's scalar products in k order, by x86_add."""
    m, n = a.shape[0], b.shape[1]
    products = torch_ops.products(torch.as_tensor(np.repeat(a[:, :, None], n, 2)),
                                  torch.as_tensor(np.repeat(b[None], m, 0)), mode).numpy()
    total = np.zeros((m, n), np.float32)
    for kk in range(a.shape[1]):
        total = x86_add(total, np.ascontiguousarray(products[:, kk, :]))
    return total


def assert_same_sums(out: np.ndarray, expected: np.ndarray, what: str):
    same = same_bits(out, expected)
    if not same.all():
        first = tuple(np.argwhere(~same)[0])
        pytest.fail(f"{what}: {int((~same).sum())} of {same.size} sums differ from the products added in k order; "
                    f"first at {first}: GPU 0x{bits(out[first]):08x}, expected 0x{bits(expected[first]):08x}")


def _within_every_fast_range(values: np.ndarray, rng) -> np.ndarray:
    """fast_operands' mantissas (carry boundaries included) with biased exponents 100..133 (|x| < 128), inside every
    mode's fast range (fp16's too: |x| <= 255), and no zeros (the test places them)."""
    u = values.view(np.uint32) & np.uint32(0x807FFFFF)
    return (u | (rng.integers(100, 134, u.size).astype(np.uint32) << np.uint32(23))).view(np.float32)


SUM_ZEROS = {  # k 48: three k tiles of 16 (or six of 8), so the inner loop can change from tile to tile
    "zeros on the left": (0.3, None),
    "zeros on the right in the second k tile": (0.3, slice(16, 32)),
    "no zeros": (0.0, None),
}


# 128 x 128 and 128 x 64 tiles; m >= 16,384 and n <= 64 takes lut's and am16's 256 x 64 tiles, a ragged last
# row tile included
@pytest.mark.parametrize("m,n", [(40, 72), (40, 24), (16400, 24)])
@pytest.mark.parametrize("zeros", sorted(SUM_ZEROS))
def test_sums_are_the_products_added_in_k_order(modes, zeros, m, n):
    """With one k slice (k < 256: no split), every output is the fp32 running sum of its products in k order, bit
    for bit, on the fast path. Mitchell's tiles whose right operands hold no zero take the inner loop with the left
    mask alone: its bits must be those of the two-mask loop, which the tile with zeros on the right takes."""
    left_zeros, right_zero_rows = SUM_ZEROS[zeros]
    k = 48
    rng = np.random.default_rng(m + n + len(zeros))
    a, b = (_within_every_fast_range(fast_operands(size, seed), rng).reshape(shape)
            for size, seed, shape in ((m * k, 11, (m, k)), (k * n, 12, (k, n))))
    a[rng.random(a.shape) < left_zeros] = 0.0
    if right_zero_rows is not None:
        b[right_zero_rows][rng.random(b[right_zero_rows].shape) < 0.3] = 0.0
    for mode in modes:
        expected = sums_in_k_order(a, b, mode)
        fast0, generic0 = torch_ops.gpu_path_counts()
        out = torch_ops.matmul(gpu(a), gpu(b), multiplier=mode).cpu().numpy()
        fast1, generic1 = torch_ops.gpu_path_counts()
        assert fast1 > fast0 and generic1 == generic0, f"{mode}: these operands must take the fast path only"
        assert_same_sums(out, expected, mode)


ANY_SUM_OPERANDS = {
    "every exponent and the specials": lambda shape, seed: random_operands(int(np.prod(shape)), seed).reshape(shape),
    # below fp16's inf (65520) but with products past it: 300 x 300 is +inf in fp16, 300 x -300 -inf
    "fp16 products overflowing": lambda shape, seed: (np.random.default_rng(seed).standard_normal(shape) *
                                                      np.float32(200.0)).astype(np.float32),
}


@pytest.mark.parametrize("n", [72, 24])
@pytest.mark.parametrize("operands", sorted(ANY_SUM_OPERANDS))
def test_sums_past_inf_and_nan_follow_x86_rules(modes, operands, n):
    """Sums (k 48, one slice) whose running sums meet inf and NaN: bit for bit, NaN payloads included, the products
    added in k order by x86's rules, on whichever path each tile takes. fp16's fast path must not take operands whose
    products overflow to infinities of both signs (its FADD would give 0x7FFFFFFF). (The CPU kernels' NaN payloads
    in sums are left open by the definitions and differ between their vector levels, so they are not the reference.)"""
    m, k = 40, 48
    a = ANY_SUM_OPERANDS[operands]((m, k), 21)
    b = ANY_SUM_OPERANDS[operands]((k, n), 22)
    for mode in modes:
        out = torch_ops.matmul(gpu(a), gpu(b), multiplier=mode).cpu().numpy()
        assert_same_sums(out, sums_in_k_order(a, b, mode), mode)


# ------------------------------------------------------------------------------------------------ layers

GEOMETRIES = [  # (N, C, H, W, O, kh, kw, stride, padding, dilation)
    (2, 8, 9, 7, 12, 3, 3, 1, "same", 1),
    (2, 8, 9, 7, 12, 3, 3, 2, "same", 1),
    (1, 5, 11, 10, 7, 3, 2, 2, "valid", 1),
    (2, 4, 12, 12, 6, 3, 3, 1, "same", 2),
    (1, 3, 8, 8, 70, 1, 1, 1, "valid", 1),  # a wide output: 128 x 128 tiles
    (3, 16, 6, 5, 9, 5, 5, 3, "same", 1),
    (2, 4, 8, 8, 6, 1, 1, 2, "valid", 1),  # phases of the input gradient that no tap reads
    (2, 6, 9, 9, 5, 2, 2, 2, "same", 1),   # an even filter at stride 2: asymmetric padding
    (1, 5, 7, 10, 6, 2, 3, 1, "valid", 1),  # stride 1, a filter of unequal sides: the input gradient as one phase
    (2, 4, 13, 12, 5, 3, 3, 2, "valid", 2),  # strided and dilated: the input gradient's gather over all taps
    (1, 3, 10, 9, 4, 7, 7, 1, "same", 1),  # 49 taps: the binding's HWOI copy through 32 x 32 tiles
    (1, 64, 4, 4, 8, 3, 3, 1, "same", 1),  # the filter gradient's 576 rows: lut's 192 x 64 tiles
]


def relative_error(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g)))
def test_conv_layers_against_float64_reference(modes, geometry):
    n, c, h, w_, o, kh, kw, stride, padding, dilation = geometry
    rng = np.random.default_rng(hash(geometry) % 2**32)
    x = rng.standard_normal((n, h, w_, c)).astype(np.float32)  # NHWC for the reference
    w = rng.standard_normal((kh, kw, c, o)).astype(np.float32)  # HWIO
    xt = gpu(x).permute(0, 3, 1, 2)  # a channels_last NCHW tensor
    wt = gpu(w).permute(3, 2, 0, 1).contiguous()
    for mode in modes:
        y = torch_ops.conv2d(xt, wt, stride=stride, padding=padding, dilation=dilation, multiplier=mode)
        ref = reference.conv2d(x, w, stride, padding.upper(), dilation, mode)
        assert relative_error(y.permute(0, 2, 3, 1).cpu(), ref) <= 1e-5, f"{mode} forward"
        dy = rng.standard_normal(ref.shape).astype(np.float32)
        attr, table = torch_ops.kernel_arguments_for(mode, DEVICE)
        pads = torch_ops.conv_padding(padding, (h, w_), (kh, kw), [stride] * 2, [dilation] * 2)
        dyt = gpu(dy).permute(0, 3, 1, 2)
        dx = torch.ops.amdnn.conv2d_backward_input([n, c, h, w_], wt, dyt, table, attr, [stride] * 2, pads,
                                                   [dilation] * 2)
        ref_dx = reference.conv2d_backprop_input(x.shape, w, dy, stride, padding.upper(), dilation, mode)
        assert relative_error(dx.permute(0, 2, 3, 1).cpu(), ref_dx) <= 1e-5, f"{mode} input gradient"
        dw = torch.ops.amdnn.conv2d_backward_filter(xt, [o, c, kh, kw], dyt, table, attr, [stride] * 2, pads,
                                                    [dilation] * 2)
        ref_dw = reference.conv2d_backprop_filter(x, w.shape, dy, stride, padding.upper(), dilation, mode)
        assert relative_error(dw.permute(2, 3, 1, 0).cpu(), ref_dw) <= 1e-5, f"{mode} filter gradient"


@pytest.mark.parametrize("shape", [(33, 70, 65), (128, 300, 784), (1, 1, 3000), (200, 10, 1), (576, 40, 300)])
def test_matmul_against_float64_reference(modes, shape):
    m, n, k = shape
    rng = np.random.default_rng(m * n * k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    for mode in modes:
        out = torch_ops.matmul(gpu(a), gpu(b), multiplier=mode).cpu()
        assert relative_error(out, reference.matmul(a, b, mode)) <= 1e-5, mode


# ------------------------------------------------------------------------------------------------ padding tiles

def _explicit_im2col(x: np.ndarray, kh: int, kw: int, stride: int, pads: list[int]) -> np.ndarray:
    """x [N, H, W, C] -> [N * Ho * Wo, kh * kw * C], rows (n, ho, wo), k (kh, kw, c), the padding as zeros."""
    top, bottom, left, right = pads
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    ho, wo = (xp.shape[1] - kh) // stride + 1, (xp.shape[2] - kw) // stride + 1
    taps = [xp[:, i:i + stride * ho:stride, j:j + stride * wo:stride, :] for i in range(kh) for j in range(kw)]
    return np.stack(taps, 3).reshape(x.shape[0] * ho * wo, -1)


def _explicit_dy_gather(dy: np.ndarray, size: tuple[int, int], kh: int, kw: int, stride: int,
                        pads: list[int]) -> np.ndarray:
    """dy [N, Ho, Wo, O] -> [N * H * W, kh * kw * O], rows (n, hi, wi), k (kh, kw, co): dy[n, ho, wo, co] where
    ho * stride = hi + pad_top - kh (the same along w) lands inside dy, else zero (padding, between strides)."""
    n, oh, ow, o = dy.shape
    out = np.zeros((n, size[0], size[1], kh, kw, o), np.float32)
    for i in range(kh):
        for j in range(kw):
            for hi in range(size[0]):
                for wi in range(size[1]):
                    h, w_ = hi + pads[0] - i, wi + pads[2] - j
                    if h % stride or w_ % stride or not (0 <= h // stride < oh and 0 <= w_ // stride < ow):
                        continue
                    out[:, hi, wi, i, j] = dy[:, h // stride, w_ // stride]
    return out.reshape(n * size[0] * size[1], -1)


PADDING_CASES = {  # k = 9 x 16 = 144 < 256: one running sum in k order; taps of 16 channels, k tiles of 8 or 16
    # Images 130 pixels wide: a 128-row tile lies in one image row, whose top or bottom taps read only padding. The
    # forward on 128 x 128 tiles (72 outputs), the input gradient on 128 x 128 tiles (72 inputs).
    "forward": (2, 16, 3, 130, 72, 1, False),
    "forward, an inf in the first tap": (2, 16, 3, 130, 72, 1, True),
    "input gradient": (2, 72, 3, 130, 16, 1, False),
    "input gradient, an inf in the first tap": (2, 72, 3, 130, 16, 1, True),
    "input gradient by phases": (2, 72, 5, 260, 16, 2, False),  # phases of 130 pixels a row
}


@pytest.mark.parametrize("case", sorted(PADDING_CASES))
def test_padding_products_are_in_the_sums(modes, case):
    """The padding of a SAME conv is +0 operands whose products are added like any other: the forward's and the input
    gradient's outputs are every product of the explicit im2col (or gather of dy) added in k order, bit for bit, on
    tiles that read nothing but padding too. An inf weight puts its tiles on the generic path, where the padding's
    0 x inf is a NaN the sum must keep (rule 1 of the definitions); its payload is left open (the next tile's fast FADD
    gives the GPU's 0x7FFFFFFF: NaN payloads in sums are not defined). Whoever skips the padding's products must keep
    these bits (the kernels that do: test_padding_tiles_skipped_keep_their_bits)."""
    n, c, h, w_, o, stride, with_inf = PADDING_CASES[case]
    rng = np.random.default_rng(len(case))
    x = rng.standard_normal((n, h, w_, c)).astype(np.float32)
    w = rng.standard_normal((3, 3, c, o)).astype(np.float32)  # HWIO
    if with_inf:
        w[0, 0, 0, 0] = np.inf
    pads = torch_ops.conv_padding("same", (h, w_), (3, 3), [stride] * 2, [1, 1])
    wt = gpu(w).permute(3, 2, 0, 1).contiguous()
    for mode in modes:
        if case.startswith("forward"):
            out = torch_ops.conv2d(gpu(x).permute(0, 3, 1, 2), wt, stride=stride, padding="same", multiplier=mode)
            out = out.permute(0, 2, 3, 1).cpu().numpy().reshape(-1, o)
            expected = sums_in_k_order(_explicit_im2col(x, 3, 3, stride, pads), w.reshape(-1, o), mode)
        else:
            oh, ow = -(-h // stride), -(-w_ // stride)
            dy = rng.standard_normal((n, oh, ow, o)).astype(np.float32)
            attr, table = torch_ops.kernel_arguments_for(mode, DEVICE)
            out = torch.ops.amdnn.conv2d_backward_input([n, c, h, w_], wt, gpu(dy).permute(0, 3, 1, 2), table, attr,
                                                        [stride] * 2, pads, [1, 1])
            out = out.permute(0, 2, 3, 1).cpu().numpy().reshape(-1, c)
            a = _explicit_dy_gather(dy, (h, w_), 3, 3, stride, pads)
            expected = sums_in_k_order(a, w.transpose(0, 1, 3, 2).reshape(-1, c), mode)
        assert np.isnan(expected).any() == with_inf, f"{case}: the inf must meet the padding"
        same = _same_bits(out, expected, nan_payloads=False)
        assert same.all(), (f"{mode} {case}: {int((~same).sum())} of {same.size} sums differ from the products added "
                            f"in k order, first at {tuple(np.argwhere(~same)[0])}")


@pytest.mark.parametrize("with_inf", [False, True], ids=["finite", "with infs"])
def test_padding_tiles_skipped_keep_their_bits(modes, with_inf):
    """The benchmark's 4 x 4 conv of 512 -> 512 channels at batch 128 (31 % of its products read padding) skips the k
    tiles that read only padding (ops/cc/gemm_cuda_padding.cuh): the forward and the input gradient with their rows
    pixel-major, one pixel a 128-row tile; the filter gradient with its k pixel-major, one pixel a k tile. The same
    values misaligned take the single-load kernels, which skip nothing, with the same k slices and k order: every
    output must agree bit for bit. An inf weight in the corner tap (which reads padding at 7 of the 16 pixels) and an
    inf in dy at a corner pixel put their tiles on the generic path, where 0 x inf makes NaNs that the skipping kernels
    must keep too (their payloads left open, as in test_padding_products_are_in_the_sums)."""
    torch.manual_seed(16)
    x = torch.randn(128, 512, 4, 4, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(512, 512, 3, 3, device=DEVICE) / 48
    dy = torch.randn(128, 512, 4, 4, device=DEVICE).to(memory_format=torch.channels_last)
    if with_inf:
        w[0, 0, 0, 0] = torch.inf  # OIHW: output 0, input 0, tap (0, 0)
        dy[0, 0, 0, 0] = torch.inf  # image 0, channel 0, pixel (0, 0)
    pads = [1, 1, 1, 1]
    for mode in modes:
        attr, table = torch_ops.kernel_arguments_for(mode, DEVICE)
        results = []
        for xi, dyi in ((x, dy), (_misaligned(x), _misaligned(dy))):
            y = torch_ops.conv2d(xi, w, padding=1, multiplier=mode)
            dx = torch.ops.amdnn.conv2d_backward_input([128, 512, 4, 4], w, dyi, table, attr, [1, 1], pads, [1, 1])
            dw = torch.ops.amdnn.conv2d_backward_filter(xi, [512, 512, 3, 3], dyi, table, attr, [1, 1], pads, [1, 1])
            results.append([t.cpu().numpy() for t in (y, dx, dw)])
        for name, skipping, whole in zip(("forward", "input gradient", "filter gradient"), *results):
            assert np.isnan(whole).any() == with_inf, f"{mode} {name}: the inf must meet the padding"
            same = _same_bits(skipping, whole, nan_payloads=not with_inf)
            assert same.all(), (f"{mode} {name}: {int((~same).sum())} of {same.size} outputs differ between the "
                                f"kernels with 16-byte and single loads, first at {tuple(np.argwhere(~same)[0])}")


RESNET_SHAPES = [(32, 64, 64, 1), (32, 64, 128, 2), (16, 128, 128, 1), (16, 128, 256, 2), (8, 256, 256, 1),
                 (8, 256, 512, 2), (4, 512, 512, 1)]


@pytest.mark.parametrize("size,cin,cout,stride,batch",
                         [shape + (16,) for shape in RESNET_SHAPES] + [(4, 512, 512, 1, 128)])
def test_acc32_matches_cudnn(size, cin, cout, stride, batch):
    """acc32 is fp32 arithmetic: forward and both gradients within 1e-5 of cuDNN fp32 (TF32 off); the last shape at
    the benchmark's batch of 128 too, k cut into slices (at batch 128 the first shapes' filter gradients sum 131,072
    products each and differ from cuDNN's by ~2e-5)."""
    torch.manual_seed(size * cin)
    x = torch.randn(batch, cin, size, size, device=DEVICE).to(memory_format=torch.channels_last).requires_grad_()
    w = (torch.randn(cout, cin, 3, 3, device=DEVICE) / (3 * cin**0.5)).requires_grad_()
    ours = torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier="acc32")
    native = torch.nn.functional.conv2d(x, w, stride=stride, padding=1)
    dy = torch.randn_like(native)
    gx, gw = torch.autograd.grad(ours, (x, w), dy)
    nx, nw = torch.autograd.grad(native, (x, w), dy)
    for what, a, b in (("forward", ours, native), ("dx", gx, nx), ("dw", gw, nw)):
        err = (torch.linalg.vector_norm(a.double() - b.double()) / torch.linalg.vector_norm(b.double())).item()
        assert err <= 1e-5, f"{what}: relative error {err:.2e} against cuDNN"


# ------------------------------------------------------------------------------------------------ properties


def test_deterministic_and_zero_size(modes):
    torch.manual_seed(0)
    x = torch.randn(8, 64, 16, 16, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device=DEVICE, requires_grad=True)
    for mode in modes[:3] + modes[-1:]:
        runs = []
        for _ in range(2):
            xi = x.clone().requires_grad_()
            y = torch_ops.conv2d(xi, w, padding=1, multiplier=mode)
            gx, gw = torch.autograd.grad(y.square().sum(), (xi, w))
            runs.append([t.detach().cpu().numpy().view(np.uint32) for t in (y, gx, gw)])
        for first, second in zip(*runs):
            assert np.array_equal(first, second), f"{mode}: two runs gave different bits"
    empty = torch_ops.conv2d(torch.zeros(0, 3, 8, 8, device=DEVICE), torch.ones(4, 3, 3, 3, device=DEVICE),
                             padding=1, multiplier="am16")
    assert empty.shape == (0, 4, 8, 8)
    inner0 = torch_ops.matmul(torch.ones(3, 0, device=DEVICE), torch.ones(0, 5, device=DEVICE), multiplier="am16")
    assert inner0.shape == (3, 5) and bool((inner0 == 0).all())
    # no output rows with a long k (576, 300: GEMMs that would be cut into k slices): nothing to launch, and the
    # workspace sizing must not divide by the empty grid's zero tiles (a SIGFPE before 2026-11-25)
    x0 = torch.zeros(0, 64, 8, 8, device=DEVICE).to(memory_format=torch.channels_last).requires_grad_()
    w0 = torch.ones(64, 64, 3, 3, device=DEVICE, requires_grad=True)
    y0 = torch_ops.conv2d(x0, w0, padding=1, multiplier="am16")
    gx0, gw0 = torch.autograd.grad(y0.sum(), (x0, w0))
    assert y0.shape == (0, 64, 8, 8) and gx0.shape == x0.shape and bool((gw0 == 0).all())
    rows0 = torch_ops.matmul(torch.ones(0, 300, device=DEVICE), torch.ones(300, 5, device=DEVICE), multiplier="am16")
    assert rows0.shape == (0, 5)


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values at an address 4 bytes past a 16-byte boundary, in t's memory format (channels_last for 4-D):
    the kernels then cannot read it four floats at a time and take their single-load variant."""
    if t.dim() == 4:
        nhwc = t.permute(0, 2, 3, 1)
        buf = torch.empty(t.numel() + 1, device=t.device)
        out = buf[1:].view(nhwc.shape).copy_(nhwc).permute(0, 3, 1, 2)
    else:
        buf = torch.empty(t.numel() + 1, device=t.device)
        out = buf[1:].view(t.shape).copy_(t)
    assert out.data_ptr() % 16 == 4 and torch.equal(out, t)
    return out


# (64, 16, 32, 1) and (128, 16, 32, 2): 16,384 output rows (forward) and input-gradient phase rows, where lut and
# am16 take 256 x 64 tiles; (12, 64, 64, 1): 576 rows in every pass (4 x 12 x 12 pixels, 9 x 64 taps), where lut
# takes 192 x 64 tiles
@pytest.mark.parametrize("size,cin,cout,stride", [(8, 64, 128, 1), (8, 64, 128, 2), (6, 128, 64, 1), (64, 16, 32, 1),
                                                  (128, 16, 32, 2), (12, 64, 64, 1), (12, 64, 128, 1)])
def test_sixteen_byte_loads_give_the_bits_of_single_loads(modes, size, cin, cout, stride):
    """Channel counts that are multiples of 4 at aligned addresses take the kernels with 16-byte loads; the same
    values misaligned take the single-load kernels (checked product by product above). Forward and both gradients
    must agree bit for bit: the slicing of k follows the shapes alone, and loading must not change a product."""
    torch.manual_seed(size + cin + stride)
    x = torch.randn(4, cin, size, size, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(cout, cin, 3, 3, device=DEVICE) * 0.1
    x[0, 0, 0, 0] = 0.0  # zeros take their own decode
    for mode in modes:
        results = []
        for xi in (x, _misaligned(x)):
            xi = xi.detach().requires_grad_()
            wi = w.clone().requires_grad_()
            y = torch_ops.conv2d(xi, wi, stride=stride, padding=1, multiplier=mode)
            dy = torch.randn(y.shape, device=DEVICE, generator=torch.Generator(DEVICE).manual_seed(7))
            dy = dy.to(memory_format=torch.channels_last)
            dy = dy if xi.data_ptr() % 16 == 0 else _misaligned(dy)
            gx, gw = torch.autograd.grad(y, (xi, wi), dy)
            results.append([t.detach().cpu().numpy() for t in (y, gx, gw)])
        for name, aligned, single in zip(("forward", "input gradient", "filter gradient"), *results):
            ok = same_bits(aligned, single)
            assert ok.all(), f"{mode} {name}: {int((~ok).sum())} elements differ between 16-byte and single loads"
    a = torch.randn(96, 200, device=DEVICE)
    b = torch.randn(200, 132, device=DEVICE)
    for mode in modes:
        aligned = torch_ops.matmul(a, b, multiplier=mode).cpu().numpy()
        single = torch_ops.matmul(_misaligned(a), b, multiplier=mode).cpu().numpy()
        assert same_bits(aligned, single).all(), f"{mode} matmul: 16-byte and single loads differ"


def test_input_gradient_phases_side_by_side_keep_their_bits(modes):
    """A strided input gradient's phases run side by side on the library's side streams, forked from the caller's
    stream and joined back into it (gemm_cuda_streams.h); on a stream being captured into a CUDA graph they run one
    after the other. Both must give the same bits, on any caller's stream and from two host threads at once, and the
    caller's stream must see the whole result (dx is read on it right after the call)."""
    import threading

    torch.manual_seed(3)
    cases = [((4, 32, 17, 17), (48, 32, 3, 3), 2), ((2, 16, 20, 20), (24, 16, 3, 3), 3)]  # 4 and 9 phases
    for mode in modes[:1] + modes[-1:]:
        attr, table = torch_ops.kernel_arguments_for(mode, DEVICE)
        for xshape, wshape, stride in cases:
            w = torch.randn(wshape, device=DEVICE) * 0.1
            out = (xshape[2] + 2 - 3) // stride + 1
            dy = torch.randn(xshape[0], wshape[0], out, out, device=DEVICE).to(memory_format=torch.channels_last)
            dy[0, 0] = 0.0  # zeros take their own decode

            def dx():
                return torch.ops.amdnn.conv2d_backward_input(list(xshape), w, dy, table, attr, [stride] * 2,
                                                             [1, 1, 1, 1], [1, 1])

            side_by_side = dx().cpu().numpy()
            assert np.abs(side_by_side).sum() > 0, f"{mode}: an all-zero input gradient"
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                dx()  # warm-up off the default stream, as torch asks before a capture
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    captured = dx()
            graph.replay()
            torch.cuda.synchronize()
            assert same_bits(captured.cpu().numpy(), side_by_side).all(), f"{mode} stride {stride}: graph replay"
            with torch.cuda.stream(stream):
                on_stream = (dx() * 1.0).cpu().numpy()  # read on the caller's stream right after the call
            assert same_bits(on_stream, side_by_side).all(), f"{mode} stride {stride}: a caller's own stream"
            results, errors = [], []

            def worker():
                try:
                    with torch.cuda.stream(torch.cuda.Stream()):
                        for _ in range(3):
                            results.append(dx().cpu().numpy())
                except Exception as error:  # noqa: BLE001 - reported below
                    errors.append(error)

            threads = [threading.Thread(target=worker) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors and len(results) == 6, errors
            for r in results:
                assert same_bits(r, side_by_side).all(), f"{mode} stride {stride}: two host threads at once"


def test_filter_gradient_beside_the_input_gradient_keeps_its_bits(modes):
    """With both gradients asked for, the autograd formula runs the filter gradient on a side stream beside the input
    gradient (ops.torch_ops._conv2d_backward; the table modes on layers of <= 64 output channels, as here); alone, each
    runs on the caller's stream. The same bits either way, and the side stream's dw is complete when the caller's
    stream reads it."""
    torch.manual_seed(5)
    x = torch.randn(8, 32, 16, 16, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(64, 32, 3, 3, device=DEVICE) * 0.1
    dy = torch.randn(8, 64, 8, 8, device=DEVICE).to(memory_format=torch.channels_last)
    for mode in modes[:1] + modes[-1:]:
        def grads(need_x: bool, need_w: bool):
            xi, wi = x.clone().requires_grad_(need_x), w.clone().requires_grad_(need_w)
            wanted = [t for t in (xi, wi) if t.requires_grad]
            y = torch_ops.conv2d(xi, wi, stride=2, padding=1, multiplier=mode)
            return [(g * 1.0).cpu().numpy() for g in torch.autograd.grad(y, wanted, dy)]

        both_dx, both_dw = grads(True, True)
        (alone_dx,), (alone_dw,) = grads(True, False), grads(False, True)
        assert np.abs(both_dw).sum() > 0 and np.abs(both_dx).sum() > 0, mode
        assert same_bits(both_dx, alone_dx).all(), f"{mode}: input gradient beside the filter gradient"
        assert same_bits(both_dw, alone_dw).all(), f"{mode}: filter gradient on the side stream"


def test_fast_path_on_ordinary_data_generic_on_inf():
    x = torch.randn(64, 32, device=DEVICE)
    w = torch.randn(32, 48, device=DEVICE)
    fast0, generic0 = torch_ops.gpu_path_counts()
    torch_ops.matmul(x, w, multiplier="am16")
    fast1, generic1 = torch_ops.gpu_path_counts()
    assert fast1 > fast0 and generic1 == generic0, "ordinary data must take the fast path only"
    x[0, 0] = float("inf")
    out = torch_ops.matmul(x, w, multiplier="am16")
    fast2, generic2 = torch_ops.gpu_path_counts()
    assert generic2 > generic1
    assert torch.isinf(out[0]).any() or torch.isnan(out[0]).any()


def test_gradients_flow_through_the_multiplier_or_exactly():
    torch.manual_seed(1)
    x = torch.randn(4, 8, 10, 10, device=DEVICE, requires_grad=True)
    w = torch.randn(16, 8, 3, 3, device=DEVICE, requires_grad=True)
    y = torch_ops.conv2d(x, w, padding="same", multiplier="am16", exact_gradients=True)
    gx, gw = torch.autograd.grad(y.sum(), (x, w))
    yn = torch.nn.functional.conv2d(x, w, padding="same")
    nx, nw = torch.autograd.grad(yn.sum(), (x, w))
    assert torch.allclose(gx, nx, rtol=1e-5, atol=1e-5) and torch.allclose(gw, nw, rtol=1e-4, atol=1e-4)
    y = torch_ops.conv2d(x, w, padding="same", multiplier="am16")
    ax, aw = torch.autograd.grad(y.sum(), (x, w))
    assert not torch.equal(ax, nx)  # through the multiplier: not the exact gradient
    assert (ax - nx).norm() / nx.norm() < 0.1


def test_opcheck_and_compile():
    x = torch.randn(2, 4, 6, 6, device=DEVICE, requires_grad=True)
    w = torch.randn(5, 4, 3, 3, device=DEVICE, requires_grad=True)
    attr, table = torch_ops.kernel_arguments_for("am16", DEVICE)
    torch.library.opcheck(torch.ops.amdnn.conv2d.default, (x, w, table, attr, [1, 1], [1, 1, 1, 1], [1, 1], False))
    a = torch.randn(5, 7, device=DEVICE, requires_grad=True)
    b = torch.randn(7, 3, device=DEVICE, requires_grad=True)
    torch.library.opcheck(torch.ops.amdnn.matmul.default, (a, b, table, attr, False))
    compiled = torch.compile(lambda u, v: torch_ops.conv2d(u, v, padding=1, multiplier="am16").relu(), fullgraph=True)
    assert torch.equal(compiled(x, w), torch_ops.conv2d(x, w, padding=1, multiplier="am16").relu())


def test_bad_input_errors():
    x = torch.randn(2, 4, 6, 6, device=DEVICE)
    with pytest.raises(ValueError, match="different|device"):
        torch_ops.conv2d(x, torch.randn(5, 4, 3, 3), multiplier="am16")
    with pytest.raises(TypeError, match="floating-point"):
        torch_ops.conv2d(x.int(), torch.randn(5, 4, 3, 3, device=DEVICE).int(), multiplier="am16")
    with pytest.raises(ValueError, match="input channels 4 differ"):
        torch_ops.conv2d(x, torch.randn(5, 3, 3, 3, device=DEVICE), multiplier="am16")
    with pytest.raises(ValueError, match="unknown multiplier"):
        torch_ops.matmul(torch.randn(2, 3, device=DEVICE), torch.randn(3, 2, device=DEVICE), multiplier="am8")
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        torch_ops.conv2d(torch.randn(1, 4, 2, 2, device=DEVICE), torch.randn(5, 4, 3, 3, device=DEVICE),
                         multiplier="am16")


def test_raw_op_errors_raise_in_python():
    """The C++ checks of the raw ops raise RuntimeError with the reason (run in a child: a crash must not take the
    suite with it). A binding built by a toolchain whose C++ exceptions cannot unwind into torch fails here: on the GPU
    machines, whose environment sets CXX=/opt/gcc/bin/g++ (a wrapper of a relocated GCC 13.3 with its own start files
    and libgcc), even a five-line extension's TORCH_CHECK ended the process with SIGSEGV; built by /usr/bin/g++ (the
    same GCC 13.3 from Ubuntu) it raises (H200, torch 2.11, 2026-11-29). tests/device/run_on_gpu.sh says so."""
    from ops.build.torch_library import load
    from ops.selftest_frameworks import torch_errors_reach_python  # the self-test's probe: the same refused call

    failure = torch_errors_reach_python("cuda", load().compiler)
    assert failure is None, failure
