//===- CudaHostIntrinsics.h - CUDA device built-ins for host-compiled kernels ===//
//
// Test-only. What a generated CUDA kernel source needs to compile with the
// host C++ compiler: __global__/__device__ vanish, __shared__ becomes a
// static (one block runs at a time, so a static is that block's shared
// memory), __constant__ a plain global; threadIdx / blockIdx / blockDim /
// gridDim (x only: Kiln launches 1-D grids of 1-D blocks); the bit casts,
// atomics and loads the kernels use; stand-ins for the nvcuda::wmma subset
// and the mma.sync helpers of the bf16 attention kernels; and the barriers and warp shuffles, written
// over two hooks the including scheduler defines:
//   void kiln_block_sync();            every live thread of the block
//   void kiln_warp_sync(unsigned warp); every live lane of warp `warp`
// Two schedulers include this: test/unit/codegen/CudaHostEmulation.h (a
// host thread per CUDA thread, for the kernel unit tests) and
// test/sim/SimKernelRuntime.h (fibers on one host thread, for the device
// simulator that runs whole artifacts).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_SIM_CUDAHOSTINTRINSICS_H
#define KILN_TEST_SIM_CUDAHOSTINTRINSICS_H

#include <atomic>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

// Kernels test this to take the emulation's stand-ins (dynamic shared
// memory, nvcuda::wmma) instead of CUDA headers.
#define KILN_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__

struct KilnDim3 {
  unsigned int x = 0;
};
// Per host thread in the threaded emulation; the simulator runs every CUDA
// thread on one host thread and defines this empty (no TLS lookup per use).
#ifndef KILN_HOST_THREAD_LOCAL
#define KILN_HOST_THREAD_LOCAL thread_local
#endif
inline KILN_HOST_THREAD_LOCAL KilnDim3 threadIdx, blockIdx;
inline KilnDim3 blockDim, gridDim;

// The GPU faults on a vector access (16-byte loads and stores, ldmatrix
// rows, cp.async; WMMA loads and stores need 32 bytes) at an address that is
// not a multiple of its alignment; the host does not. The memory check (tools/gpu/emulated_sanitizer.py --tool
// memcheck, KILN_MEMCHECK) stops there and says where.
inline void kiln_expect_aligned(const void *p, unsigned long alignment, const char *what) {
#ifdef KILN_MEMCHECK
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    fprintf(stderr, "kiln memcheck: misaligned %s at %p (needs %lu-byte alignment), thread %u of block %u\n",
            what, p, alignment, threadIdx.x, blockIdx.x);
    abort();
  }
#else
  (void)p, (void)alignment, (void)what;
#endif
}

// Defined by the scheduler that includes this header (see the banner).
inline void kiln_block_sync();
inline void kiln_warp_sync(unsigned int warp);

inline void __syncthreads() { kiln_block_sync(); }
inline void __syncwarp(unsigned int = 0xffffffffu) { kiln_warp_sync(threadIdx.x / 32); }

// __syncthreads_or: a barrier, then every thread reads whether any thread's
// predicate was non-zero. The counter is reset by the first thread through a
// second barrier, after everyone has read it.
inline std::atomic<int> kiln_syncthreads_or_count{0};
inline int __syncthreads_or(int predicate) {
  if (predicate)
    kiln_syncthreads_or_count.fetch_add(1);
  kiln_block_sync();
  int any = kiln_syncthreads_or_count.load() != 0;
  kiln_block_sync();
  if (threadIdx.x == 0)
    kiln_syncthreads_or_count.store(0);
  kiln_block_sync();
  return any;
}

// __syncthreads_and: the same with the count of zero predicates.
inline std::atomic<int> kiln_syncthreads_and_zeros{0};
inline int __syncthreads_and(int predicate) {
  if (!predicate)
    kiln_syncthreads_and_zeros.fetch_add(1);
  kiln_block_sync();
  int all = kiln_syncthreads_and_zeros.load() == 0;
  kiln_block_sync();
  if (threadIdx.x == 0)
    kiln_syncthreads_and_zeros.store(0);
  kiln_block_sync();
  return all;
}

// A test-only stand-in for the 16x16x16 subset of nvcuda::wmma the attention
// kernels use (bf16 or float inputs, float accumulator). On the GPU a
// fragment is spread over the warp's lanes in an unspecified layout; here
// every lane holds the whole 16x16 tile (the kernels never index fragment
// elements, so the layout is invisible). Loads and products are computed by
// every lane alike; a store is written by lane 0 only, so a kernel that reads
// a stored tile without a barrier first reads stale data here as it would on
// the GPU. Products sum k in order in float, as the tensor cores' fp32
// accumulation does up to the order of the additions.
struct __nv_bfloat16 {
  uint16_t bits;
};
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 is emulated");
  float x[256]; // element (r, c) at x[r * 16 + c]
};

inline float kiln_wmma_to_float(float v) { return v; }
inline float kiln_wmma_to_float(__nv_bfloat16 v) {
  unsigned int bits = static_cast<unsigned int>(v.bits) << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// Each lane holds a whole fragment here, and lane 0 alone stores one. The
// *_sync operations wait for every lane of the warp first, as on the GPU (a
// lane's load of a tile that lane 0 then stores over is ordered before it).
template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm) {
  kiln_warp_sync(threadIdx.x / 32);
  kiln_expect_aligned(p, 32, "WMMA load");
  constexpr bool colMajor = std::is_same<Layout, col_major>::value;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] = kiln_wmma_to_float(colMajor ? p[c * ldm + r] : p[r * ldm + c]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                             unsigned ldm, layout_t layout) {
  kiln_warp_sync(threadIdx.x / 32);
  kiln_expect_aligned(p, 32, "WMMA load");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float value) {
  for (float &v : f.x)
    v = value;
}
template <class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  kiln_warp_sync(threadIdx.x / 32);
  float out[256];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float sum = c.x[m * 16 + n];
      for (int k = 0; k < 16; ++k)
        sum += a.x[m * 16 + k] * b.x[k * 16 + n];
      out[m * 16 + n] = sum;
    }
  memcpy(d.x, out, sizeof out);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout) {
  kiln_warp_sync(threadIdx.x / 32);
  kiln_expect_aligned(p, 32, "WMMA store");
  if (threadIdx.x % 32 != 0)
    return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r * 16 + c];
}
} // namespace wmma
} // namespace nvcuda
// Test-only stand-ins for the mma.sync helpers of the bf16 attention
// kernels (codegen/CudaAttentionMma.cpp defines them for the GPU).
// kiln_mma_bf16 is warp-wide, as mma.sync.m16n8k16 is: every lane publishes
// its fragment registers, the warp meets, and each lane computes its four
// accumulator elements from the lanes that hold their operands, in the
// layout of the PTX ISA (A: lane 4 g + t holds rows g, g + 8 and columns
// 2t, 2t + 1, 2t + 8, 2t + 9 in registers a0 (g, 2t..), a1 (g + 8, 2t..),
// a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); B: b0 (k 2t, 2t + 1; n g),
// b1 (k 2t + 8, 2t + 9; n g); C: c0, c1 (g; 2t, 2t + 1), c2, c3 (g + 8);
// the low 16 bits hold the lower index). A kernel that indexes a fragment
// wrongly gets wrong numbers here as on the GPU. k is summed in order in
// float, as the tensor cores' fp32 accumulation does up to the order.
#define KILN_UNROLL
inline uint32_t kiln_mma_slots[1024][6];
inline float kiln_mma_half(uint32_t reg, int upper) {
  unsigned int bits = (upper ? reg >> 16 : reg & 0xffffu) << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
inline void kiln_mma_bf16(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
  const unsigned int t = threadIdx.x, warp = t / 32, lane = t % 32, first = warp * 32;
  for (int r = 0; r < 4; ++r)
    kiln_mma_slots[t][r] = a[r];
  kiln_mma_slots[t][4] = b0;
  kiln_mma_slots[t][5] = b1;
  kiln_warp_sync(warp);
  for (int e = 0; e < 4; ++e) {
    const unsigned int m = lane / 4 + (e >= 2 ? 8 : 0), n = (lane % 4) * 2 + (e & 1);
    float sum = d[e];
    for (unsigned int k = 0; k < 16; ++k) {
      const uint32_t *aLane = kiln_mma_slots[first + (m % 8) * 4 + (k % 8) / 2];
      const uint32_t *bLane = kiln_mma_slots[first + n * 4 + (k % 8) / 2];
      sum += kiln_mma_half(aLane[(m >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k & 1) *
             kiln_mma_half(bLane[4 + (k >= 8 ? 1 : 0)], k & 1);
    }
    d[e] = sum;
  }
  kiln_warp_sync(warp);
}
inline uint32_t kiln_ld_pair(const uint16_t *p) {
  kiln_expect_aligned(p, 4, "bf16 pair load");
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
struct kiln_chunk {
  uint32_t x, y, z, w;
};
inline kiln_chunk kiln_load_chunk(const uint16_t *p) {
  kiln_expect_aligned(p, 16, "16-byte load");
  kiln_chunk c;
  memcpy(&c, p, sizeof c);
  return c;
}
inline void kiln_store_chunk(uint16_t *p, kiln_chunk c) {
  kiln_expect_aligned(p, 16, "16-byte store");
  memcpy(p, &c, sizeof c);
}
// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16, warp-wide: lane l gives
// the address of row l % 8 of 8x8 matrix l / 8 (8 consecutive bf16), the
// warp meets, and lane 4 g + t receives in register m the elements (g, 2t)
// and (g, 2t + 1) of matrix m, or with .trans (2t, g) and (2t + 1, g); the
// lower index in the low 16 bits. A kernel that gives a wrong row address
// or reads a wrong register gets wrong numbers here as on the GPU.
inline const uint16_t *kiln_ldmatrix_rows[1024];
inline void kiln_ldmatrix_x4_impl(uint32_t *r, const uint16_t *row, bool trans) {
  const unsigned int t = threadIdx.x, warp = t / 32, lane = t % 32, first = warp * 32;
  const unsigned int g = lane / 4, q = lane % 4;
  kiln_expect_aligned(row, 16, "ldmatrix row");
  kiln_ldmatrix_rows[t] = row;
  kiln_warp_sync(warp);
  for (unsigned int m = 0; m < 4; ++m) {
    const uint16_t **rows = kiln_ldmatrix_rows + first + 8 * m;
    const uint16_t lo = trans ? rows[2 * q][g] : rows[g][2 * q];
    const uint16_t hi = trans ? rows[2 * q + 1][g] : rows[g][2 * q + 1];
    r[m] = uint32_t(lo) | uint32_t(hi) << 16;
  }
  kiln_warp_sync(warp);
}
inline void kiln_ldmatrix_x4(uint32_t *r, const uint16_t *row) {
  kiln_ldmatrix_x4_impl(r, row, false);
}
inline void kiln_ldmatrix_x4_trans(uint32_t *r, const uint16_t *row) {
  kiln_ldmatrix_x4_impl(r, row, true);
}

// cp.async (16 or 4 bytes, global to shared, the bytes past `bytes` zeroed),
// commit_group and wait_group, per thread. A copy lands in shared memory
// only when a wait_group retires its group, not when it is issued: a kernel
// that reads a tile before waiting for it (or, after its own wait, before
// the barrier that orders the other threads' waits) reads stale bytes here,
// as it may on the GPU. (The sources are inputs the kernel never writes, so
// reading them late reads the same bytes.)
struct KilnCpAsync {
  void *dst;
  const void *src;
  int bytes, size; // bytes read, bytes written (the rest zeroed)
};
inline KilnCpAsync kiln_cp_async_queue[1024][64]; // per thread, in issue order
inline int kiln_cp_async_issued[1024], kiln_cp_async_group_end[1024][8],
    kiln_cp_async_groups[1024];
inline void kiln_cp_async(void *dst, const void *src, int bytes, int size) {
  const unsigned int t = threadIdx.x;
  if (kiln_cp_async_issued[t] == 64 || kiln_cp_async_groups[t] == 8)
    abort(); // more in flight than this stand-in holds
  kiln_expect_aligned(dst, size, "cp.async destination");
  kiln_expect_aligned(src, size, "cp.async source");
  kiln_cp_async_queue[t][kiln_cp_async_issued[t]++] = {dst, src, bytes, size};
#ifdef KILN_RACECHECK
  // The race check (tools/gpu/emulated_sanitizer.py --tool racecheck, ThreadSanitizer) also
  // writes the bytes here, the earliest the GPU may land them: a thread still
  // reading the old bytes of the destination unordered with this issue is a
  // race, as one reading them unordered with the wait is.
  memcpy(dst, src, bytes);
  memset(static_cast<char *>(dst) + bytes, 0, size - bytes);
#endif
}
inline void kiln_cp_async16(void *dst, const void *src, int bytes) {
  kiln_cp_async(dst, src, bytes, 16);
}
inline void kiln_cp_async4(void *dst, const void *src, int bytes) {
  kiln_cp_async(dst, src, bytes, 4);
}
inline void kiln_cp_async_commit() {
  const unsigned int t = threadIdx.x;
  if (kiln_cp_async_groups[t] == 8)
    abort();
  kiln_cp_async_group_end[t][kiln_cp_async_groups[t]++] = kiln_cp_async_issued[t];
}
// Retires every committed group but the newest `pending`.
template <int pending> inline void kiln_cp_async_wait() {
  const unsigned int t = threadIdx.x;
  const int groups = kiln_cp_async_groups[t];
  if (groups <= pending)
    return;
  const int retire = kiln_cp_async_group_end[t][groups - pending - 1];
  for (int c = 0; c < retire; ++c) {
    const KilnCpAsync &copy = kiln_cp_async_queue[t][c];
    memcpy(copy.dst, copy.src, copy.bytes);
    memset(static_cast<char *>(copy.dst) + copy.bytes, 0, copy.size - copy.bytes);
  }
  // The groups left move to the front.
  const int left = kiln_cp_async_issued[t] - retire;
  for (int c = 0; c < left; ++c)
    kiln_cp_async_queue[t][c] = kiln_cp_async_queue[t][retire + c];
  for (int g = 0; g < pending; ++g)
    kiln_cp_async_group_end[t][g] = kiln_cp_async_group_end[t][groups - pending + g] - retire;
  kiln_cp_async_issued[t] = left;
  kiln_cp_async_groups[t] = pending;
}

// The prelude's kiln_no_contract (an empty asm on the GPU): a value the host
// compiler cannot contract into the next operation either.
inline float kiln_no_contract(float v) {
#if defined(__GNUC__) && defined(__x86_64__)
  __asm__("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#else
  volatile float stored = v;
  v = stored;
#endif
  return v;
}

// The prelude's kiln_copy16 (a uint4 load and store on the GPU).
inline void kiln_copy16(void *dst, const void *src) {
  kiln_expect_aligned(src, 16, "16-byte load");
  kiln_expect_aligned(dst, 16, "16-byte store");
  memcpy(dst, src, 16);
}
// The prelude's kiln_load_lanes8 / kiln_store_lanes8 (vector loads and
// stores of a kiln_lanes8 on the GPU; the struct is the prelude's).
template <typename T> struct kiln_lanes8;
template <typename T> inline kiln_lanes8<T> kiln_load_lanes8(const T *p) {
  kiln_expect_aligned(p, 16, "kiln_lanes8 load");
  kiln_lanes8<T> x;
  memcpy(&x, p, sizeof x);
  return x;
}
template <typename T> inline void kiln_store_lanes8(T *p, const kiln_lanes8<T> &x) {
  kiln_expect_aligned(p, 16, "kiln_lanes8 store");
  memcpy(p, &x, sizeof x);
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Every lane publishes its value, then reads its partner's (a double holds
// a float exactly).
inline double kiln_shuffle_slots[1024];
template <class T> T __shfl_xor_sync(unsigned int, T value, int laneMask) {
  unsigned int t = threadIdx.x, warp = t / 32;
  kiln_shuffle_slots[t] = value;
  kiln_warp_sync(warp);
  T other = static_cast<T>(kiln_shuffle_slots[t ^ static_cast<unsigned int>(laneMask)]);
  kiln_warp_sync(warp);
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

#endif // KILN_TEST_SIM_CUDAHOSTINTRINSICS_H
