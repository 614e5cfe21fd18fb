// The side streams of gemm_cuda_streams.h: created once per device on first use and kept for the process's life
// (destroying them at exit could come after the CUDA driver's own teardown).
#include "gemm_cuda_streams.h"

#include <algorithm>
#include <vector>

namespace amdnn {
namespace gpu {
namespace {

struct DeviceSides {
  std::mutex mutex;  // held by a ForkJoin from its fork to its join
  bool tried = false, ok = false;
  cudaStream_t side[kMaxSideStreams] = {};
  cudaEvent_t fork = nullptr;
  cudaEvent_t joined[kMaxSideStreams] = {};
};

bool create(DeviceSides& d) {
  bool ok = cudaEventCreateWithFlags(&d.fork, cudaEventDisableTiming) == cudaSuccess;
  for (int i = 0; ok && i < kMaxSideStreams; ++i)
    ok = cudaStreamCreateWithFlags(&d.side[i], cudaStreamNonBlocking) == cudaSuccess &&
         cudaEventCreateWithFlags(&d.joined[i], cudaEventDisableTiming) == cudaSuccess;
  if (!ok) cudaGetLastError();  // clear it: the launches after report their own errors only
  return ok;
}

DeviceSides* sides_of_current_device() {
  static std::mutex devices_mutex;
  static std::vector<DeviceSides*>* devices = new std::vector<DeviceSides*>();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  const std::lock_guard<std::mutex> guard(devices_mutex);
  if (devices->size() <= static_cast<size_t>(device)) devices->resize(device + 1, nullptr);
  if ((*devices)[device] == nullptr) (*devices)[device] = new DeviceSides();
  return (*devices)[device];
}

// A stream being captured into a CUDA graph keeps every launch (a fork would pull the shared side streams into the
// capture); so does one whose state cannot be read.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

ForkJoin::ForkJoin(cudaStream_t stream, int launches) : caller_(stream) {
  const int wanted = std::min(launches - 1, kMaxSideStreams);
  if (wanted <= 0 || capturing(stream)) return;
  DeviceSides* const d = sides_of_current_device();
  if (d == nullptr) return;
  lock_ = std::unique_lock<std::mutex>(d->mutex);
  if (!d->tried) {
    d->tried = true;
    d->ok = create(*d);
  }
  if (!d->ok || cudaEventRecord(d->fork, stream) != cudaSuccess) {
    cudaGetLastError();
    lock_.unlock();
    return;
  }
  for (int i = 0; i < wanted; ++i) {
    if (cudaStreamWaitEvent(d->side[i], d->fork, 0) != cudaSuccess) {
      cudaGetLastError();
      break;  // the side streams that wait for the fork so far are usable
    }
    sides_ = i + 1;
  }
  side_ = d->side;
  joined_ = d->joined;
  if (sides_ == 0) lock_.unlock();
}

ForkJoin::~ForkJoin() { join(); }

cudaStream_t ForkJoin::stream(int i) const { return i == 0 || sides_ == 0 ? caller_ : side_[(i - 1) % sides_]; }

LaunchStatus ForkJoin::join() {
  LaunchStatus status;
  for (int i = 0; i < sides_; ++i) {
    cudaError_t e = cudaEventRecord(joined_[i], side_[i]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(caller_, joined_[i], 0);
    if (e != cudaSuccess && status.ok) status = {false, cudaGetErrorString(e)};
  }
  sides_ = 0;
  if (lock_.owns_lock()) lock_.unlock();
  return status;
}

}  // namespace gpu
}  // namespace amdnn
