"""The ResNets' shape as data (no TensorFlow import: the registry reads the model names from it, the layer names
are derived from it without building a model, and models.resnet builds from the same plan).

DEPTHS: depth -> (block kind, blocks per stage)
blocks(depth) -> every residual block in build order: its stage, index, filters, strides, and whether its shortcut
                 is a projection (the block changes the spatial size or the channel count)
"""
from dataclasses import dataclass

DEPTHS = {
    18: ("basic", [2, 2, 2, 2]),
    34: ("basic", [3, 4, 6, 3]),
    50: ("bottleneck", [3, 4, 6, 3]),
}

STAGE_FILTERS = (64, 128, 256, 512)  # per stage; the stem has the first stage's width
BOTTLENECK_EXPANSION = 4  # a bottleneck block's output has 4x its filters
CONVS = {"basic": 2, "bottleneck": 3}  # convolutions per block, besides a projection shortcut


@dataclass(frozen=True)
class Block:
    stage: int          # from 1
    index: int          # within the stage, from 1
    filters: int        # the block's width (a bottleneck's output has BOTTLENECK_EXPANSION times as many channels)
    strides: int        # 2 at the start of stages 2-4, else 1
    projection: bool    # a 1x1 convolution on the shortcut: the block changes the spatial size or the channels

    @property
    def prefix(self) -> str:
        return f"stage{self.stage}_block{self.index}"


def blocks(depth: int) -> list[Block]:
    """The residual blocks of resnet<depth>, in the order they are built."""
    kind, per_stage = DEPTHS[depth]
    expansion = BOTTLENECK_EXPANSION if kind == "bottleneck" else 1
    out, channels = [], STAGE_FILTERS[0]  # the stem's output
    for stage, (filters, count) in enumerate(zip(STAGE_FILTERS, per_stage), start=1):
        for index in range(1, count + 1):
            strides = 2 if stage > 1 and index == 1 else 1
            out.append(Block(stage, index, filters, strides, strides != 1 or channels != filters * expansion))
            channels = filters * expansion
    return out
