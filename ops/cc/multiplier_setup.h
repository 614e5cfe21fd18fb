// Turning a multiplier's name (and, for tables, its bytes) into what the kernels read; TensorFlow-free.
#ifndef AMDNN_OPS_CC_MULTIPLIER_SETUP_H_
#define AMDNN_OPS_CC_MULTIPLIER_SETUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gemm.h"

namespace amdnn {

// The names the compiled ops accept for their `multiplier` attribute (Python maps "lut:<file>" to "table").
bool parse_mode(const std::string& name, Mode* mode);
std::string valid_mode_names();
std::vector<std::string> mode_names();

// Fills `out` for `mode`. For Mode::kTable, `table` holds an ApproxTrain table of 4^m bytes (1 <= m <= 7), which is
// validated and expanded to the canonical m = 7 form; other modes take no table (table_size 0).
// Returns an empty string on success, else what was wrong and what would be right.
std::string make_multiplier(Mode mode, const uint8_t* table, int64_t table_size, Multiplier* out);

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_MULTIPLIER_SETUP_H_
