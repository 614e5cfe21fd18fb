"""Building the compiled ops, on first use or by `python -m ops.build`: the shared parts (common), the TensorFlow
library (tf_library, with its CUDA part in cuda) and the PyTorch binding (torch_library); the command is __main__.

The names most callers need are here too: ops.build.build / BuildInfo / library_dir (the TensorFlow library),
BuildError, cache_root, cpu_target, source_hash. Importing this package loads neither TensorFlow nor torch.
"""

from ops.build.common import BuildError, cache_root, cpu_target, source_hash
from ops.build.tf_library import BuildInfo, build, library_dir

__all__ = ["BuildError", "BuildInfo", "build", "cache_root", "cpu_target", "library_dir", "source_hash"]
