"""The two frameworks `python -m ops.selftest` checks the GPU kernels through: TensorFlow (the custom ops,
ops.tf_binding.api) and PyTorch (the binding, ops.torch_binding.ops). Each offers the same few calls on numpy arrays
in TF's layouts (NHWC, HWIO), on device "cpu" or "gpu", so the checks in ops/selftest.py are written once.

    framework.gpu_name()
    framework.matmul(a, b, mode, device) -> c
    framework.conv_grads(x, w, dy, stride, padding, dilation, mode, device) -> (y, dx, dw)
    framework.matmul_grads(a, b, dc, mode, device) -> (c, da, db)
    framework.conv_step_ms(x, w, stride, mode, repeats) -> median ms of forward + both gradients on the GPU
                                                          (mode "cudnn": the framework's own fp32 convolution)
    framework.errors_reach_python(device) -> None, or why the binding's input checks would end a process
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CUDNN = "cudnn"


def cuda_median_ms(fn, repeats: int, warmup: int = 3, calls: int = 1) -> float:
    """Median over `repeats` spans of fn's GPU time per call in ms (CUDA events on torch's current stream), after
    warm-up: the GPU's time in a training loop, where the host's work for a call (Python, autograd, launches)
    overlaps the kernels of the call before. So each span starts behind one untimed call: its start event is queued
    while the GPU still runs that call, and the host's work for the first timed call is done by then (without it a
    span also counted the GPU's wait for that work, ~0.2-0.3 ms for a conv of the torch binding on the H100's host).
    `calls` back-to-back calls per span average the events' resolution."""
    import torch  # the framework under test only: a node may have one of the two

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()  # untimed: the GPU works on it while the host prepares the first timed call
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


# A raw op call that the binding's C++ checks refuse (TORCH_CHECK: 4 input channels against a filter of 3), run by
# torch_errors_reach_python in a child; "{device}" is "cpu" or "cuda".
ERROR_PROBE = """
import torch
from ops.torch_binding import ops as torch_ops
d = torch.device("{device}")
attr, table = torch_ops.kernel_arguments_for("am16", d)
try:
    torch.ops.amdnn.conv2d(torch.randn(1, 4, 5, 5, device=d), torch.randn(5, 3, 3, 3, device=d), table, attr,
                           [1, 1], [0, 0, 0, 0], [1, 1], False)
    print("no error")
except RuntimeError as error:
    print("raised:", error)
"""
ERROR_PROBE_MESSAGE = "input channels 4 differ"


def torch_errors_reach_python(device: str, compiler: str) -> str | None:
    """None when the binding's C++ input checks raise RuntimeError in Python on `device` ("cpu" or "cuda"), else
    what happened. In a child process: a binding built by a toolchain whose C++ exceptions cannot unwind into torch
    ends the process there instead (found on GPU machines whose CXX was a wrapper of a relocated GCC 13.3: SIGSEGV
    at any TORCH_CHECK, even in a five-line extension; the same GCC from the distribution raises). ops.torch_ops
    checks its inputs in Python first, but a process should not die of a bad tensor."""
    result = subprocess.run([sys.executable, "-c", ERROR_PROBE.format(device=device)],
                            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=600)
    if result.returncode == 0 and "raised:" in result.stdout and ERROR_PROBE_MESSAGE in result.stdout:
        return None
    ended = f"ended by signal {-result.returncode}" if result.returncode < 0 else f"exited {result.returncode}"
    said = (result.stdout.strip() or result.stderr.strip()[-500:]).replace("\n", " ")
    return (f"a refused op call did not raise in Python (the child {ended}: {said!r}): the binding was built by "
            f"{compiler}, whose C++ exceptions may not unwind into torch. Build it with the system's compiler, e.g. "
            "CXX=/usr/bin/g++ python -m ops.build --torch (a new cache entry), and run the self-test again")


class TorchFramework:
    name = "torch"

    def __init__(self):
        import torch  # only when this framework is tested: a node may have TensorFlow alone

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA GPU (torch.cuda.is_available() is False)")
        from ops.torch_binding import ops as torch_ops  # builds the binding on first use; torch runs only

        self.torch, self.ops = torch, torch_ops
        torch.backends.cudnn.allow_tf32 = False  # the reference convolution in fp32, as the simulated datapath
        torch.backends.cuda.matmul.allow_tf32 = False

    def gpu_name(self) -> str:
        return self.torch.cuda.get_device_name()

    def _tensor(self, array, device, grad=False):
        return self.torch.tensor(np.ascontiguousarray(array), device="cuda" if device == "gpu" else "cpu",
                                 requires_grad=grad)

    def matmul(self, a, b, mode, device):
        return self.ops.matmul(self._tensor(a, device), self._tensor(b, device), multiplier=mode).cpu().numpy()

    def conv_grads(self, x, w, dy, stride, padding, dilation, mode, device):
        xt, wt = self._tensor(x, device, True), self._tensor(w, device, True)
        y = self.ops.conv2d(xt.permute(0, 3, 1, 2), wt.permute(3, 2, 0, 1), stride=stride, padding=padding.lower(),
                            dilation=dilation, multiplier=mode)
        y.backward(self._tensor(dy, device).permute(0, 3, 1, 2))
        return (y.permute(0, 2, 3, 1).detach().cpu().numpy(), xt.grad.cpu().numpy(), wt.grad.cpu().numpy())

    def matmul_grads(self, a, b, dc, mode, device):
        at, bt = self._tensor(a, device, True), self._tensor(b, device, True)
        c = self.ops.matmul(at, bt, multiplier=mode)
        c.backward(self._tensor(dc, device))
        return c.detach().cpu().numpy(), at.grad.cpu().numpy(), bt.grad.cpu().numpy()

    def int_conv(self, x, w, table, zero_a, zero_w, rescale, signed, stride, padding, dilation, device):
        t = lambda a: self._tensor(a, device)  # noqa: E731
        return self.ops.int_conv2d_codes(t(x), t(w), t(table), t(np.array([zero_a], np.int32)), t(zero_w),
                                         t(rescale), signed, stride, padding.lower(), dilation).cpu().numpy()

    def quantise(self, x, scale, zero, qmin, qmax, device):
        codes, mask = self.ops.quantise(self._tensor(x, device), self._tensor(scale, device),
                                        self._tensor(zero, device), qmin, qmax)
        return codes.cpu().numpy(), mask.cpu().numpy()

    def finite_range(self, x, per_channel, device):
        return tuple(t.cpu().numpy() for t in self.ops.finite_range(self._tensor(x, device), per_channel))

    def errors_reach_python(self, device):
        from ops.build.torch_library import load  # loaded already: the build's record

        return torch_errors_reach_python("cuda" if device == "gpu" else "cpu", load().compiler)

    def conv_step_ms(self, x, w, stride, mode, repeats):
        torch = self.torch
        xt = self._tensor(x, "gpu").permute(0, 3, 1, 2).requires_grad_()
        wt = self._tensor(w, "gpu").permute(3, 2, 0, 1).contiguous().requires_grad_()
        if mode == CUDNN:
            xt = xt.contiguous(memory_format=torch.channels_last).detach().requires_grad_()

        def step():
            if mode == CUDNN:
                y = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=w.shape[0] // 2)
            else:
                y = self.ops.conv2d(xt, wt, stride=stride, padding=w.shape[0] // 2, multiplier=mode)
            y.backward(torch.ones_like(y))

        return cuda_median_ms(step, repeats)


class TensorFlowFramework:
    name = "tensorflow"

    def __init__(self):
        import tensorflow as tf  # only when this framework is tested: a node may have torch alone

        from ops.tf_binding import api  # TensorFlow runs only: a torch self-test loads no TensorFlow

        self.tf, self.api = tf, api
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise RuntimeError("TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty)")
        tf.config.experimental.enable_tensor_float_32_execution(False)  # the reference convolution in fp32
        self.gpu = gpus[0]

    def gpu_name(self) -> str:
        return self.tf.config.experimental.get_device_details(self.gpu).get("device_name", self.gpu.name)

    def _device(self, device):
        return self.tf.device("/GPU:0" if device == "gpu" else "/CPU:0")

    def matmul(self, a, b, mode, device):
        with self._device(device):
            return self.api.matmul(self.tf.constant(a), self.tf.constant(b), multiplier=mode).numpy()

    def _grads(self, forward, inputs, seed, device):
        tf = self.tf
        with self._device(device):
            tensors = [tf.constant(value) for value in inputs]
            with tf.GradientTape() as tape:
                for tensor in tensors:
                    tape.watch(tensor)
                out = forward(*tensors)
            grads = tape.gradient(out, tensors, output_gradients=tf.constant(seed))
            return (out.numpy(), *(g.numpy() for g in grads))

    def conv_grads(self, x, w, dy, stride, padding, dilation, mode, device):
        return self._grads(lambda xt, wt: self.api.conv2d(xt, wt, strides=stride, padding=padding,
                                                          dilations=dilation, multiplier=mode), (x, w), dy, device)

    def matmul_grads(self, a, b, dc, mode, device):
        return self._grads(lambda at, bt: self.api.matmul(at, bt, multiplier=mode), (a, b), dc, device)

    def int_conv(self, x, w, table, zero_a, zero_w, rescale, signed, stride, padding, dilation, device):
        with self._device(device):
            return self.api.int_conv2d_codes(x, w, table, np.array([zero_a], np.int32), zero_w, rescale, signed,
                                             stride, padding, dilation).numpy()

    def quantise(self, x, scale, zero, qmin, qmax, device):
        with self._device(device):
            codes, mask = self.api.quantise(x, scale, zero, qmin, qmax)
            return codes.numpy(), mask.numpy()

    def finite_range(self, x, per_channel, device):
        with self._device(device):
            return tuple(t.numpy() for t in self.api.finite_range(x, per_channel))

    def errors_reach_python(self, device):  # noqa: ARG002 - the frameworks' common signature
        return None  # TensorFlow's kernels refuse input by a status (OP_REQUIRES): no C++ exception crosses into it

    def conv_step_ms(self, x, w, stride, mode, repeats):
        tf = self.tf
        with self._device("gpu"):
            xt, wt = tf.constant(x), tf.constant(w)

            @tf.function(jit_compile=False)
            def step():
                with tf.GradientTape() as tape:
                    tape.watch([xt, wt])
                    if mode == CUDNN:
                        y = tf.nn.conv2d(xt, wt, strides=stride, padding="SAME")
                    else:
                        y = self.api.conv2d(xt, wt, strides=stride, padding="SAME", multiplier=mode)
                dx, dw = tape.gradient(y, [xt, wt])
                return tf.reduce_sum(dx) + tf.reduce_sum(dw)  # .numpy() below waits for the GPU

            for _ in range(2):
                step().numpy()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                step().numpy()
                times.append(1000 * (time.perf_counter() - start))
        return statistics.median(times)


FRAMEWORKS = {"torch": TorchFramework, "tensorflow": TensorFlowFramework}
