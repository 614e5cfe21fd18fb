"""The ResNets' shape as data (no TensorFlow import: the registry reads the model names from it, the layer names
are derived from it without building a model).

DEPTHS: depth -> (block kind, blocks per stage)
"""

DEPTHS = {
    18: ("basic", [2, 2, 2, 2]),
    34: ("basic", [3, 4, 6, 3]),
    50: ("bottleneck", [3, 4, 6, 3]),
}

STAGE_FILTERS = (64, 128, 256, 512)  # per stage; the stem has the first stage's width
BOTTLENECK_EXPANSION = 4  # a bottleneck block's output has 4x its filters
