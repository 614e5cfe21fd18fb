"""ResNet-18/34/50 for CIFAR-sized images (He et al. 2016, the CIFAR variant): a 3x3 stem, no max-pool.

Depth is data (DEPTHS, and the block plan resnet_depths.blocks that models.layer_names reads too); one builder
makes every depth. Four stages of 64, 128, 256, 512 filters (x4 out of a
bottleneck), stride 2 at the start of stages 2-4, global average pooling, one dense classifier. Convolutions carry no
bias (batch normalisation follows each); only convolutions and the classifier multiply, so only they become AM layers.

Layer names are predictable: stem_conv, stem_bn, stem_relu, then stage{s}_block{b}_conv{i} / _bn{i} / _relu{i},
stage{s}_block{b}_shortcut_conv / _shortcut_bn where a block changes shape, stage{s}_block{b}_add / _out, then pool
and predictions (s, b and i count from 1).
"""

import keras

from models.batchnorm import BatchNormalization
from models.resnet_depths import BOTTLENECK_EXPANSION, DEPTHS, STAGE_FILTERS, blocks

# The CIFAR ResNet recipe's batch-norm settings (PyTorch's momentum 0.1 is Keras' 0.9).
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5


def _bn(name):
    return BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name)


def _conv_bn(maker, x, prefix, index, filters, kernel_size, strides=1, relu=True):
    x = maker.conv(f"{prefix}_conv{index}", filters, kernel_size, strides=strides, use_bias=False)(x)
    x = _bn(f"{prefix}_bn{index}")(x)
    if relu:
        x = keras.layers.ReLU(name=f"{prefix}_relu{index}")(x)
    return x


def _shortcut(maker, x, plan, filters):
    """Identity, or a 1x1 projection where the block changes the spatial size or the channel count (plan.projection,
    resnet_depths.blocks)."""
    if not plan.projection:
        return x
    x = maker.conv(f"{plan.prefix}_shortcut_conv", filters, 1, strides=plan.strides, use_bias=False)(x)
    return _bn(f"{plan.prefix}_shortcut_bn")(x)


def basic_block(maker, x, plan):
    prefix, filters, strides = plan.prefix, plan.filters, plan.strides
    shortcut = _shortcut(maker, x, plan, filters)
    x = _conv_bn(maker, x, prefix, 1, filters, 3, strides)
    x = _conv_bn(maker, x, prefix, 2, filters, 3, relu=False)
    x = keras.layers.Add(name=f"{prefix}_add")([x, shortcut])
    return keras.layers.ReLU(name=f"{prefix}_out")(x)


def bottleneck_block(maker, x, plan):
    prefix, filters, strides = plan.prefix, plan.filters, plan.strides
    shortcut = _shortcut(maker, x, plan, filters * BOTTLENECK_EXPANSION)
    x = _conv_bn(maker, x, prefix, 1, filters, 1)
    x = _conv_bn(maker, x, prefix, 2, filters, 3, strides)
    x = _conv_bn(maker, x, prefix, 3, filters * BOTTLENECK_EXPANSION, 1, relu=False)
    x = keras.layers.Add(name=f"{prefix}_add")([x, shortcut])
    return keras.layers.ReLU(name=f"{prefix}_out")(x)


BLOCKS = {"basic": basic_block, "bottleneck": bottleneck_block}


def resnet(depth, maker, input_shape, num_classes):
    if depth not in DEPTHS:
        raise ValueError(f"no ResNet of depth {depth}; valid depths: {sorted(DEPTHS)}")
    if len(input_shape) != 3:
        raise ValueError(f"resnet{depth} needs image inputs (height, width, channels), got {tuple(input_shape)}")
    block = BLOCKS[DEPTHS[depth][0]]
    inputs = keras.Input(shape=tuple(input_shape), name="input")
    x = maker.conv("stem_conv", STAGE_FILTERS[0], 3, use_bias=False)(inputs)  # [n, 32, 32, 64] on CIFAR
    x = _bn("stem_bn")(x)
    x = keras.layers.ReLU(name="stem_relu")(x)
    for plan in blocks(depth):
        x = block(maker, x, plan)
    # [n, 4, 4, 512 or 2048] on CIFAR
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = maker.dense("predictions", num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")
