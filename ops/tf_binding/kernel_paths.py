"""Which CPU kernel ran: the compiled GEMM counts its fast-path and generic-path calls and products.

    ops.path_counts()   {"fast_calls": ..., "generic_calls": ..., "fast_products": ..., "generic_products": ...}
    ops.cpu_kernels()   {"level": "x86-64-v3 (AVX2, FMA, F16C)", "fast_modes": ["acc32", ...]}

Process-wide counts since the library was loaded (atomic in C++, read through the AmdnnPathCounts op); take the
difference of two readings around the work of interest. The fast kernels decode operands once and exist for
x86-64-v3 (AVX2) and x86-64-v4 (AVX-512, with or without VBMI): every mode on each (cpu_kernels() says which level
was compiled and which modes have a fast kernel there). The generic kernel runs where they are not compiled in, or
for the blocks of a GEMM whose operands the fast formulas would not get right bit for bit (inf/NaN, products that
over- or underflow): a call is counted generic when any of its blocks was, and its products are split by block.
Ordinary training takes the fast path, so a fast path that silently regressed shows as generic calls. CPU kernels
only.
"""

from __future__ import annotations

from ops.build.tf_library import kernels_of
from ops.tf_binding.library import library

PATH_COUNT_NAMES = ("fast_calls", "generic_calls", "fast_products", "generic_products")


def path_counts() -> dict[str, int]:
    """The CPU GEMM's path counters now (see the module docstring). Loads (and if needed builds) the ops."""
    values = library().amdnn_path_counts().numpy()
    return {name: int(value) for name, value in zip(PATH_COUNT_NAMES, values)}


def cpu_kernels() -> dict:
    """The level the CPU kernels were compiled for and the modes that have a fast kernel there (the rest always take
    the generic kernel). Loads (and if needed builds) the ops."""
    return kernels_of(library())
