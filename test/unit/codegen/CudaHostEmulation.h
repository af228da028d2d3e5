//===- CudaHostEmulation.h - Runs generated CUDA kernels on the host ------===//
//
// Test-only. Included before the CUDA prelude (minus its NVRTC-only typedef
// lines) and the kernels, so the host C++ compiler builds CUDA kernel sources
// into a shared library (the built-ins are test/sim/CudaHostIntrinsics.h's),
// and `kiln_emulate_launch` runs a
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

#include "../../sim/CudaHostIntrinsics.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

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

inline void kiln_block_sync() { kiln_block_barrier.wait(); }
inline void kiln_warp_sync(unsigned int warp) { kiln_warp_barriers[warp].wait(); }

// Dynamic shared memory (`extern __shared__`): one static buffer, as blocks
// run one at a time. 256 KiB is more than any GPU gives a block. The memory
// check (KILN_MEMCHECK) points it at a heap block of exactly the launch's
// shared bytes instead, so that an access past them is an overflow.
#ifdef KILN_MEMCHECK
inline unsigned char *kiln_emulated_dynamic_shared = nullptr;
#else
alignas(32) inline unsigned char kiln_emulated_dynamic_shared[256 * 1024];
#endif

// Runs block `b` of kernel<<<grid, block>>>(buffers) with `block` host
// threads.
inline void kiln_emulate_block(void (*kernel)(void *const *), void *const *buffers,
                               unsigned int grid, unsigned int block, unsigned int b) {
  gridDim.x = grid;
  blockDim.x = block;
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

// Runs kernel<<<grid, block>>>(buffers): blocks in order.
extern "C" void kiln_emulate_launch(void (*kernel)(void *const *), void *const *buffers,
                                    unsigned int grid, unsigned int block) {
  for (unsigned int b = 0; b < grid; ++b)
    kiln_emulate_block(kernel, buffers, grid, block, b);
}

#endif // KILN_TEST_UNIT_CODEGEN_CUDAHOSTEMULATION_H
