// The one list of the kernels' multiplier modes.
//
// AMDNN_MODES(X) expands X(id, "name", product function) once per mode, in the enum's order: multiplier.h makes of
// it the enum Mode, product<M>() and dispatch_mode() (the one switch from a run-time mode to a template argument,
// which every kernel entry point goes through: CPU GEMM, CUDA launch, bindings, benchmarks), multiplier_setup.cc the
// names the ops accept. Adding a mode is one line here and its product function in multiplier.h
// (docs/multipliers-spec.md defines it bit for bit); the kernels then run it on their generic paths, and a fast
// formula is an optional specialisation per kernel (cpu_layer::kForm and decode() on the CPU, gpu::Fast<M> on the
// GPU). Python's registry (ops/modes/multipliers.py) lists the same names less "table", which users write as
// lut:<file>; tests/ops/test_mode_list.py holds the two lists equal.
#ifndef AMDNN_OPS_CC_MULTIPLIER_MODES_H_
#define AMDNN_OPS_CC_MULTIPLIER_MODES_H_

// clang-format off
#define AMDNN_MODES(X)                   \
  X(kAcc32, "acc32", acc32_product)      \
  X(kAcc16, "acc16", acc16_product)      \
  X(kFp16,  "fp16",  fp16_product)       \
  X(kAm32,  "am32",  am32_product)       \
  X(kAm16,  "am16",  am16_product)       \
  X(kMit32, "mit32", mit32_product)      \
  X(kMit16, "mit16", mit16_product)      \
  X(kTable, "table", table_product)
// clang-format on

#endif  // AMDNN_OPS_CC_MULTIPLIER_MODES_H_
