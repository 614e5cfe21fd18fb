"""The PyTorch binding: torch_binding.ops (also reachable as ops.torch_ops) loads the binding's library and gives
conv2d and matmul in torch's conventions, with their fake kernels and autograd.
"""
