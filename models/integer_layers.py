"""Integer layers: Keras Conv2D and Dense that quantise their input and weights to 8-bit codes and multiply the codes
through an integer mode's table (ops.keras_integer; docs/multipliers-spec.md, "Integer modes").

IntConv2D and IntDense subclass Keras' Conv2D and Dense: `kernel` and `bias` are the parent's, in its layouts and
names, so weights trained natively load unchanged. Each adds two non-trainable weights, saved with the model and
its checkpoints (a resumed run quantises exactly as the uninterrupted one): `activation_range`, the running range
(lo, hi) of the layer's input, and `range_updates`, how many training steps have set it (0: never, and evaluation
then quantises each batch by its own range). Each training step first updates the range with the batch's (the first
step sets it; a batch holding a NaN or an infinity leaves it unchanged), then quantises with it; evaluation uses it
as it stands. `calibrating = True` makes a forward pass widen the range to hold the batch's instead (calibration
before training: models.integer_calibration). The weights' ranges are their own, per output channel, at every pass.
The backward pass is the straight-through estimator with exact (acc32) products, or with `table_gradients=True` goes
through the table too (any scheme; docs/multipliers-spec.md, "Gradients through the table").
`exact_gradients` is accepted, for the configs' sake, and changes nothing.
"""

import keras
from keras import ops as K

from ops import keras_integer, keras_ops
from ops.modes.integer_reference import integer_mode


def _spatial_arg(values, what):
    values = tuple(int(v) for v in values)
    if len(values) != 2:
        raise ValueError(f"IntConv2D {what} must have 2 values (h, w), got {values}")
    return values[0] if values[0] == values[1] else values


class _RangeMixin:
    """The running activation range of an integer layer, and the table as a tensor on the layer's device."""

    def _setup_integer(self, multiplier, exact_gradients, table_gradients):
        self.mode = integer_mode(multiplier)  # ValueError naming the valid modes or the bad table file
        keras_ops.backend()
        self.multiplier = multiplier
        self.exact_gradients = bool(exact_gradients)
        self.table_gradients = bool(table_gradients)
        self.calibrating = False
        self.supports_jit = False  # a custom op inside: XLA cannot compile it

    def build(self, input_shape):
        super().build(input_shape)
        self.activation_range = self.add_weight(name="activation_range", shape=(2,), initializer="zeros",
                                                trainable=False)
        self.range_updates = self.add_weight(name="range_updates", shape=(), initializer="zeros", trainable=False)
        self._table = K.convert_to_tensor(keras_integer.table_entries(self.mode))

    def _input_range(self, x, training):
        """The range this pass quantises x with, after this step's update of the running range, and whether x is
        all finite (one pass of the compiled range op gives both)."""
        batch_lo, batch_hi, finite = keras_integer.finite_range(x)
        running_lo, running_hi = self.activation_range[0], self.activation_range[1]
        seen = K.greater(self.range_updates, keras_integer.scalar(0.0, x))
        if not (training or self.calibrating):
            return (K.where(seen, running_lo, batch_lo), K.where(seen, running_hi, batch_hi)), finite
        if self.calibrating:  # the union of the batches' ranges (min and max are exact)
            lo, hi = K.minimum(running_lo, batch_lo), K.maximum(running_hi, batch_hi)
        else:
            lo, hi = keras_integer.update_running_range(running_lo, running_hi, batch_lo, batch_hi)
        lo, hi = K.where(seen, lo, batch_lo), K.where(seen, hi, batch_hi)
        lo, hi = K.where(finite, lo, running_lo), K.where(finite, hi, running_hi)
        self.activation_range.assign(K.stack([lo, hi]))
        self.range_updates.assign(K.add(self.range_updates, K.cast(finite, "float32")))
        return (lo, hi), finite

    def get_config(self):
        return {**super().get_config(), "multiplier": self.multiplier, "exact_gradients": self.exact_gradients,
                "table_gradients": self.table_gradients}

    def _finish(self, y):
        if self.bias is not None:
            y = K.add(y, self.bias)
        return self.activation(y) if self.activation is not None else y


@keras.saving.register_keras_serializable(package="amdnn")
class IntConv2D(_RangeMixin, keras.layers.Conv2D):
    """keras.layers.Conv2D through an integer mode (NHWC, kernel HWIO, groups=1)."""

    def __init__(self, filters, kernel_size, multiplier, exact_gradients=False, table_gradients=False, **kwargs):
        super().__init__(filters, kernel_size, **kwargs)
        self._setup_integer(multiplier, exact_gradients, table_gradients)
        if self.data_format != "channels_last" or self.groups != 1 or self.padding not in ("same", "valid"):
            raise ValueError(f"IntConv2D supports data_format='channels_last', groups=1 and padding 'same' or "
                             f"'valid'; got {self.data_format!r}, {self.groups}, {self.padding!r}")

    def call(self, inputs, training=None):
        activation_range, finite = self._input_range(inputs, training)
        y = keras_integer.conv2d(inputs, self.kernel, self.mode, activation_range,
                                 _spatial_arg(self.strides, "strides"), self.padding.upper(),
                                 _spatial_arg(self.dilation_rate, "dilation_rate"), table=self._table,
                                 table_gradients=self.table_gradients, input_finite=finite)
        return self._finish(y)


@keras.saving.register_keras_serializable(package="amdnn")
class IntDense(_RangeMixin, keras.layers.Dense):
    """keras.layers.Dense through an integer mode (inputs [..., in], kernel [in, out])."""

    def __init__(self, units, multiplier, exact_gradients=False, table_gradients=False, **kwargs):
        super().__init__(units, **kwargs)
        self._setup_integer(multiplier, exact_gradients, table_gradients)
        if self.lora_rank:
            raise ValueError("IntDense does not support LoRA (lora_rank): its extra products would bypass the "
                             "multiplier")

    def call(self, inputs, training=None):
        activation_range, finite = self._input_range(inputs, training)
        return self._finish(keras_integer.dense(inputs, self.kernel, self.mode, activation_range, table=self._table,
                                                table_gradients=self.table_gradients, input_finite=finite))
