// The path counters of all op files, added up (each op file's own are in its module: gemm_cuda_kernel.cuh). No
// kernel header here: this file compiles in a second.
#include "gemm_cuda.h"

namespace amdnn {
namespace gpu {

PathCounts path_counts_conv();
PathCounts path_counts_input_grad();
PathCounts path_counts_filter_grad();

PathCounts path_counts() {
  PathCounts total;
  for (const PathCounts& c : {path_counts_conv(), path_counts_input_grad(), path_counts_filter_grad()}) {
    total.fast += c.fast;
    total.generic += c.generic;
  }
  return total;
}

}  // namespace gpu
}  // namespace amdnn
