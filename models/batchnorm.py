"""Batch normalisation: Keras' layer, with the normalisation as one fused kernel on Keras' torch backend.

Keras' own layer, run on the torch backend, builds the normalisation from elementwise torch ops (keras/src/backend/
torch/nn.py: the moments as mean(x) and mean(x^2) - mean^2, then (x - mean) * rsqrt(var + eps) * gamma + beta):
about six passes over the activations forward and more backward, each its own kernel. In a ResNet those passes, not
the convolutions, were most of the gap between a cell's step and a plain PyTorch loop's (docs/performance.md, "A
cell's steps on a GPU"). On the torch backend this layer normalises with torch's batch_norm instead (cuDNN's or
PyTorch's fused kernels, forward and backward) and keeps everything else Keras': the same variables and names
(gamma, beta, moving_mean, moving_variance), the same moving-average formula with the biased batch variance, the
same epsilon and momentum. On TensorFlow it is Keras' layer unchanged, so the TensorFlow engine's bits do not move.

The batch statistics are the same quantities computed another way (a one-pass mean and variance), so the torch
engine's bits differ from those of Keras' composite; the engine is part of a cell's identity (models.engines).
"""

import keras


@keras.saving.register_keras_serializable(package="amdnn")
class BatchNormalization(keras.layers.BatchNormalization):
    def _fused(self, inputs, mask) -> bool:
        """Whether torch's fused kernel computes exactly what Keras' layer defines for this call."""
        return (keras.backend.backend() == "torch" and mask is None and not self.renorm and not self.synchronized
                and self.axis in (-1, len(inputs.shape) - 1) and len(inputs.shape) in (2, 3, 4, 5)
                and str(inputs.dtype).endswith("float32"))

    def call(self, inputs, training=None, mask=None):
        if not self._fused(inputs, mask):
            return super().call(inputs, training=training, mask=mask)
        import torch  # only on the torch backend, where it is loaded already

        gamma = self.gamma.value if self.scale else None
        beta = self.beta.value if self.center else None
        channels_first = torch.movedim(inputs, -1, 1)  # [N, C, ...]: a view; torch's kernels take channels-last memory
        if training and self.trainable:
            with torch.no_grad():
                variance, mean = torch.var_mean(inputs, dim=tuple(range(inputs.ndim - 1)), correction=0)
                self.moving_mean.assign(self.moving_mean.value * self.momentum + mean * (1.0 - self.momentum))
                self.moving_variance.assign(
                    self.moving_variance.value * self.momentum + variance * (1.0 - self.momentum))
            outputs = torch.nn.functional.batch_norm(channels_first, None, None, gamma, beta, training=True,
                                                     eps=self.epsilon)
        else:
            outputs = torch.nn.functional.batch_norm(channels_first, self.moving_mean.value,
                                                     self.moving_variance.value, gamma, beta, training=False,
                                                     eps=self.epsilon)
        return torch.movedim(outputs, 1, -1)
