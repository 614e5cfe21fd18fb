"""LayerMaker: the Conv2D/Dense layers of one model for one multiplier, each initialised from (seed, layer name).

Every architecture builds its weight layers through a LayerMaker, so the same builder gives Keras' own layers for
"native" and AM layers otherwise, with the same names, layouts and initial values. A layer named in `layers` takes its own multiplier and gradient mode (per-layer rules,
models.layer_rules), the others the maker's. Each layer's initialiser seed is
derived from the model seed and the layer's name rather than from a running counter or Keras' global seed, so
initial weights do not depend on what else was built earlier in the process.
"""

import dataclasses
import zlib
from typing import Mapping

import keras

import ops
from models import layers


def layer_seed(seed, name):
    """A 31-bit initialiser seed that depends only on the model seed and the layer name."""
    return zlib.crc32(f"{int(seed)}/{name}".encode()) & 0x7FFFFFFF


def _seeded(initializer, seed, name):
    # Through the initializer's own config, not keras.initializers.serialize: Keras' serializer asks whether
    # TensorFlow is available, which imports it (seconds, into a torch cell's process that never runs it).
    initializer = keras.initializers.get(initializer)
    return type(initializer).from_config({**initializer.get_config(), "seed": layer_seed(seed, name)})


@dataclasses.dataclass(frozen=True)
class LayerMaker:
    multiplier: str  # "native" -> Keras layers; any other mode -> AMConv2D / AMDense
    exact_gradients: bool = False  # passed to the AM layers: gradients with exact products instead of the multiplier
    seed: int = 0  # with each layer name, fixes every initial weight
    table_gradients: bool = False  # the integer layers' (any of them): the backward through the table
    # layer name -> (multiplier, exact_gradients) for the layers that differ from the two above
    layers: Mapping[str, tuple[str, bool]] = dataclasses.field(default_factory=dict)

    def setting(self, name) -> tuple[str, bool]:
        """(multiplier, exact_gradients) of the layer `name`."""
        return self.layers.get(name, (self.multiplier, self.exact_gradients))

    def _table_gradients(self, name) -> bool:
        """Whether layer `name` takes its gradients through the table: asked for, and an integer mode's layer."""
        return self.table_gradients and ops.parse(self.setting(name)[0]).is_integer

    def conv(self, name, filters, kernel_size, strides=1, padding="same", use_bias=True, activation=None,
             initializer="he_normal"):
        return layers.conv2d(
            *self.setting(name), table_gradients=self._table_gradients(name), name=name, filters=filters, kernel_size=kernel_size,
            strides=strides, padding=padding, use_bias=use_bias, activation=activation,
            kernel_initializer=_seeded(initializer, self.seed, name),
        )

    def dense(self, name, units, activation=None, initializer="glorot_uniform"):
        return layers.dense(
            *self.setting(name), table_gradients=self._table_gradients(name), name=name, units=units, activation=activation,
            kernel_initializer=_seeded(initializer, self.seed, name),
        )
