"""`import ops.torch_ops`: the older module name of the PyTorch binding's ops, ops/torch_binding/ops.py (`from ops
import torch_ops` names the same module). Importing it builds and loads the binding, as importing the new one does."""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("ops.torch_binding.ops")
