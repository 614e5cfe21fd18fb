"""The integer modes' names (docs/multipliers-spec.md, "Integer modes", Names): each is a kind of 8-bit codes and a
quantisation scheme. A name alone is the exact multiplier of its kind; "<name>:<file>" takes the products from a table
file of that kind (`ops/modes/integer_tables.py`). In configs: `mult=int8 mult.table=FILE`.

The one list of integer mode names; the registry (multipliers), the reference and the layers read it.
"""

# name -> (kind of the codes, scheme); the plain kind names carry their kind's usual scheme.
KIND_AND_SCHEME = {
    "int8": ("signed", "symmetric"),
    "int8_asym": ("signed", "asymmetric"),
    "uint8": ("unsigned", "asymmetric"),
    "uint8_sym": ("unsigned", "symmetric"),
}
NAMES = tuple(KIND_AND_SCHEME)
