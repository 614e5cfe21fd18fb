// Multiplier set-up: mode names, the am16 table generated from the MBM definition, lut tables validated and expanded.
#include "multiplier_setup.h"

#include <algorithm>
#include <utility>

namespace amdnn {
namespace {

// One list of the kernels' mode names; valid_mode_names() and parse_mode() both read it.
#define AMDNN_MODE_NAME(id, name, fn) {name, Mode::id},
constexpr std::pair<const char*, Mode> kModeNames[] = {AMDNN_MODES(AMDNN_MODE_NAME)};
#undef AMDNN_MODE_NAME

}  // namespace

bool parse_mode(const std::string& name, Mode* mode) {
  for (const auto& entry : kModeNames) {
    if (name == entry.first) {
      *mode = entry.second;
      return true;
    }
  }
  return false;
}

std::vector<std::string> mode_names() {
  std::vector<std::string> names;
  for (const auto& entry : kModeNames) names.emplace_back(entry.first);
  return names;
}

std::string valid_mode_names() {
  std::string names;
  for (const std::string& name : mode_names()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

namespace {

void fill_columns(Multiplier* out) {
  for (int fa = 0; fa < 128; ++fa)
    for (int fb = 0; fb < 128; ++fb) out->columns7[(fb << 7) | fa] = out->table7[(fa << 7) | fb];
  std::fill(out->columns7.begin() + kTableSize, out->columns7.end(), uint8_t{0});
}

}  // namespace

std::string make_multiplier(Mode mode, const uint8_t* table, int64_t table_size, Multiplier* out) {
  out->mode = mode;
  if (mode != Mode::kTable) {
    if (table_size != 0) return "only the table multiplier takes a table, got " +
                                std::to_string(table_size) + " bytes; pass an empty uint8 tensor";
    if (mode == Mode::kAm16) {  // the AVX-512 fast kernels look am16 up like any table
      for (uint32_t fa = 0; fa < 128; ++fa)
        for (uint32_t fb = 0; fb < 128; ++fb) {
          const MantissaProduct p = mbm_mantissa(fa, fb, 7);
          out->table7[(fa << 7) | fb] = static_cast<uint8_t>((p.carry << 7) | p.mantissa);
        }
      fill_columns(out);
    }
    return "";
  }
  int m = 0;
  for (int bits = 1; bits <= kTableBits; ++bits)
    if (table_size == (int64_t{1} << (2 * bits))) m = bits;
  if (m == 0)
    return "a multiplier table must hold 4^m bytes for 1 <= m <= 7 (4, 16, 64, 256, 1024, 4096 or 16384), got " +
           std::to_string(table_size);
  const int side = 1 << m, shift = kTableBits - m;
  for (int i = 0; i < side * side; ++i) {
    if ((table[i] & 0x7F) >= side)
      return "table entry " + std::to_string(i) + " = " + std::to_string(table[i]) + " has a mantissa of more than " +
             std::to_string(m) + " bits (entries are c << 7 | M with M < 2^m)";
  }
  // An m-bit table is the 7-bit table whose entry for fields (Fa7, Fb7) is T[Fa7 >> (7-m)][Fb7 >> (7-m)], M << (7-m).
  for (uint32_t fa = 0; fa < 128; ++fa)
    for (uint32_t fb = 0; fb < 128; ++fb) {
      const uint8_t entry = table[((fa >> shift) << m) | (fb >> shift)];
      out->table7[(fa << 7) | fb] = static_cast<uint8_t>((entry & 0x80) | ((entry & 0x7F) << shift));
    }
  fill_columns(out);
  return "";
}

}  // namespace amdnn
