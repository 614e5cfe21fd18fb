"""The build command: compile the ops now (e.g. on a login node) rather than on first use, and report the build.

    python -m ops.build            build the TensorFlow library and report what was built, where, for which TF
    python -m ops.build --info     report only; build nothing
    python -m ops.build --report   build if needed, load, and report also the kernels' instruction-set level and
                                   which modes have a fast kernel there (the others run the generic kernel)
    python -m ops.build --cuda [--cuda-arch sm_70,sm_80,sm_90]
                                   the CUDA-enabled library: the CPU kernels and the GPU kernels in one library (an
                                   op is registered once per process); nvcc, architectures: ops/build/cuda.py. Its
                                   cache key adds the CUDA version and the architectures.
    python -m ops.build --torch    the PyTorch binding instead (ops/build/torch_library.py; the old command
                                   `python -m ops.torch_build` does the same)

The environment variables are ops/build/common.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from ops.build import cuda as cuda_build
from ops.build import torch_library
from ops.build.common import BuildError
from ops.build.tf_library import BuildInfo, build, library_dir, load_kernel_report
from ops.modes.multipliers import names


def report(info) -> str:
    """A build's facts (BuildInfo or TorchBuildInfo), one `key value` line each."""
    return "\n".join(f"{key:12s} {value}" for key, value in asdict(info).items())


def kernel_report(info: BuildInfo) -> str:
    """The CPU kernel level of the library `info` and the modes that have a fast kernel there."""
    kernels = load_kernel_report(info)
    modes = [*names(include_native=False), "table"]  # the kernels' modes; "table" runs lut:<file>
    label = {"table": "lut"}
    fast = [label.get(mode, mode) for mode in modes if mode in kernels["fast_modes"]]
    generic = [label.get(mode, mode) for mode in modes if mode not in kernels["fast_modes"]]
    return "\n".join([f"{'cpu kernels':12s} {kernels['level']}",
                      f"{'fast modes':12s} {' '.join(fast) or 'none'}",
                      f"{'generic only':12s} {' '.join(generic) or 'none'}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.build",
                                     description="Build the AMDNN ops for this CPU and TensorFlow (or PyTorch).")
    parser.add_argument("--info", action="store_true", help="report the cache entry for this machine; build nothing")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has the library")
    parser.add_argument("--report", action="store_true",
                        help="also load the library and report its kernels' level and fast modes")
    parser.add_argument("--cuda", action="store_true",
                        help="the CUDA-enabled library (CPU and GPU kernels), with nvcc from CUDA_HOME or PATH")
    parser.add_argument("--cuda-arch", metavar="ARCHS",
                        help="with --cuda: comma-separated sm_XY (machine code) and compute_XY (PTX) targets; default: "
                             "the visible GPU's, else sm_70,sm_80,sm_90,compute_90")
    parser.add_argument("--torch", action="store_true",
                        help="build and load the PyTorch binding instead (CPU, and CUDA where torch has it)")
    args = parser.parse_args(argv)
    if args.cuda_arch and not args.cuda:
        parser.error("--cuda-arch needs --cuda")
    if args.torch and (args.info or args.force or args.report or args.cuda):
        parser.error("--torch takes no other option (the binding's CUDA part follows torch: TORCH_CUDA_ARCH_LIST)")
    try:
        if args.torch:
            print(report(torch_library.load()))
            return 0
        cuda = cuda_build.config(args.cuda_arch) if args.cuda else None
        if args.info:
            directory = library_dir(cuda)
            info_path = directory / "build.json"
            if not info_path.exists():
                print(f"not built yet for this machine: {directory} (run `python -m ops.build"
                      f"{' --cuda' if cuda else ''}`)")
                return 1
            print(report(BuildInfo(**json.loads(info_path.read_text()))))
            return 0
        info = build(force=args.force, cuda=cuda)
        print(report(info))
        if args.report:
            print(kernel_report(info))
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
