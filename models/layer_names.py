"""The multiplying layers of each network, by name and in order, without building it (no Keras, no TensorFlow).

A launch resolves per-layer multiplier rules (models.layer_rules) against these names for every cell before anything
is submitted, so they must be known in a process that never imports a framework. The names are those the builders
give their Conv2D/Dense layers (models.lenet, models.resnet); tests/models/test_layer_rules.py holds the two equal
for every network, order included.

    am_layer_names("lenet5") -> ("conv1", "conv2", "fc1", "fc2", "predictions")
"""

from models.resnet_depths import BOTTLENECK_EXPANSION, DEPTHS, STAGE_FILTERS

LENETS = {
    "lenet300": ("fc1", "fc2", "predictions"),
    "lenet5": ("conv1", "conv2", "fc1", "fc2", "predictions"),
}


def _resnet(depth: int) -> tuple[str, ...]:
    """stem_conv, then each block's layers in the order the builder makes them (its shortcut projection first, where
    the block changes shape), then predictions."""
    kind, blocks_per_stage = DEPTHS[depth]
    convs = 2 if kind == "basic" else 3
    expansion = 1 if kind == "basic" else BOTTLENECK_EXPANSION
    names, channels = ["stem_conv"], STAGE_FILTERS[0]
    for stage, (filters, blocks) in enumerate(zip(STAGE_FILTERS, blocks_per_stage), start=1):
        for block in range(1, blocks + 1):
            prefix, strides = f"stage{stage}_block{block}", 2 if stage > 1 and block == 1 else 1
            if strides != 1 or channels != filters * expansion:  # models.resnet._shortcut's projection
                names.append(f"{prefix}_shortcut_conv")
            names += [f"{prefix}_conv{i}" for i in range(1, convs + 1)]
            channels = filters * expansion
    return (*names, "predictions")


def am_layer_names(model: str) -> tuple[str, ...]:
    """The names of `model`'s Conv2D/Dense layers (the layers a multiplier applies to), in the order they are built;
    ValueError for a model that is not a network of models.registry."""
    if model in LENETS:
        return LENETS[model]
    if model.startswith("resnet") and model[len("resnet"):].isdigit() and int(model[len("resnet"):]) in DEPTHS:
        return _resnet(int(model[len("resnet"):]))
    valid = [*LENETS, *(f"resnet{depth}" for depth in DEPTHS)]
    raise ValueError(f"unknown model {model!r}; valid models: {', '.join(valid)}")
