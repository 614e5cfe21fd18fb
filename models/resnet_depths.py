"""The ResNet depths as data (no TensorFlow import: the registry reads the model names from it).

depth -> (block kind, blocks per stage)
"""

DEPTHS = {
    18: ("basic", [2, 2, 2, 2]),
    34: ("basic", [3, 4, 6, 3]),
    50: ("bottleneck", [3, 4, 6, 3]),
}
