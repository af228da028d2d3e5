//===- CudaHostEmulation.h - Runs generated CUDA kernels on the host ------===//
//
// Test-only. Included before the CUDA prelude (minus its NVRTC-only typedef
// lines) and the kernels, so the host C++ compiler builds CUDA kernel sources
// into a shared library: __global__/__device__ vanish, __shared__ becomes a
// static (one block runs at a time, so a static is that block's shared
// memory), __constant__ a plain global, and `kiln_emulate_launch` runs a
// launch block by block with one host thread per CUDA thread. __syncthreads
// is a barrier over the block's threads, __syncwarp and a warp shuffle a
// barrier over the warp's; a thread that returns leaves both barriers (as
// exited threads do on the GPU). No GPU is needed, so CI checks the CUDA
// kernels' numerics against the CPU kernels. Blocks run one after another,
// so a race between blocks of one launch goes unseen here. Slow: tests use
// small shapes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CODEGEN_CUDAHOSTEMULATION_H
#define KILN_TEST_UNIT_CODEGEN_CUDAHOSTEMULATION_H

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <math.h>
#include <mutex>
#include <stdint.h>
#include <string.h>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __constant__

struct KilnDim3 {
  unsigned int x = 0;
};
inline thread_local KilnDim3 threadIdx, blockIdx;
inline KilnDim3 blockDim, gridDim;

// A reusable barrier whose party shrinks as threads exit.
class KilnBarrier {
public:
  void reset(int parties) {
    count = parties;
    arrived = 0;
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    int gen = generation;
    if (++arrived == count) {
      release();
      return;
    }
    cv.wait(lock, [&] { return gen != generation; });
  }
  void leave() {
    std::unique_lock<std::mutex> lock(mutex);
    --count;
    if (arrived > 0 && arrived == count)
      release();
  }

private:
  void release() {
    arrived = 0;
    ++generation;
    cv.notify_all();
  }
  std::mutex mutex;
  std::condition_variable cv;
  int count = 0, arrived = 0, generation = 0;
};

inline KilnBarrier kiln_block_barrier;
inline KilnBarrier kiln_warp_barriers[32];
inline double kiln_shuffle_slots[1024];

inline void __syncthreads() { kiln_block_barrier.wait(); }
inline void __syncwarp(unsigned int = 0xffffffffu) {
  kiln_warp_barriers[threadIdx.x / 32].wait();
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Every lane publishes its value, then reads its partner's (a double holds
// a float exactly).
template <class T> T __shfl_xor_sync(unsigned int, T value, int laneMask) {
  unsigned int t = threadIdx.x, warp = t / 32;
  kiln_shuffle_slots[t] = value;
  kiln_warp_barriers[warp].wait();
  T other = static_cast<T>(kiln_shuffle_slots[t ^ static_cast<unsigned int>(laneMask)]);
  kiln_warp_barriers[warp].wait();
  return other;
}

inline unsigned int atomicAdd(unsigned int *address, unsigned int value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}
template <class T> T __ldcg(const T *address) { return *address; }
inline float __int_as_float(int bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
inline float __uint_as_float(unsigned int bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Runs kernel<<<grid, block>>>(buffers): blocks in order, each with `block`
// host threads.
extern "C" void kiln_emulate_launch(void (*kernel)(void *const *), void *const *buffers,
                                    unsigned int grid, unsigned int block) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned int b = 0; b < grid; ++b) {
    kiln_block_barrier.reset(static_cast<int>(block));
    for (unsigned int w = 0; w * 32 < block; ++w)
      kiln_warp_barriers[w].reset(static_cast<int>(std::min(32u, block - 32 * w)));
    std::vector<std::thread> threads;
    for (unsigned int t = 0; t < block; ++t)
      threads.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b;
        kernel(buffers);
        kiln_warp_barriers[t / 32].leave();
        kiln_block_barrier.leave();
      });
    for (std::thread &thread : threads)
      thread.join();
  }
}

#endif // KILN_TEST_UNIT_CODEGEN_CUDAHOSTEMULATION_H
