"""The multiplier modes, framework-free (numpy only): the one list of modes and their parsing (multipliers), the
numpy reference of every product (reference), ApproxTrain tables as files (table_files) and made from a mode
(table_make), the error statistics and the `describe` command built on them, the operand sets every bit-exactness
check uses (operands), and what a binding passes to the kernels for a mode (arguments).
"""
