//===- CudaKernelEmitter.cpp - CUDA kernels for groups of kiln ops --------===//
//
// Pointwise groups become one grid-stride loop over the output, with the same
// per-element statements as the CPU loop (PointwiseBody):
//
//   for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N;
//        i += gridDim.x * blockDim.x) {      (int64_t past 2^31 elements)
//     const float v0 = <load or broadcast load of an input>;
//     const float v1 = <ScalarExprEmitter expression of op 1 over v0 ...>;
//     out0[i] = v1;
//   }
//
// launched with 256-thread blocks and at most kCudaMaxGrid blocks. Every
// other op gets a bespoke kernel from CudaBespokeKernels.cpp /
// CudaRowKernels.cpp / CudaOptimizerKernels.cpp. The other kiln.fusion kinds, as on the CPU:
//   - row: the row op's kernel with the pointwise prologue and epilogue
//     written into its row loop (RowGroup, CudaRowFusion): one block (or
//     warp) per row computes the prologue's elements of its row, stores the
//     ones the group yields or the row op reads, syncs, runs the row op,
//     syncs, and applies the epilogue to the row it just produced;
//   - optimizer: one launch updating every parameter of the group, each on
//     a segment of the grid (emitMultiTensorUpdateCudaKernel).
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaKernelEmitter.h"

#include "codegen/CudaAttentionKernels.h"

#include "codegen/CudaBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

uint32_t cudaGridFor(int64_t items, uint32_t perBlock, uint32_t maxGrid) {
  int64_t blocks = (items + perBlock - 1) / perBlock;
  return static_cast<uint32_t>(
      std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(maxGrid)));
}

uint32_t cudaRowThreads(int64_t columns) {
  // Up to 256 threads; a row wider than 8192 (a vocabulary's logits) gets
  // up to 1024, so that the few rows of a launch still keep enough loads in
  // flight.
  int64_t warps = (columns + 31) / 32;
  if (columns > 8192)
    return static_cast<uint32_t>(32 * std::min<int64_t>(32, (columns + 511) / 512));
  return static_cast<uint32_t>(32 * std::clamp<int64_t>(warps, 1, 8));
}

void openGridStrideLoop(KernelSourceWriter &w, int64_t n, StringRef index,
                        bool index32) {
  std::string i = index.str();
  if (index32) {
    w.open("for (int " + i + " = (int)(blockIdx.x * blockDim.x + threadIdx.x); " +
           i + " < " + std::to_string(n) + "; " + i +
           " += (int)(gridDim.x * blockDim.x))");
    return;
  }
  w.open("for (int64_t " + i +
         " = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; " + i + " < " +
         std::to_string(n) + "; " + i + " += (int64_t)gridDim.x * blockDim.x)");
}

bool indexFitsInt32(const KernelGroup &group) {
  auto fits = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() &&
           type.getNumElements() < (int64_t(1) << 31);
  };
  return llvm::all_of(group.inputs, fits) && llvm::all_of(group.outputs, fits);
}

namespace {

CudaKernel withLaunch(CpuKernel kernel, CudaLaunch launch) {
  return {std::move(kernel.entry), std::move(kernel.source),
          std::move(kernel.ops), launch, std::move(kernel.scratch)};
}

// Elements a thread of a lane-staged pointwise kernel moves per iteration:
// 16 bytes of bf16, 32 of f32.
constexpr int64_t kPointwiseLanes = 8;

// The most bytes a thread of a lane-staged kernel holds in its register
// copies (96 registers): a group of many buffers (the parameters' bf16
// converts, 48 in one kernel) would spill; it has loads enough in flight
// with one element per thread anyway.
constexpr int64_t kMaxStagedBytes = 384;

// Whether a lane-staged body can move every buffer it reads plainly or
// writes in whole runs of kPointwiseLanes elements: the element count a
// multiple of it, every such element 2 to 8 bytes (a run is then a
// multiple of 16 bytes, and 16-byte aligned: buffers start on
// kArenaAlignment; one-byte bools keep the per-element loop), and the
// copies within kMaxStagedBytes.
bool canStageLanes(const KernelGroup &group, const PointwiseBody &body) {
  if (body.elements % kPointwiseLanes != 0)
    return false;
  int64_t staged = 0;
  auto wide = [&](Value v) {
    std::string type = cElementType(cast<RankedTensorType>(v.getType()).getElementType());
    int64_t bytes = type == "uint16_t"                      ? 2
                    : type == "float" || type == "int32_t" ? 4
                    : type == "int64_t"                     ? 8
                                                            : 0;
    staged += bytes * kPointwiseLanes;
    return bytes != 0;
  };
  return llvm::all_of(body.plainInputs, wide) && llvm::all_of(group.outputs, wide) &&
         staged <= kMaxStagedBytes;
}

// A pointwise body's loop over its `n` elements, one element per thread
// (index `i`) or, with `lanes`, kPointwiseLanes consecutive elements per
// thread: its plain inputs loaded whole into registers (kiln_lanes8,
// 16-byte vector loads), the statements run on each lane (j), and the
// outputs in `outputs` stored whole by closeElementLoop. A bf16 kernel with
// one element per thread issues 2-byte loads, which keep too few bytes in
// flight to reach the memory bandwidth; the lanes give each load 16.
struct ElementLoop {
  bool lanes = false, index32 = false;
  int64_t items = 0; // threads' work items: elements, or runs of lanes
};

ElementLoop openElementLoop(KernelSourceWriter &w, const PointwiseBody &body,
                            ArrayRef<Value> outputs, bool lanes, bool index32) {
  const int64_t n = body.elements;
  const std::string per = std::to_string(kPointwiseLanes);
  ElementLoop loop{lanes, index32, lanes ? n / kPointwiseLanes : n};
  w.line("// " + std::to_string(n) + " elements" +
         (lanes ? ", " + per + " consecutive per thread" : "") + ", grid-stride" +
         (index32 ? ", 32-bit index" : ""));
  if (!lanes) {
    openGridStrideLoop(w, n, "i", index32);
    return loop;
  }
  const std::string index = index32 ? "int" : "int64_t";
  openGridStrideLoop(w, loop.items, "q", index32);
  w.line("const " + index + " i0 = q * " + per + ";");
  for (Value v : body.plainInputs)
    w.line("const kiln_lanes8<" + w.cType(v) + "> " + PointwiseBody::laneCopy(w.ptr(v)) +
           " = kiln_load_lanes8(" + w.ptr(v) + " + i0);");
  for (Value v : outputs)
    w.line("kiln_lanes8<" + w.cType(v) + "> " + PointwiseBody::laneCopy(w.ptr(v)) + ";");
  w.open("KILN_UNROLL for (int j = 0; j < " + per + "; ++j)");
  if (body.usesIndex)
    w.line("const " + index + " i = i0 + j;");
  return loop;
}

void closeElementLoop(KernelSourceWriter &w, const ElementLoop &loop,
                      ArrayRef<Value> outputs) {
  w.close();
  if (!loop.lanes)
    return;
  for (Value v : outputs)
    w.line("kiln_store_lanes8(" + w.ptr(v) + " + i0, " + PointwiseBody::laneCopy(w.ptr(v)) +
           ");");
  w.close();
}

// 32-bit index arithmetic where every buffer allows it: the coordinates of
// broadcasts and transposes are divisions by constants, several times
// cheaper in 32 bits than in 64 on the GPU. n < 2^30 keeps the last stride
// (at most kCudaMaxGrid * kCudaBlock = 2^19 threads) below 2^31.
bool elementIndex32(const KernelGroup &group, int64_t n) {
  return n < (int64_t(1) << 30) && indexFitsInt32(group);
}

// The body of `group` (pointwise ops, then for a "sum" group its
// whole-tensor reduce_sum) staged in lanes where canStageLanes allows, one
// element per thread otherwise, over `w`'s buffers (declared here).
FailureOr<PointwiseBody> buildElementBody(const KernelGroup &group,
                                          KernelSourceWriter &w, bool sum,
                                          bool &lanes) {
  if (failed(w.declareBuffers()))
    return failure();
  auto build = [&](StringRef lane) {
    return sum ? PointwiseBody::buildSum(group, w, "i", lane)
               : PointwiseBody::build(group, w, "i", lane);
  };
  FailureOr<PointwiseBody> body = build("j");
  if (failed(body))
    return failure();
  lanes = canStageLanes(group, *body);
  return lanes ? body : build("");
}

// One grid-stride loop over the output, one scalar expression per op, in
// lanes where the buffers allow (openElementLoop).
FailureOr<CudaKernel> emitPointwiseGroup(const KernelGroup &group) {
  KernelSourceWriter w(group, KernelTarget::Cuda);
  bool lanes = false;
  FailureOr<PointwiseBody> body = buildElementBody(group, w, /*sum=*/false, lanes);
  if (failed(body))
    return failure();
  ElementLoop loop = openElementLoop(w, *body, group.outputs, lanes,
                                     elementIndex32(group, body->elements));
  for (const std::string &statement : body->statements)
    w.line(statement);
  for (const std::string &store : body->stores)
    w.line(store);
  closeElementLoop(w, loop, group.outputs);
  return withLaunch(w.finish(kCudaBlock),
                    {cudaGridFor(loop.items, kCudaBlock), kCudaBlock, 0});
}

// kiln.fusion sum: the element loop (openElementLoop) computing each element
// and adding it to the thread's total, in element order, then the block
// sums and the last block's sum of them, as the CUDA whole-tensor
// kiln.reduce_sum (beginGridTotal / endGridTotal).
FailureOr<CudaKernel> emitMultiSumGroup(const KernelGroup &group,
                                        ArrayRef<KernelGroup> chains);

FailureOr<CudaKernel> emitSumGroup(const KernelGroup &group) {
  SmallVector<KernelGroup> chains = PointwiseBody::sumChains(group);
  if (chains.size() > 1)
    return emitMultiSumGroup(group, chains);
  KernelSourceWriter w(group, KernelTarget::Cuda);
  bool lanes = false;
  FailureOr<PointwiseBody> body = buildElementBody(group, w, /*sum=*/true, lanes);
  if (failed(body))
    return failure();
  SmallVector<Value> stored;
  for (Value out : group.outputs)
    if (out != body->total)
      stored.push_back(out);
  CudaLaunch launch;
  w.line("// " + std::to_string(body->elements) + " elements summed as they are computed");
  beginGridTotal(w, launch, lanes ? body->elements / kPointwiseLanes : body->elements);
  ElementLoop loop = openElementLoop(w, *body, stored, lanes,
                                     elementIndex32(group, body->elements));
  for (const std::string &statement : body->statements)
    w.line(statement);
  for (const std::string &store : body->stores)
    w.line(store);
  w.line("acc += " + body->summand + ";");
  closeElementLoop(w, loop, stored);
  endGridTotal(w, launch, w.ptr(body->total));
  return withLaunch(w.finish(launch.block), launch);
}

// Several whole-tensor sums of kernel inputs (the global norm's sum of each
// gradient's squares) in one launch, each on a segment of the grid: the
// table holds, per chain, { first block, blocks, loop items, formula,
// buffers[total, inputs...] }; a block finds its row by binary search and
// runs the body of its formula (one `case` per distinct chain text, named
// over the chain's own in<k>), with exactly the blocks, loop and order of
// the chain's own kernel (emitSumGroup): the same bits.
FailureOr<CudaKernel> emitMultiSumGroup(const KernelGroup &group,
                                        ArrayRef<KernelGroup> chains) {
  // No pointers at function scope: each case declares its chain's own.
  KernelSourceWriter w(group, KernelTarget::Cuda);
  auto bufferIndex = [&](Value v) -> int64_t {
    auto in = llvm::find(group.inputs, v);
    if (in != group.inputs.end())
      return in - group.inputs.begin();
    auto out = llvm::find(group.outputs, v);
    return out == group.outputs.end()
               ? -1
               : int64_t(group.inputs.size() + (out - group.outputs.begin()));
  };
  struct Formula {
    std::string key;
    const KernelGroup *chain;
    PointwiseBody body;
    bool lanes;
  };
  std::vector<Formula> formulas;
  SmallVector<std::string> rows;
  size_t maxSlots = 0;
  uint32_t blocks = 0;
  for (const KernelGroup &chain : chains) {
    // The chain's text over its own buffer names (in0, in1, ..., out0).
    KernelSourceWriter own(chain, KernelTarget::Cuda);
    bool lanes = false;
    FailureOr<PointwiseBody> body = buildElementBody(chain, own, /*sum=*/true, lanes);
    if (failed(body))
      return failure();
    if (chain.outputs.size() != 1 || chain.outputs.front() != body->total)
      return chain.ops.front()->emitError()
             << "a multi-tensor sum kernel writes each chain's total only";
    std::string key = lanes ? "lanes\n" : "elements\n";
    for (const std::string &statement : body->statements)
      key += statement + "\n";
    key += "acc += " + body->summand + ";";
    size_t formula = llvm::find_if(formulas, [&](const Formula &f) { return f.key == key; }) -
                     formulas.begin();
    if (formula == formulas.size())
      formulas.push_back({key, &chain, *body, lanes});
    int64_t items = lanes ? body->elements / kPointwiseLanes : body->elements;
    uint32_t count = cudaGridFor(items, kCudaBlock);
    std::string row = "{" + std::to_string(blocks) + "u, " + std::to_string(count) + "u, " +
                      std::to_string(items) + "u, " + std::to_string(formula) + "u, " +
                      std::to_string(bufferIndex(body->total)) + "u";
    for (Value v : chain.inputs) {
      int64_t index = bufferIndex(v);
      if (index < 0)
        return chain.ops.front()->emitError()
               << "reads a value that is no buffer of the multi-tensor sum kernel";
      row += ", " + std::to_string(index) + "u";
    }
    maxSlots = std::max(maxSlots, chain.inputs.size() + 1);
    rows.push_back(row + "}");
    blocks += count;
  }
  std::string partial = (kEntryPlaceholder + "_partial").str();
  std::string done = (kEntryPlaceholder + "_done").str();
  w.global("__device__ float " + partial + "[" + std::to_string(blocks) + "];");
  w.global("__device__ unsigned int " + done + "[" + std::to_string(rows.size()) + "];");
  emitSegmentLookup(w, rows, 4 + maxSlots,
                    std::to_string(chains.size()) + " whole-tensor sums in one launch",
                    "first block, blocks, loop items, formula, buffers: total, inputs");
  w.line("const unsigned int first = row[0], count = row[1];");
  w.line("const int64_t items = row[2];");
  w.line("const int64_t block = (int64_t)blockIdx.x - first;");
  w.line("float acc = 0.0f;");
  w.open("switch (row[3])");
  for (auto [index, f] : llvm::enumerate(formulas)) {
    w.open("case " + std::to_string(index) + ":");
    for (auto [k, v] : llvm::enumerate(f.chain->inputs))
      w.line("const " + w.cType(v) + "* in" + std::to_string(k) + " = (const " + w.cType(v) +
             "*)buffers[row[" + std::to_string(5 + k) + "]];");
    std::string loop = "for (int64_t q = block * blockDim.x + threadIdx.x; q < items; "
                       "q += (int64_t)count * blockDim.x)";
    w.open(loop);
    if (f.lanes) {
      w.line("const int64_t i0 = q * " + std::to_string(kPointwiseLanes) + ";");
      for (Value v : f.body.plainInputs) {
        std::string name = "in" + std::to_string(llvm::find(f.chain->inputs, v) -
                                                 f.chain->inputs.begin());
        w.line("const kiln_lanes8<" + w.cType(v) + "> " + PointwiseBody::laneCopy(name) +
               " = kiln_load_lanes8(" + name + " + i0);");
      }
      w.open("KILN_UNROLL for (int j = 0; j < " + std::to_string(kPointwiseLanes) + "; ++j)");
      if (f.body.usesIndex)
        w.line("const int64_t i = i0 + j;");
    } else {
      w.line("const int64_t i = q;");
    }
    for (const std::string &statement : f.body.statements)
      w.line(statement);
    w.line("acc += " + f.body.summand + ";");
    if (f.lanes)
      w.close();
    w.close();
    w.line("break;");
    w.close();
  }
  w.close();
  w.line("acc = kiln_block_sum(acc);");
  w.line("if (threadIdx.x == 0) " + partial + "[blockIdx.x] = acc;");
  w.line("if (!kiln_last_of(&" + done + "[lo], count)) return;");
  w.line("float total = 0.0f;");
  w.line("for (unsigned int b = threadIdx.x; b < count; b += blockDim.x) total += __ldcg(&" +
         partial + "[first + b]);");
  w.line("total = kiln_block_sum(total);");
  w.line("if (threadIdx.x == 0) ((float*)buffers[row[4]])[0] = total;");
  CudaLaunch launch{blocks, kCudaBlock, 0};
  return withLaunch(w.finish(launch.block), launch);
}

// A row op with its pointwise prologue and epilogue (RowGroup) as one row
// kernel: the row op's emitter writes them into its row loop
// (CudaRowFusion), with the launch of the row op alone.
FailureOr<CudaKernel> emitRowGroup(const KernelGroup &group) {
  FailureOr<RowGroup> parts = RowGroup::split(group);
  if (failed(parts))
    return failure();
  CudaRowFusion rows{&group, std::move(*parts)};
  KernelSourceWriter w(group, KernelTarget::Cuda);
  CudaLaunch launch;
  if (failed(w.declareBuffers()) ||
      failed(emitBespokeCudaKernel(rows.parts.rowOp, w, launch, &rows)))
    return failure();
  if (!rows.began || (!rows.parts.epilogue.empty() && !rows.ended))
    return rows.parts.rowOp->emitError()
           << "has no CUDA row loop to fuse a prologue or epilogue into";
  return withLaunch(w.finish(launch.block), launch);
}

// Several optimizer updates (a kiln.fusion optimizer) in one launch, each
// on a segment of the grid.
FailureOr<CudaKernel> emitOptimizerGroup(const KernelGroup &group) {
  KernelSourceWriter w(group, KernelTarget::Cuda);
  CudaLaunch launch;
  if (failed(emitMultiTensorUpdateCudaKernel(group, w, launch)))
    return failure();
  return withLaunch(w.finish(launch.block), launch);
}

} // namespace

bool CudaKernelEmitter::supports(Operation *op) {
  return PointwiseBody::isPointwise(op) || hasBespokeCudaKernel(op);
}

FailureOr<CudaKernel> CudaKernelEmitter::emit(const KernelGroup &group,
                                              int64_t attentionSharedBudget) {
  if (group.ops.empty())
    return failure();
  for (Operation *op : group.ops)
    if (!supports(op))
      return op->emitError() << "codegen has no CUDA kernel for '"
                             << op->getName() << "'";
  if (llvm::all_of(group.ops, PointwiseBody::isPointwise))
    return emitPointwiseGroup(group);
  if (group.ops.size() > 1 && llvm::all_of(group.ops, hasOptimizerCudaKernel))
    return emitOptimizerGroup(group);
  if (PointwiseBody::isSumGroup(group))
    return emitSumGroup(group);
  if (group.ops.size() > 1)
    return emitRowGroup(group);
  KernelSourceWriter w(group, KernelTarget::Cuda);
  CudaLaunch launch;
  if (failed(w.declareBuffers()))
    return failure();
  Operation *op = group.ops.front();
  if (hasAttentionCudaKernel(op)) {
    if (failed(emitAttentionCudaKernel(op, w, launch,
                                       attentionSharedBudget < 0
                                           ? defaultAttentionSharedBudget()
                                           : attentionSharedBudget)))
      return failure();
  } else if (failed(emitBespokeCudaKernel(op, w, launch))) {
    return failure();
  }
  return withLaunch(w.finish(launch.block), launch);
}

FailureOr<CudaKernel> CudaKernelEmitter::emitCopy(RankedTensorType type) {
  std::string t = cElementType(type.getElementType());
  if (t.empty() || !type.hasStaticShape())
    return failure();
  int64_t n = numElements(type.getShape());
  std::string ns = std::to_string(n);
  std::string text =
      "// copy of " + shapeString(type.getShape()) + " " + t + "\n" +
      "extern \"C\" __global__ void " + kEntryPlaceholder.str() +
      "(void* const* __restrict__ buffers) {\n" + "  const " + t +
      "* src = (const " + t + "*)buffers[0];\n" + "  " + t + "* dst = (" + t +
      "*)buffers[1];\n" +
      "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
      "i < " + ns + "; i += (int64_t)gridDim.x * blockDim.x)\n" +
      "    dst[i] = src[i];\n}\n";
  return withLaunch(nameKernel(std::move(text), "copy", "copy"),
                    {cudaGridFor(n, kCudaBlock), kCudaBlock, 0});
}

const std::vector<std::string> &supportedCudaArchs() {
  // Ampere and newer: what CUDA 13's NVRTC compiles and what the kernels
  // (warp shuffles, 48 KiB static shared memory) are written for.
  static const std::vector<std::string> archs = {
      "sm_80", "sm_86", "sm_87", "sm_89", "sm_90",
      "sm_90a", "sm_100", "sm_100a", "sm_120"};
  return archs;
}

const char *CudaKernelEmitter::prelude() {
  return R"(// Kiln generated CUDA kernels. Shared prelude (compiled by NVRTC, which has
// no system headers: fixed-width types and float constants are defined here;
// nvcc, given a dumped kernel, has them from the system's headers).
#ifdef __CUDACC_RTC__
typedef int int32_t;
typedef long long int64_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#include <cmath>
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

// bf16 as raw bits (uint16_t), as on the CPU: f32 -> bf16 rounds to
// nearest even and makes any NaN the canonical NaN 0x7fff, the rule of
// sm_80's cvt.rn.bf16.f32. That is one instruction where the bit arithmetic
// below (older GPUs, the host emulation) takes a dozen, and a bf16 kernel
// that rounds a few values an element is bound by those integer ops rather
// than by memory (SwiGLU's backward rounds three). bf16 -> f32 is exact.
__device__ __forceinline__ uint16_t kiln_f32_to_bf16(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
#else
  unsigned int bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)0x7fffu;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
#endif
}

__device__ __forceinline__ float kiln_bf16_to_f32(uint16_t h) {
  return __uint_as_float(((unsigned int)h) << 16);
}

// 16 bytes from `src` to `dst`, both 16-byte aligned, as one vector load and
// store (the host emulation defines its own).
#ifndef KILN_HOST_EMULATION
__device__ __forceinline__ void kiln_copy16(void* dst, const void* src) {
  *(uint4*)dst = *(const uint4*)src;
}
#endif

// `v` exactly as a store and a reload would give it: the compiler cannot
// contract the operation that made it with the next one into an FMA (a row
// op's result handed to its fused epilogue in a register). The host
// emulation defines its own.
#ifndef KILN_HOST_EMULATION
__device__ __forceinline__ float kiln_no_contract(float v) {
  asm("" : "+f"(v));
  return v;
}
#endif

// A fully unrolled loop (the host emulation defines it empty).
#ifndef KILN_UNROLL
#define KILN_UNROLL _Pragma("unroll")
#endif

// Eight consecutive elements of a buffer held in registers, loaded and
// stored whole (16-byte aligned: one vector access per 16 bytes), so a
// bandwidth-bound kernel moves bf16 16 bytes at a time instead of 2. The
// host emulation defines the loads and stores with memcpy.
template <typename T> struct alignas(16) kiln_lanes8 {
  T v[8];
};
#ifndef KILN_HOST_EMULATION
template <typename T>
__device__ __forceinline__ kiln_lanes8<T> kiln_load_lanes8(const T* p) {
  return *(const kiln_lanes8<T>*)p;
}
template <typename T>
__device__ __forceinline__ void kiln_store_lanes8(T* p, const kiln_lanes8<T>& x) {
  *(kiln_lanes8<T>*)p = x;
}
#endif

// GPT-2's GELU: 0.5 x (1 + tanh(s (x + c x^3))), s = sqrt(2/pi), c = 0.044715.
__device__ __forceinline__ float kiln_gelu(float x) {
  const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// d/dx gelu(x) * g = (0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2)) * g.
__device__ __forceinline__ float kiln_gelu_grad(float x, float g) {
  const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return (0.5f * (1.0f + t) +
          0.5f * x * (1.0f - t * t) * 0.7978845608028654f *
              (1.0f + 3.0f * 0.044715f * x * x)) * g;
}

// Butterfly reductions over a full warp: every lane ends with the same bits
// (each step adds the same two values on both partners), so the result does
// not depend on the lane that reads it.
__device__ __forceinline__ float kiln_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double kiln_warp_sum_double(double v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float kiln_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reductions over the whole block (blockDim.x a multiple of 32, at most
// 1024; every thread must call): warp results in shared memory, then one
// warp-level pass over them in warp order. Every thread gets the result. The
// first barrier lets a previous call's readers finish with the shared slots.
__device__ __forceinline__ float kiln_block_sum(float v) {
  __shared__ float kiln_sum_slots[32];
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = kiln_warp_sum(v);
  __syncthreads();
  if (lane == 0)
    kiln_sum_slots[warp] = v;
  __syncthreads();
  return kiln_warp_sum(lane < (blockDim.x >> 5) ? kiln_sum_slots[lane] : 0.0f);
}
__device__ __forceinline__ double kiln_block_sum_double(double v) {
  __shared__ double kiln_sum_slots_double[32];
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = kiln_warp_sum_double(v);
  __syncthreads();
  if (lane == 0)
    kiln_sum_slots_double[warp] = v;
  __syncthreads();
  return kiln_warp_sum_double(
      lane < (blockDim.x >> 5) ? kiln_sum_slots_double[lane] : 0.0);
}
__device__ __forceinline__ float kiln_block_max(float v) {
  __shared__ float kiln_max_slots[32];
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = kiln_warp_max(v);
  __syncthreads();
  if (lane == 0)
    kiln_max_slots[warp] = v;
  __syncthreads();
  return kiln_warp_max(lane < (blockDim.x >> 5) ? kiln_max_slots[lane]
                                                : -INFINITY);
}

// Online softmax statistics (one pass instead of a max pass and a sum
// pass): each thread keeps the running max m of the values it has seen and
// s = sum exp(x - m), rescaling s when m grows; -INFINITY values add
// nothing. kiln_block_max_sum combines the threads' pairs: the block's max
// M and sum exp(x - M) (every thread must call it; every thread gets both).
struct KilnMaxSum {
  float max, sum;
};
__device__ __forceinline__ void kiln_online_add(float x, float &m, float &s) {
  if (x > m) {
    s = s * expf(m - x) + 1.0f;
    m = x;
  } else if (x != -INFINITY) {
    s += expf(x - m);
  }
}
// Eight values at once (a run of a row): their max first, so the sum is
// rescaled at most once and each value costs a max, a subtraction, an exp
// and an add; kiln_online_add's compare and branch per value made the
// cross-entropy kernels bound by issue rather than by their 2 bytes a bf16
// logit. -INFINITY values add exp(-inf) = 0. A NaN still makes the sum NaN:
// fmaxf leaves it out of the max, the sum adds its exp; m stays -INFINITY
// only while every value seen is -inf or NaN, and those are taken from 0
// then (exp 0 and NaN), not from -inf (NaN for every -inf).
__device__ __forceinline__ void kiln_online_add8(const float (&x)[8], float &m, float &s) {
  float r = x[0];
  KILN_UNROLL for (int j = 1; j < 8; ++j)
    r = fmaxf(r, x[j]);
  if (r > m) {
    s = s * expf(m - r);
    m = r;
  }
  const float from = m == -INFINITY ? 0.0f : m;
  KILN_UNROLL for (int j = 0; j < 8; ++j)
    s += expf(x[j] - from);
}
// A thread whose max is -INFINITY has summed only -inf (0) or a NaN (NaN):
// its sum goes in as it is, so the NaN is not lost.
__device__ __forceinline__ KilnMaxSum kiln_block_max_sum(float m, float s) {
  const float M = kiln_block_max(m);
  const float scaled = m == -INFINITY ? s : s * expf(m - M);
  return {M, kiln_block_sum(scaled)};
}

// Whole-grid reductions without floating-point atomics: each block stores
// its partial result in a per-kernel __device__ array, then calls this. It
// returns true (in every thread) only in the block that finished last, which
// then reads all partials (with __ldcg, past the L1 cache) and combines them
// in block order: the same bits whatever order the blocks ran in. The integer
// counter is reset for the next launch (calls of one kernel must not overlap,
// which holds on the step's single stream).
// kiln_last_of is the same over a segment of `blocks` blocks with a counter
// of its own (multi-tensor kernels: one segment per parameter).
__device__ __forceinline__ bool kiln_last_of(unsigned int *done,
                                             unsigned int blocks) {
  __shared__ bool kiln_is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    kiln_is_last = atomicAdd(done, 1u) == blocks - 1;
    if (kiln_is_last)
      *done = 0u;
  }
  __syncthreads();
  return kiln_is_last;
}
__device__ __forceinline__ bool kiln_last_block(unsigned int *done) {
  return kiln_last_of(done, gridDim.x);
}
)";
}

} // namespace kiln
