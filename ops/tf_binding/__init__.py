"""The TensorFlow binding: loading the built library (library), the public conv2d and matmul (api), their
gradients (gradients, registered when api is imported) and the CPU kernels' path counters (kernel_paths).
"""
