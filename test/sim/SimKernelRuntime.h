//===- SimKernelRuntime.h - Runs a launch of host-compiled CUDA kernels -----===//
//
// Test-only. The device simulator's NVRTC (SimNvrtc.cpp) compiles a CUDA
// translation unit with the host compiler after this header, into a shared
// library the simulated driver loads as a module. Its one export,
// `kiln_sim_launch`, runs kernel<<<grid, block, dynamicShared>>>(buffers):
//
//  1. Blocks run one at a time, in a shuffled order (a permutation drawn
//     from the launch's seed), so a kernel whose result depends on the order
//     of its blocks differs from run to run and from the CPU backend.
//  2. A block's threads are fibers on the calling host thread: each runs
//     until it waits at a barrier (__syncthreads, __syncwarp, a shuffle) or
//     returns, then the next runs. A barrier releases when every live thread
//     of its block (or warp) has arrived; a thread that returns leaves the
//     barriers, as exited threads do on the GPU. No live thread able to move
//     on is a deadlock, reported as an error.
//  3. Fast path: a kernel's first launch runs every block as fibers and is
//     watched; a kernel none of whose blocks reached a barrier there runs
//     its later launches as plain loops over the threads (no fiber
//     switches). If such a kernel does reach a barrier later
//     (data-dependent), the launch fails with a message saying so rather
//     than running it wrongly.
//  4. Dynamic shared memory is exactly the launch's bytes, ending at an
//     inaccessible page and filled with 0xff (NaN as float and bf16) before
//     every block, so reading past it faults and reading it before writing
//     it gives NaN.
//
// Fibers switch with a few instructions of assembly on x86-64 (no system
// call, unlike swapcontext); other hosts fall back to <ucontext.h>.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_SIM_SIMKERNELRUNTIME_H
#define KILN_TEST_SIM_SIMKERNELRUNTIME_H

#define KILN_HOST_THREAD_LOCAL
#include "CudaHostIntrinsics.h"

#include <algorithm>
#include <map>
#include <random>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// ---- fibers ----------------------------------------------------------------

#if defined(__x86_64__)
// kiln_sim_switch(&from, to): saves the callee-saved registers on the current
// stack, stores its pointer in *from, loads `to` and pops that fiber's.
extern "C" void kiln_sim_switch(void **from, void *to);
asm(R"(
.text
.p2align 4
.globl kiln_sim_switch
.hidden kiln_sim_switch
.type kiln_sim_switch,@function
kiln_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size kiln_sim_switch, .-kiln_sim_switch
)");
#endif

struct KilnFiber {
  unsigned int tid = 0;
  bool done = false;
  unsigned char *stack = nullptr;
#if defined(__x86_64__)
  void *sp = nullptr;
#else
  ucontext_t context;
#endif
};

constexpr size_t kKilnFiberStackBytes = 256 * 1024; // wmma tiles are 1 KiB each

inline std::vector<KilnFiber> kiln_fibers;
inline KilnFiber *kiln_current_fiber = nullptr; // null: the fast path
#if defined(__x86_64__)
inline void *kiln_scheduler_sp = nullptr;
#else
inline ucontext_t kiln_scheduler_context;
#endif
inline void (*kiln_current_kernel)(void *const *) = nullptr;
inline void *const *kiln_current_buffers = nullptr;
inline unsigned long long kiln_progress = 0;      // arrivals, releases, exits
inline unsigned long long kiln_cooperative_calls = 0;
inline const char *kiln_launch_error = nullptr;

inline void kiln_fiber_yield() {
  KilnFiber *f = kiln_current_fiber;
#if defined(__x86_64__)
  kiln_sim_switch(&f->sp, kiln_scheduler_sp);
#else
  swapcontext(&f->context, &kiln_scheduler_context);
#endif
}

// ---- barriers --------------------------------------------------------------

// A barrier over a block or a warp whose party shrinks as threads exit.
struct KilnFiberBarrier {
  int count = 0, arrived = 0;
  unsigned long long generation = 0;
  void reset(int parties) {
    count = parties;
    arrived = 0;
  }
  void release() {
    arrived = 0;
    ++generation;
    ++kiln_progress;
  }
  void wait() {
    ++kiln_cooperative_calls;
    if (!kiln_current_fiber) {
      // A kernel classified as barrier-free reached a barrier: stop the
      // launch (the thread cannot be suspended on the fast path).
      kiln_launch_error = "a kernel that reached no barrier in its first launch "
                          "reached one later (set KILN_SIM_ALWAYS_FIBERS=1)";
      return;
    }
    unsigned long long gen = generation;
    ++kiln_progress;
    if (++arrived == count) {
      release();
      return;
    }
    while (gen == generation)
      kiln_fiber_yield();
  }
  void leave() {
    --count;
    if (arrived > 0 && arrived == count)
      release();
  }
};

inline KilnFiberBarrier kiln_block_barrier;
inline KilnFiberBarrier kiln_warp_barriers[32];

inline void kiln_block_sync() { kiln_block_barrier.wait(); }
inline void kiln_warp_sync(unsigned int warp) { kiln_warp_barriers[warp].wait(); }

// ---- dynamic shared memory -------------------------------------------------

// Set per launch: `dynamicShared` bytes (rounded up to 32) that end at a
// PROT_NONE page.
inline unsigned char *kiln_emulated_dynamic_shared = nullptr;

struct KilnSharedArena {
  unsigned char *base = nullptr;
  size_t mapped = 0;
  size_t page = 0;
  // The region of `bytes` bytes before the guard page.
  unsigned char *region(size_t bytes) {
    if (page == 0)
      page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t rounded = (bytes + 31) / 32 * 32;
    size_t usable = (rounded + page - 1) / page * page;
    if (usable + page > mapped) {
      if (base)
        munmap(base, mapped);
      mapped = usable + page;
      void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        base = nullptr;
        mapped = 0;
        return nullptr;
      }
      base = static_cast<unsigned char *>(p);
      mprotect(base + mapped - page, page, PROT_NONE);
    }
    return base + mapped - page - rounded;
  }
};
inline KilnSharedArena kiln_shared_arena;

// ---- one block -------------------------------------------------------------

inline void kiln_thread_exits(unsigned int tid) {
  kiln_warp_barriers[tid / 32].leave();
  kiln_block_barrier.leave();
  ++kiln_progress;
}

extern "C" inline void kiln_fiber_main() {
  KilnFiber *f = kiln_current_fiber;
  kiln_current_kernel(kiln_current_buffers);
  kiln_thread_exits(f->tid);
  f->done = true;
  for (;;)
    kiln_fiber_yield(); // never resumed once done
}

// Runs one block as fibers; false on a deadlock.
inline bool kiln_run_block_as_fibers(unsigned int block) {
  if (kiln_fibers.size() < block)
    kiln_fibers.resize(block);
  for (unsigned int t = 0; t < block; ++t) {
    KilnFiber &f = kiln_fibers[t];
    f.tid = t;
    f.done = false;
    if (!f.stack) {
      void *p = mmap(nullptr, kKilnFiberStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        kiln_launch_error = "cannot map a fiber stack";
        return false;
      }
      f.stack = static_cast<unsigned char *>(p);
    }
#if defined(__x86_64__)
    // A frame kiln_sim_switch pops: six callee-saved registers (zero), then
    // the return address kiln_fiber_main, entered with rsp = 8 mod 16 as
    // after a call.
    uintptr_t top = reinterpret_cast<uintptr_t>(f.stack + kKilnFiberStackBytes) & ~uintptr_t(15);
    void **frame = reinterpret_cast<void **>(top) - 8;
    for (int i = 0; i < 6; ++i)
      frame[i] = nullptr;
    frame[6] = reinterpret_cast<void *>(&kiln_fiber_main);
    frame[7] = nullptr;
    f.sp = frame;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kKilnFiberStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, kiln_fiber_main, 0);
#endif
  }
  unsigned int live = block;
  while (live > 0) {
    unsigned long long before = kiln_progress;
    for (unsigned int t = 0; t < block; ++t) {
      KilnFiber &f = kiln_fibers[t];
      if (f.done)
        continue;
      kiln_current_fiber = &f;
      threadIdx.x = t;
#if defined(__x86_64__)
      kiln_sim_switch(&kiln_scheduler_sp, f.sp);
#else
      swapcontext(&kiln_scheduler_context, &f.context);
#endif
      if (f.done)
        --live;
    }
    kiln_current_fiber = nullptr;
    if (live > 0 && kiln_progress == before) {
      kiln_launch_error = "deadlock: every live thread of a block waits at a barrier "
                          "that cannot release (a __syncthreads or shuffle under a "
                          "condition not every thread takes?)";
      return false;
    }
  }
  return true;
}

inline void kiln_reset_barriers(unsigned int block) {
  kiln_block_barrier.reset(static_cast<int>(block));
  for (unsigned int w = 0; w * 32 < block; ++w)
    kiln_warp_barriers[w].reset(static_cast<int>(std::min(32u, block - 32 * w)));
}

// Per kernel: unknown until its first launch ran, then barrier-free or not.
enum class KilnKernelKind { kUnknown, kPlain, kCooperative };
inline std::map<void (*)(void *const *), KilnKernelKind> kiln_kernel_kinds;

// kernel<<<grid, block, dynamicShared>>>(buffers) with blocks in the order of
// a permutation drawn from `seed`. 0 on success, else 1 with `error` set.
extern "C" __attribute__((visibility("default"))) int
kiln_sim_launch(void (*kernel)(void *const *), void *const *buffers, unsigned int grid,
                unsigned int block, unsigned int dynamicShared, unsigned long long seed,
                int alwaysFibers, char *error, size_t errorBytes) {
  kiln_launch_error = nullptr;
  gridDim.x = grid;
  blockDim.x = block;
  kiln_current_kernel = kernel;
  kiln_current_buffers = buffers;
  unsigned char *shared = kiln_shared_arena.region(dynamicShared);
  if (!shared) {
    snprintf(error, errorBytes, "cannot map %u bytes of dynamic shared memory", dynamicShared);
    return 1;
  }
  kiln_emulated_dynamic_shared = shared;
  std::vector<unsigned int> order(grid);
  for (unsigned int b = 0; b < grid; ++b)
    order[b] = b;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  KilnKernelKind &kind = kiln_kernel_kinds[kernel];
  // A kernel's first launch runs every block as fibers; it is barrier-free
  // only if no block of it reached a barrier (blocks may have different
  // roles: layer_norm_grad's row blocks synchronize, its column blocks do
  // not, so one block says nothing about the others).
  const unsigned long long callsBefore = kiln_cooperative_calls;
  for (unsigned int b : order) {
    blockIdx.x = b;
    memset(shared, 0xff, (dynamicShared + 31) / 32 * 32);
    kiln_reset_barriers(block);
    if (kind == KilnKernelKind::kPlain && !alwaysFibers) {
      for (unsigned int t = 0; t < block && !kiln_launch_error; ++t) {
        threadIdx.x = t;
        kernel(buffers);
      }
    } else {
      kiln_run_block_as_fibers(block);
    }
    if (kiln_launch_error) {
      snprintf(error, errorBytes, "block %u of %u: %s", b, grid, kiln_launch_error);
      return 1;
    }
  }
  if (kind == KilnKernelKind::kUnknown)
    kind = kiln_cooperative_calls == callsBefore ? KilnKernelKind::kPlain
                                                 : KilnKernelKind::kCooperative;
  return 0;
}

#endif // KILN_TEST_SIM_SIMKERNELRUNTIME_H
