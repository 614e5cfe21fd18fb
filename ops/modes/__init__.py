"""The multiplier modes, framework-free (numpy only): the one list of modes and their parsing (multipliers), the
numpy reference of every product (reference) and of the integer modes' layers (integer_reference), ApproxTrain
tables as files (table_files) and made from a mode (table_make), the error statistics and the `describe` command
built on them, the operand sets every bit-exactness check uses (operands), and what a binding passes to the kernels
for a mode (arguments). Tables from 8x8 circuits' C models (EvoApproxLib's form): compiled and enumerated
(c_models), their error figures (circuit_errors), the integer table files (integer_tables), the bfloat16 table of an
unsigned circuit (significand_tables), meta.json's figures and the cost side file (evoapprox), and the
`python -m ops.tables from-c` command (table_command).
"""
