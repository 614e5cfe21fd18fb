"""Which CPU kernel ran: the compiled GEMM counts its fast-path and generic-path calls and products.

    ops.path_counts()   {"fast_calls": ..., "generic_calls": ..., "fast_products": ..., "generic_products": ...}

Process-wide counts since the library was loaded (atomic in C++, read through the AmdnnPathCounts op); take the
difference of two readings around the work of interest. The fast kernels decode operands once and need AVX-512
(target x86-64-v4, tables also VBMI); the generic kernel runs where they are not compiled in, or for operands the
fast formulas would not get right bit for bit (inf/NaN, products that over- or underflow). Ordinary training takes
the fast path on such CPUs, so a fast path that silently regressed shows as generic calls. CPU kernels only.
"""

from __future__ import annotations

PATH_COUNT_NAMES = ("fast_calls", "generic_calls", "fast_products", "generic_products")


def path_counts() -> dict[str, int]:
    """The CPU GEMM's path counters now (see the module docstring). Loads (and if needed builds) the ops."""
    from ops.library import library

    values = library().amdnn_path_counts().numpy()
    return {name: int(value) for name, value in zip(PATH_COUNT_NAMES, values)}
