"""The ops for PyTorch users, in torch's conventions: every product of a conv2d or matmul through a simulated multiplier.

    from ops import torch_ops
    y = torch_ops.conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, multiplier="am16")  # NCHW, OIHW
    c = torch_ops.matmul(a, b, multiplier="am32", exact_gradients=False)

Importing this module builds (on first use) and loads the binding (ops/build/torch_library.py), which registers
torch.ops.amdnn.conv2d, conv2d_backward_input, conv2d_backward_filter, matmul and products, with CPU and CUDA
kernels; here they get their fake kernels (torch.compile, opcheck) and autograd: both gradients through the
multiplier (dx = dy (*) w^T, dw = x^T (*) dy, the left operand first), or torch's exact ones with
exact_gradients=True. Tensors of any float dtype are computed in fp32 (the simulated datapath) and cast back.
channels_last inputs are read without a copy, and image outputs are channels_last.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F

from ops.build.torch_library import load
from ops.modes.arguments import canonical_table_bytes, kernel_arguments

BUILD = load()


# ------------------------------------------------------------------------------------------------ tables


# (mode name, device) -> the table tensor the ops take there. A plain dict rather than lru_cache, so that
# torch.compile traces the lookup instead of warning about the cache wrapper.
_TABLES: dict[tuple[str, str], tuple[str, torch.Tensor]] = {}


def kernel_arguments_for(multiplier, device: torch.device) -> tuple[str, torch.Tensor]:
    """(mode name, table tensor on `device`) for the ops: the CUDA kernels read the canonical 128 x 128 table, the
    CPU kernels the table's own 4**m bytes (they validate and expand it)."""
    name = multiplier if isinstance(multiplier, str) else multiplier.name
    key = (name, str(device))
    if key not in _TABLES:
        attr, raw = kernel_arguments(multiplier)
        table = canonical_table_bytes(multiplier) if device.type == "cuda" else raw
        _TABLES[key] = attr, torch.from_numpy(np.array(table)).to(device)
    return _TABLES[key]


# ------------------------------------------------------------------------------------------------ geometry


def conv_output_size(size: int, kernel: int, stride: int, before: int, after: int, dilation: int) -> int:
    return (size + before + after - ((kernel - 1) * dilation + 1)) // stride + 1


@torch.library.register_fake("amdnn::conv2d")
def _conv2d_fake(x, w, table, multiplier, stride, padding, dilation, exact_gradients=False):
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho = conv_output_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    wo = conv_output_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
    return x.new_empty((n, ho, wo, o)).permute(0, 3, 1, 2)


@torch.library.register_fake("amdnn::conv2d_backward_input")
def _conv2d_backward_input_fake(input_size, w, grad_output, table, multiplier, stride, padding, dilation):
    n, c, h, wd = input_size
    return grad_output.new_empty((n, h, wd, c)).permute(0, 3, 1, 2)


@torch.library.register_fake("amdnn::conv2d_backward_filter")
def _conv2d_backward_filter_fake(x, weight_size, grad_output, table, multiplier, stride, padding, dilation):
    return x.new_empty(tuple(weight_size))


@torch.library.register_fake("amdnn::matmul")
def _matmul_fake(a, b, table, multiplier, exact_gradients=False):
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("amdnn::products")
def _products_fake(a, b, table, multiplier):
    return torch.empty_like(a)


# ------------------------------------------------------------------------------------------------ autograd


def _conv2d_setup(ctx, inputs, output):
    x, w, table, multiplier, stride, padding, dilation, exact_gradients = inputs
    ctx.save_for_backward(x, w, table)
    ctx.args = (multiplier, list(stride), list(padding), list(dilation))
    ctx.exact = exact_gradients


def _conv2d_backward(ctx, grad):
    x, w, table = ctx.saved_tensors
    multiplier, stride, padding, dilation = ctx.args
    dx = dw = None
    if ctx.exact:
        # torch's exact gradients, with any (also asymmetric) padding applied explicitly
        top, bottom, left, right = padding
        xp = F.pad(x, (left, right, top, bottom))
        if ctx.needs_input_grad[0]:
            dxp = torch.nn.grad.conv2d_input(xp.shape, w, grad, stride, 0, dilation)
            dx = dxp[:, :, top:top + x.shape[2], left:left + x.shape[3]]
        if ctx.needs_input_grad[1]:
            dw = torch.nn.grad.conv2d_weight(xp, w.shape, grad, stride, 0, dilation)
        return dx, dw, None, None, None, None, None, None
    args = (table, multiplier, stride, padding, dilation)
    side = _side_stream(grad, multiplier) if ctx.needs_input_grad[0] and ctx.needs_input_grad[1] else None
    if side is not None:
        # dw on a side stream beside dx: their GEMMs then share the GPU's waves instead of each draining it alone.
        # dx's kernels are queued first: the layer before needs dx next, dw waits for the optimizer.
        main = torch.cuda.current_stream(grad.device)
        side.wait_stream(main)
    if ctx.needs_input_grad[0]:
        dx = torch.ops.amdnn.conv2d_backward_input(list(x.shape), w, grad, *args)
    if ctx.needs_input_grad[1]:
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            dw = torch.ops.amdnn.conv2d_backward_filter(x, list(w.shape), grad, *args)
    if side is not None:
        main.wait_stream(side)
        dw.record_stream(main)  # made on the side stream, used on the caller's: not reused before the caller is done
    return dx, dw, None, None, None, None, None, None


# (device index) -> the side stream of the filter gradient (_conv2d_backward)
_SIDE_STREAMS: dict[int, torch.cuda.Stream] = {}
# The CUDA core's narrow tiles take GEMMs of at most this many output columns (narrow() in gemm_cuda_kernel.cuh): a
# filter gradient's columns are the layer's output channels.
_NARROW_CHANNELS = 64


def _side_stream(grad: torch.Tensor, multiplier: str):
    """The side stream for the filter gradient, or None where one would not help or is not allowed: CPU tensors,
    traced or captured code (torch.compile, opcheck's functional tensors, CUDA graphs), and the table modes' layers of
    more than 64 output channels. The bits are the same either way: each gradient's kernels write only their own
    output and workspace.
    Measured on the benchmark's seven shapes (H100, fwd+bwd, the same bits): acc32 8.03 -> 7.83 ms,
    am16 16.55 -> 16.15, mit16 9.97 -> 9.73, but lut 17.75 -> 17.99: its 16/128/128 and 16/128/256/2 shapes took
    8 % and 13 % longer side by side (not understood; both gradients there run 128 x 128 tiles of 118 KB of shared
    memory, one block per SM). lut's first stage (64 output channels: the filter gradient on 192 x 64 tiles, two
    blocks an SM, the input gradient on 256 x 64) gains: 3.16-3.19 -> 3.10-3.12 ms in three pairs of runs (H100),
    so lut's gradients run side by side there alone."""
    if multiplier == "table" and grad.shape[1] > _NARROW_CHANNELS:
        return None
    if type(grad) is not torch.Tensor or not grad.is_cuda:
        return None
    traced = torch.compiler.is_compiling() or torch._is_functional_tensor(grad)
    if traced or torch.cuda.is_current_stream_capturing():
        return None
    index = grad.device.index if grad.device.index is not None else torch.cuda.current_device()
    if index not in _SIDE_STREAMS:
        _SIDE_STREAMS[index] = torch.cuda.Stream(device=index)
    return _SIDE_STREAMS[index]


def _matmul_setup(ctx, inputs, output):
    a, b, table, multiplier, exact_gradients = inputs
    ctx.save_for_backward(a, b, table)
    ctx.multiplier = multiplier
    ctx.exact = exact_gradients


def _matmul_backward(ctx, grad):
    a, b, table = ctx.saved_tensors
    da = db = None
    if ctx.exact:
        if ctx.needs_input_grad[0]:
            da = grad @ b.t()
        if ctx.needs_input_grad[1]:
            db = a.t() @ grad
    else:  # da = dc (*) b^T, db = a^T (*) dc: transposed views are read without a copy
        if ctx.needs_input_grad[0]:
            da = torch.ops.amdnn.matmul(grad, b.t(), table, ctx.multiplier)
        if ctx.needs_input_grad[1]:
            db = torch.ops.amdnn.matmul(a.t(), grad, table, ctx.multiplier)
    return da, db, None, None, None


torch.library.register_autograd("amdnn::conv2d", _conv2d_backward, setup_context=_conv2d_setup)
torch.library.register_autograd("amdnn::matmul", _matmul_backward, setup_context=_matmul_setup)


# ------------------------------------------------------------------------------------------------ the user API


def _pair(value, what: str) -> list[int]:
    values = [int(v) for v in value] if isinstance(value, (tuple, list)) else [int(value)] * 2
    if len(values) != 2 or min(values) < 0:
        raise ValueError(f"{what} must be a non-negative int or a pair (h, w); got {value!r}")
    return values


def conv_padding(padding, size: tuple[int, int], kernel: tuple[int, int], stride: list[int],
                 dilation: list[int]) -> list[int]:
    """[top, bottom, left, right] from torch's padding (int, pair, 'valid', 'same'). 'same' follows TensorFlow's
    rule (output = ceil(size / stride), the odd pixel after), which for stride 1 is torch's own."""
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return [0, 0, 0, 0]
        if mode != "same":
            raise ValueError(f"padding must be an int, a pair, 'same' or 'valid'; got {padding!r}")
        out = []
        for axis in range(2):
            effective = (kernel[axis] - 1) * dilation[axis] + 1
            total = max((-(-size[axis] // stride[axis]) - 1) * stride[axis] + effective - size[axis], 0)
            out += [total // 2, total - total // 2]
        return out
    ph, pw = _pair(padding, "padding")
    return [ph, ph, pw, pw]


def _as_float32(t: torch.Tensor, what: str, op: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"{op}: {what} must be a floating-point torch.Tensor (the simulated datapath is fp32), got "
                        f"{getattr(t, 'dtype', type(t).__name__)}")
    return t if t.dtype == torch.float32 else t.float()


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, multiplier="am16", exact_gradients=False):
    """Like torch.nn.functional.conv2d (NCHW input, OIHW weight, no groups), every product through the multiplier."""
    x = _as_float32(input, "input", "conv2d")
    w = _as_float32(weight, "weight", "conv2d")
    if x.dim() != 4 or w.dim() != 4:
        raise ValueError(f"conv2d: input must be [N, C, H, W] and weight [O, I, kh, kw]; got {tuple(x.shape)} and "
                         f"{tuple(w.shape)}")
    if x.device != w.device:
        raise ValueError(f"conv2d: input is on {x.device} and weight on {w.device}; put both on one device")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv2d: input channels {x.shape[1]} differ from weight input channels {w.shape[1]} "
                         f"(input {tuple(x.shape)}, weight {tuple(w.shape)}; groups are not supported)")
    stride_pair = _pair(stride, "stride")
    if min(stride_pair) < 1:
        raise ValueError(f"conv2d: stride must be positive, got {stride!r}")
    dilation_pair = _pair(dilation, "dilation")
    if min(dilation_pair) < 1:
        raise ValueError(f"conv2d: dilation must be positive, got {dilation!r}")
    pads = conv_padding(padding, (x.shape[2], x.shape[3]), (w.shape[2], w.shape[3]), stride_pair, dilation_pair)
    for axis, (before, after) in enumerate((pads[:2], pads[2:])):
        if conv_output_size(x.shape[2 + axis], w.shape[2 + axis], stride_pair[axis], before, after,
                            dilation_pair[axis]) < 1:
            raise ValueError(f"conv2d: the padded input {tuple(x.shape)} (padding {pads}) is smaller than the "
                             f"dilated kernel of weight {tuple(w.shape)} (dilation {dilation_pair})")
    attr, table = kernel_arguments_for(multiplier, x.device)
    y = torch.ops.amdnn.conv2d(x, w, table, attr, stride_pair, pads, dilation_pair, bool(exact_gradients))
    if bias is not None:
        y = y + bias.to(y.dtype).view(1, -1, 1, 1)
    return y if input.dtype == torch.float32 else y.to(input.dtype)


def matmul(a, b, multiplier="am16", exact_gradients=False):
    """a [..., K] x b [K, N] -> [..., N], every product through the multiplier (a the left operand of each)."""
    a32 = _as_float32(a, "a", "matmul")
    b32 = _as_float32(b, "b", "matmul")
    if b32.dim() != 2 or a32.dim() < 1 or a32.shape[-1] != b32.shape[0]:
        raise ValueError(f"matmul: needs a [..., K] and b [K, N]; got {tuple(a32.shape)} and {tuple(b32.shape)}")
    if a32.device != b32.device:
        raise ValueError(f"matmul: a is on {a32.device} and b on {b32.device}; put both on one device")
    attr, table = kernel_arguments_for(multiplier, a32.device)
    flat = a32.reshape(math.prod(a32.shape[:-1]), a32.shape[-1])
    c = torch.ops.amdnn.matmul(flat, b32, table, attr, bool(exact_gradients)).reshape(*a32.shape[:-1], b32.shape[1])
    return c if a.dtype == torch.float32 else c.to(a.dtype)


def products(a, b, multiplier) -> torch.Tensor:
    """Elementwise single products a (*) b by the scalar definitions on the CPU (the reference the GPU is checked
    against)."""
    attr, table = kernel_arguments_for(multiplier, torch.device("cpu"))
    return torch.ops.amdnn.products(a.float().cpu(), b.float().cpu(), table, attr)


def cpu_path_counts() -> dict[str, int]:
    """GEMM calls and products of the CPU kernels in this process by path (fast_calls, generic_calls, fast_products,
    generic_products), as ops.path_counts() gives the TensorFlow library's."""
    values = torch.ops.amdnn.cpu_path_counts()
    return dict(zip(("fast_calls", "generic_calls", "fast_products", "generic_products"), map(int, values)))


def gpu_path_counts() -> tuple[int, int]:
    """(fast, generic) k-tile steps run by the CUDA kernels in this process (synchronises the GPU)."""
    fast, generic = torch.ops.amdnn.gpu_path_counts()
    return int(fast), int(generic)


# ------------------------------------------------------------------------------------------------ integer modes


@torch.library.register_fake("amdnn::int_conv2d")
def _int_conv2d_fake(x, w, table, zero_a, zero_w, rescale, signed_codes, stride, padding, dilation):
    n, h, wd, _ = x.shape
    kh, kw, _, o = w.shape
    out_h = conv_output_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    out_w = conv_output_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
    return x.new_empty((n, out_h, out_w, o), dtype=torch.float32)


def int_conv2d_codes(x_codes, w_codes, table, zero_a, zero_w, rescale, signed_codes, stride=1, padding="same",
                     dilation=1) -> torch.Tensor:
    """The integer modes' forward on codes (ops/cc/integer_conv.h), in TensorFlow's layouts: uint8 NHWC x_codes conv
    uint8 HWIO w_codes -> float32 NHWC; table int32 [65536], zero_a int32 [1], zero_w int32 [O], rescale float32 [O]
    on the codes' device; padding 'same' (TensorFlow's rule) or 'valid'. No autograd: codes have no gradient."""
    stride_pair, dilation_pair = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads = conv_padding(padding, (x_codes.shape[1], x_codes.shape[2]), (w_codes.shape[0], w_codes.shape[1]),
                        stride_pair, dilation_pair)
    return torch.ops.amdnn.int_conv2d(x_codes, w_codes, table, zero_a, zero_w, rescale, bool(signed_codes),
                                      stride_pair, pads, dilation_pair)


def quantise(x, scale, zero, qmin: int, qmax: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The integer modes' quantiser (ops/cc/integer_quantise.h): uint8 codes clamp(rint(x / scale) + zero, qmin, qmax)
    as bytes (zero for a NaN or an infinity) and the bool mask where the clamp did not act; x float32 of any shape,
    scale and zero float32 of 1 value or one per index of x's last axis, on x's device. No autograd."""
    return torch.ops.amdnn.quantise(x, scale, zero, int(qmin), int(qmax))


def finite_range(x, per_channel: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ranges the integer modes' scales come from (ops/cc/integer_quantise.h), in one pass: (lo, hi, finite),
    lo = min(0, smallest finite value), hi = max(0, largest finite value), subnormals counted as zero, finite: no NaN
    or infinity; float32, float32, bool of shape [1], or per_channel [the size of x's last axis], on x's device. No
    autograd."""
    return torch.ops.amdnn.finite_range(x, bool(per_channel))


def conv2d_backward_input(input_size, w, dy, stride=1, padding="same", dilation=1, multiplier="acc32"):
    """dx [N, C, H, W] of conv2d(x, w) (x of `input_size`, NCHW; w OIHW; dy NCHW) through the multiplier."""
    stride_pair, dilation_pair = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads = conv_padding(padding, (input_size[2], input_size[3]), (w.shape[2], w.shape[3]), stride_pair, dilation_pair)
    attr, table = kernel_arguments_for(multiplier, dy.device)
    return torch.ops.amdnn.conv2d_backward_input(list(input_size), w, dy, table, attr, stride_pair, pads,
                                                 dilation_pair)


def conv2d_backward_filter(x, weight_size, dy, stride=1, padding="same", dilation=1, multiplier="acc32"):
    """dw [O, I, kh, kw] of conv2d(x, w) (x NCHW, w of `weight_size`, dy NCHW) through the multiplier."""
    stride_pair, dilation_pair = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads = conv_padding(padding, (x.shape[2], x.shape[3]), (weight_size[2], weight_size[3]), stride_pair,
                        dilation_pair)
    attr, table = kernel_arguments_for(multiplier, dy.device)
    return torch.ops.amdnn.conv2d_backward_filter(x, list(weight_size), dy, table, attr, stride_pair, pads,
                                                  dilation_pair)
