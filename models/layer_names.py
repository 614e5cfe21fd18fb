"""The multiplying layers of each network, by name and in order, without building it (no Keras, no TensorFlow).

A launch resolves per-layer multiplier rules (models.layer_rules) against these names for every cell before anything
is submitted, so they must be known in a process that never imports a framework. The names are those the builders
give their Conv2D/Dense layers (models.lenet, models.resnet); tests/models/test_layer_rules.py holds the two equal
for every network, order included.

    am_layer_names("lenet5") -> ("conv1", "conv2", "fc1", "fc2", "predictions")
"""

from models.resnet_depths import CONVS, DEPTHS, blocks

LENETS = {
    "lenet300": ("fc1", "fc2", "predictions"),
    "lenet5": ("conv1", "conv2", "fc1", "fc2", "predictions"),
}


def _resnet(depth: int) -> tuple[str, ...]:
    """stem_conv, then each block's layers in the order the builder makes them (its shortcut projection first, where
    the block has one), then predictions: from the plan models.resnet builds (resnet_depths.blocks)."""
    names = ["stem_conv"]
    for block in blocks(depth):
        if block.projection:
            names.append(f"{block.prefix}_shortcut_conv")
        names += [f"{block.prefix}_conv{i}" for i in range(1, CONVS[DEPTHS[depth][0]] + 1)]
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
