"""AM layers: Keras Conv2D and Dense whose multiplies go through a simulated multiplier (ops.conv2d / ops.matmul).

AMConv2D and AMDense subclass Keras' own Conv2D and Dense and change only the product (ops.keras_ops: the TF ops
on Keras' TensorFlow backend, the PyTorch binding on its torch backend, chosen by KERAS_BACKEND): the weights are
created by the parent class, so they have exactly its layout and names (`kernel` HWIO / [in, out], `bias`), and
weights trained natively load into an AM layer unchanged. The config adds `multiplier` and `exact_gradients`, so a model
saved with AM layers reloads with the same multiplier.

The custom ops cannot be compiled by XLA, so these layers set `supports_jit = False`: Keras then never picks XLA
for a model that contains them (jit_compile="auto" resolves to False, jit_compile=True falls back with a warning).
"""

import keras

import ops
from models.integer_layers import IntConv2D, IntDense
from ops import NATIVE, keras_ops


def check_multiplier(multiplier):
    """Raise ValueError (listing the valid choices) unless `multiplier` is a mode of ops.names() or "lut:<path>",
    and Keras runs on a backend the ops have kernels for."""
    ops.parse(multiplier)
    keras_ops.backend()


def _check_float_mode(multiplier, layer):
    """The AM layers multiply floats: an integer mode is refused, naming its own layer."""
    check_multiplier(multiplier)
    if ops.parse(multiplier).is_integer:
        raise ValueError(f"{multiplier!r} is an integer mode: its layers are IntConv2D / IntDense "
                         f"(models.integer_layers), not {layer}; layers.conv2d / layers.dense pick the right one")


def _spatial_arg(values, what):
    """ops take one int when both spatial values agree, else the (h, w) pair."""
    values = tuple(int(v) for v in values)
    if len(values) != 2:
        raise ValueError(f"AMConv2D {what} must have 2 values (h, w), got {values}")
    return values[0] if values[0] == values[1] else values


@keras.saving.register_keras_serializable(package="amdnn")
class AMConv2D(keras.layers.Conv2D):
    """keras.layers.Conv2D whose convolution is ops.conv2d under `multiplier` (NHWC, kernel HWIO, groups=1)."""

    def __init__(self, filters, kernel_size, multiplier, exact_gradients=False, **kwargs):
        super().__init__(filters, kernel_size, **kwargs)
        if multiplier == NATIVE:
            raise ValueError("AMConv2D needs an approximate multiplier; for 'native' use keras.layers.Conv2D")
        _check_float_mode(multiplier, "AMConv2D")
        if self.data_format != "channels_last":
            raise ValueError(f"AMConv2D supports data_format='channels_last' (NHWC) only, got {self.data_format!r}")
        if self.groups != 1:
            raise ValueError(f"AMConv2D supports groups=1 only, got groups={self.groups}")
        if self.padding not in ("same", "valid"):
            raise ValueError(f"AMConv2D supports padding 'same' or 'valid', got {self.padding!r}")
        self.multiplier = multiplier
        self.exact_gradients = bool(exact_gradients)
        self.supports_jit = False

    def convolution_op(self, inputs, kernel):
        return keras_ops.conv2d(
            inputs,
            kernel,
            strides=_spatial_arg(self.strides, "strides"),
            padding=self.padding.upper(),
            dilations=_spatial_arg(self.dilation_rate, "dilation_rate"),
            multiplier=self.multiplier,
            exact_gradients=self.exact_gradients,
        )

    def get_config(self):
        return {**super().get_config(), "multiplier": self.multiplier, "exact_gradients": self.exact_gradients}


@keras.saving.register_keras_serializable(package="amdnn")
class AMDense(keras.layers.Dense):
    """keras.layers.Dense whose product is ops.matmul under `multiplier` (inputs [..., in], kernel [in, out])."""

    def __init__(self, units, multiplier, exact_gradients=False, **kwargs):
        super().__init__(units, **kwargs)
        if multiplier == NATIVE:
            raise ValueError("AMDense needs an approximate multiplier; for 'native' use keras.layers.Dense")
        _check_float_mode(multiplier, "AMDense")
        if self.lora_rank:
            raise ValueError("AMDense does not support LoRA (lora_rank): its extra products would bypass "
                             "the multiplier")
        self.multiplier = multiplier
        self.exact_gradients = bool(exact_gradients)
        self.supports_jit = False

    def call(self, inputs, training=None):
        x = keras_ops.matmul(inputs, self.kernel, multiplier=self.multiplier, exact_gradients=self.exact_gradients)
        if self.bias is not None:
            x = keras.ops.add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        return x

    def enable_lora(self, *args, **kwargs):
        raise NotImplementedError("AMDense does not support LoRA: its extra products would bypass the multiplier")

    def get_config(self):
        return {**super().get_config(), "multiplier": self.multiplier, "exact_gradients": self.exact_gradients}


def conv2d(multiplier, exact_gradients=False, table_gradients=False, **kwargs):
    """A Conv2D layer for `multiplier`: Keras' own for 'native', IntConv2D for an integer mode (table_gradients: its
    backward through the table), else AMConv2D; kwargs are Conv2D's."""
    if multiplier == NATIVE:
        return keras.layers.Conv2D(**kwargs)
    if ops.parse(multiplier).is_integer:
        return IntConv2D(multiplier=multiplier, exact_gradients=exact_gradients, table_gradients=table_gradients,
                        **kwargs)
    return AMConv2D(multiplier=multiplier, exact_gradients=exact_gradients, **kwargs)


def dense(multiplier, exact_gradients=False, table_gradients=False, **kwargs):
    """A Dense layer for `multiplier`: Keras' own for 'native', IntDense for an integer mode (table_gradients: its
    backward through the table), else AMDense; kwargs are Dense's."""
    if multiplier == NATIVE:
        return keras.layers.Dense(**kwargs)
    if ops.parse(multiplier).is_integer:
        return IntDense(multiplier=multiplier, exact_gradients=exact_gradients, table_gradients=table_gradients,
                        **kwargs)
    return AMDense(multiplier=multiplier, exact_gradients=exact_gradients, **kwargs)
