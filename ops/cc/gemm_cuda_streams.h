// Side streams for one op's independent launches (the input gradient's stride phases), so that they run side by
// side on the GPU: forked from the caller's stream and joined back into it, the caller sees one op on its stream.
// Every launch writes its own outputs and its own workspace, so the bits are those of the launches one after the
// other; only the time changes.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_STREAMS_H_
#define AMDNN_OPS_CC_GEMM_CUDA_STREAMS_H_

#include <cuda_runtime.h>

#include <mutex>

#include "gemm_cuda.h"

namespace amdnn {
namespace gpu {

constexpr int kMaxSideStreams = 3;  // a stride-2 input gradient's four phases: the caller's stream and three more

// One op's fork and join. While it lives it holds the lock of the device's side streams, so that the fork and join
// of one op are never interleaved with another's (host threads sharing a GPU). Where side streams cannot be used
// (the caller's stream is being captured into a CUDA graph, or they could not be created) every launch takes the
// caller's stream, one after the other, with the same bits.
class ForkJoin {
 public:
  ForkJoin(cudaStream_t stream, int launches);
  ~ForkJoin();  // joins, if join() was not called
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;
  // The stream of launch i (0 <= i < launches): the caller's for i = 0, a side stream after the fork for the others.
  cudaStream_t stream(int i) const;
  // Makes the caller's stream wait for every side stream's work; call it once, also after a failed launch, so that
  // no launch of this op is left running past it (the caller then frees the workspace).
  LaunchStatus join();

 private:
  std::unique_lock<std::mutex> lock_;
  cudaStream_t caller_;
  int sides_ = 0;               // side streams in use: 0 runs every launch on the caller's stream
  cudaStream_t* side_ = nullptr;
  cudaEvent_t* joined_ = nullptr;
};

}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_STREAMS_H_
