"""LeNet-300-100 and LeNet-5.

LeNet-300-100 (LeCun et al. 1998): flatten, dense 300, dense 100, dense classes; 266,610 parameters on 784 inputs.
It accepts flat ([n, features]) or image ([n, h, w, c]) inputs: both are flattened.

LeNet-5 (LeCun et al. 1998, ReLU and max-pooling as usual today): on a 32x32 input, conv 6@5x5, pool, conv 16@5x5,
pool, dense 120, dense 84, dense classes (61,706 parameters for one channel and ten classes). Smaller inputs are
adapted to 32x32 first, as the original adapted 28x28 MNIST by padding: an integer nearest-neighbour upsampling
(8x8 digits -> 32x32, x4) then zero padding to 32x32 (28x28 MNIST -> 32x32), so the network and its parameter count
are the same for digits, MNIST and CIFAR-10. Larger inputs are used as they are.
"""

import keras

LENET5_SIDE = 32  # the input side the LeNet-5 layer sizes were designed for


def lenet300(maker, input_shape, num_classes):
    inputs = keras.Input(shape=tuple(input_shape), name="input")
    x = keras.layers.Flatten(name="flatten")(inputs)  # [n, h*w*c]
    x = maker.dense("fc1", 300, activation="relu")(x)
    x = maker.dense("fc2", 100, activation="relu")(x)
    outputs = maker.dense("predictions", num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="lenet300")


def _adapt_to_lenet5_side(x, height, width):
    """Upsample by an integer factor, then zero-pad, so that a small image becomes LENET5_SIDE x LENET5_SIDE."""
    if height > LENET5_SIDE or width > LENET5_SIDE:
        return x
    scale = LENET5_SIDE // max(height, width)
    if scale > 1:
        x = keras.layers.UpSampling2D(size=scale, interpolation="nearest", name="upsample")(x)
        height, width = height * scale, width * scale
    pad_h, pad_w = LENET5_SIDE - height, LENET5_SIDE - width
    if pad_h or pad_w:
        x = keras.layers.ZeroPadding2D(((pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2)),
                                       name="pad")(x)
    return x


def lenet5(maker, input_shape, num_classes):
    if len(input_shape) != 3:
        raise ValueError(f"lenet5 needs image inputs (height, width, channels), got input_shape={tuple(input_shape)}")
    height, width, _ = input_shape
    if min(height, width) < 4:
        raise ValueError(f"lenet5 needs images of at least 4x4 pixels, got {height}x{width}")
    inputs = keras.Input(shape=tuple(input_shape), name="input")
    x = _adapt_to_lenet5_side(inputs, height, width)  # [n, 32, 32, c] for inputs up to 32x32
    x = maker.conv("conv1", 6, 5, padding="valid", activation="relu")(x)  # [n, 28, 28, 6]
    x = keras.layers.MaxPooling2D(2, name="pool1")(x)  # [n, 14, 14, 6]
    x = maker.conv("conv2", 16, 5, padding="valid", activation="relu")(x)  # [n, 10, 10, 16]
    x = keras.layers.MaxPooling2D(2, name="pool2")(x)  # [n, 5, 5, 16]
    x = keras.layers.Flatten(name="flatten")(x)  # [n, 400]
    x = maker.dense("fc1", 120, activation="relu")(x)
    x = maker.dense("fc2", 84, activation="relu")(x)
    outputs = maker.dense("predictions", num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="lenet5")
