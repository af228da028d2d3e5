//===- CudaAttentionKernels.cpp - Flash attention forward for CUDA --------===//
//
// The tile machinery of the shared-memory kernels (this forward and the
// backward's fallback in CudaAttentionBackward.cpp) and the fp32 forward of
// kiln.attention. bf16 forwards take CudaAttentionMma.cpp's kernel, whose
// tile products never leave the registers; the steps below are the same
// there.
//
// Forward (fp32): one block of 128 threads (4 warps) per (b, h, tile of Br query
// rows), grid B * H * ceil(T / Br):
//  1. Load the Q tile [Br, Dp] into shared memory (D zero padded to a
//     multiple of 16, rows past T zero); O accumulator [Br, Dvp] (fp32,
//     shared) = 0, running max m = -inf and sum l = 0 per row.
//  2. For each key tile of Bc keys:
//     a. Skip test: every thread evaluates the mask on its share of the
//        Br x Bc pairs; if the block keeps none (__syncthreads_or), the tile
//        is skipped before K/V are loaded. Testing every pair (instead of the
//        corners of a monotone mask) works for any mask region; the mask is a
//        few integer ops per pair, cheap next to the D-long dot products.
//     b. Load K [Bc, Dp] and V [Bc, Dvp] (keys past S zero).
//     c. S = Q K^T [Br, Bc] in fp32 (tensor cores for bf16: wmma 16x16x16
//        with fp32 accumulation; fp32 inputs on CUDA cores, d in order).
//     d. One warp per row: score = score_region(scale * S) where the mask
//        keeps (i, j) and both are in range, else -inf; the row's max by a
//        warp reduction; corr = exp(m_old - m_new); p = exp(score - m_new)
//        (stored as bf16 for the tensor-core product, in place for fp32);
//        l = l corr + sum p; the warp rescales its O row by corr.
//        With dropout the stored p is p z (z = keep / (1 - p_drop) from
//        codegen/PhiloxRandom.inc at (b*H+h, i, j)); l sums p.
//     e. O += P V.
//  3. out = O / l, lse = m + log l; a row with no kept key (l = 0) gets
//     out = 0, lse = -inf.
//
// Tile sizes: Br, Bc in {64, 32, 16}, the largest pair whose shared memory
// fits the artifact's budget (attentionSharedBudget: the smallest opt-in
// shared memory of its archs; head dim 256 in fp32 gets 32 x 32 at 163 KiB).
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaAttentionKernels.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"
#include "runtime/schema/CudaSharedMemory.h"

#include <algorithm>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {
namespace cuda_attention {

std::string str(int64_t v) { return std::to_string(v); }

void lines(KernelSourceWriter &w, ArrayRef<std::string> text) {
  for (const std::string &l : text)
    w.line(l);
}

int64_t roundUp16(int64_t v) { return (v + 15) / 16 * 16; }

FailureOr<PlannedTiles>
chooseTiles(Operation *op, const Dims &n, StringRef pass, int64_t sharedBudget,
            function_ref<SharedLayout(const TilePlan &)> layoutOf,
            ArrayRef<std::pair<int64_t, int64_t>> tiles) {
  PlannedTiles t;
  t.plan.bf16 = cast<RankedTensorType>(op->getOperand(0).getType())
                    .getElementType()
                    .isBF16();
  t.plan.Dp = roundUp16(n.D);
  t.plan.Dvp = roundUp16(n.Dv);
  for (bool dkvInWorkspace : {false, true}) {
    if (dkvInWorkspace && pass != "backward")
      break;
    t.plan.dkvInWorkspace = dkvInWorkspace;
    for (auto [br, bc] : tiles) {
      t.plan.Br = br;
      t.plan.Bc = bc;
      t.layout = layoutOf(t.plan);
      if (t.layout.size() <= sharedBudget)
        return t;
    }
  }
  return op->emitError() << "the CUDA attention " << pass << " needs "
                         << t.layout.size() << " bytes of shared memory for "
                         << "head dims " << n.D << "/" << n.Dv
                         << " (the target archs allow " << sharedBudget
                         << " dynamic bytes)";
}

int64_t SharedLayout::add(const std::string &name, const std::string &type,
                          int64_t count, int64_t bytes) {
  int64_t offset = (end + 31) / 32 * 32;
  regions.push_back({name, type, offset});
  end = offset + count * bytes;
  peak = std::max(peak, end);
  return offset;
}

void SharedLayout::declare(KernelSourceWriter &w) const {
  for (const Region &r : regions)
    w.line(r.type + "* " + r.name + " = (" + r.type + "*)(smem + " +
           str(r.offset) + ");");
}

void declareDynamicShared(KernelSourceWriter &w) {
  w.line("#ifdef KILN_HOST_EMULATION");
  w.line("unsigned char* smem = kiln_emulated_dynamic_shared;");
  w.line("#else");
  w.line("extern __shared__ __align__(32) unsigned char kiln_attention_smem[];");
  w.line("unsigned char* smem = kiln_attention_smem;");
  w.line("#endif");
}

void includeWmma(KernelSourceWriter &w) {
  w.global("#ifndef KILN_HOST_EMULATION");
  w.global("#include <cuda_bf16.h>");
  w.global("#include <mma.h>");
  w.global("#endif");
}

void emitLoadTile(KernelSourceWriter &w, const TilePlan &plan,
                  const std::string &dst, const std::string &src,
                  const std::string &base, int64_t rowStride,
                  const std::string &row0, int64_t limit, int64_t rows,
                  int64_t cols, int64_t colsPadded) {
  w.open("for (int e = threadIdx.x; e < " + str(rows * colsPadded) +
         "; e += " + str(kThreads) + ")");
  w.line("const int r = e / " + str(colsPadded) + ", c = e % " +
         str(colsPadded) + ";");
  w.line("const int64_t row = " + row0 + " + r;");
  w.line(dst + "[e] = row < " + str(limit) + " && c < " + str(cols) + " ? " +
         src + "[" + base + " + row * " + str(rowStride) + " + c] : (" +
         plan.elem() + ")0;");
  w.close();
}

namespace {

std::string elementAt(const TileOperand &m, const std::string &r,
                      const std::string &c) {
  return m.colMajor ? "(" + c + ") * " + str(m.ld) + " + " + r
                    : "(" + r + ") * " + str(m.ld) + " + " + c;
}

} // namespace

void emitTileMatmul(KernelSourceWriter &w, const TilePlan &plan, int64_t M,
                    int64_t N, int64_t K, const TileOperand &a,
                    const TileOperand &b, const std::string &c,
                    bool accumulate) {
  if (!plan.bf16) {
    // fp32: one thread per output element, k in order (as the CPU kernel).
    w.open("for (int e = threadIdx.x; e < " + str(M * N) + "; e += " +
           str(kThreads) + ")");
    w.line("const int m = e / " + str(N) + ", n = e % " + str(N) + ";");
    w.line(std::string("float sum = ") + (accumulate ? c + "[e]" : "0.0f") +
           ";");
    w.line("for (int kk = 0; kk < " + str(K) + "; ++kk) sum += " + a.base +
           "[" + elementAt(a, "m", "kk") + "] * " + b.base + "[" +
           elementAt(b, "kk", "n") + "];");
    w.line(c + "[e] = sum;");
    w.close();
    return;
  }
  // bf16: 16x16 output tiles round-robin over the warps, fp32 accumulation.
  int64_t tilesN = N / 16;
  w.open("for (int t = threadIdx.x >> 5; t < " + str((M / 16) * tilesN) +
         "; t += " + str(kWarps) + ")");
  w.line("const int tm = (t / " + str(tilesN) + ") * 16, tn = (t % " +
         str(tilesN) + ") * 16;");
  w.line("nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, "
         "float> acc;");
  if (accumulate)
    w.line("nvcuda::wmma::load_matrix_sync(acc, " + c + " + tm * " + str(N) +
           " + tn, " + str(N) + ", nvcuda::wmma::mem_row_major);");
  else
    w.line("nvcuda::wmma::fill_fragment(acc, 0.0f);");
  w.open("for (int kk = 0; kk < " + str(K) + "; kk += 16)");
  auto frag = [&](const char *use, const char *name, const TileOperand &m,
                  const std::string &r, const std::string &col) {
    w.line(std::string("nvcuda::wmma::fragment<nvcuda::wmma::") + use +
           ", 16, 16, 16, __nv_bfloat16, nvcuda::wmma::" +
           (m.colMajor ? "col_major" : "row_major") + "> " + name + ";");
    w.line(std::string("nvcuda::wmma::load_matrix_sync(") + name +
           ", (const __nv_bfloat16*)(" + m.base + " + " +
           elementAt(m, r, col) + "), " + str(m.ld) + ");");
  };
  frag("matrix_a", "fa", a, "tm", "kk");
  frag("matrix_b", "fb", b, "kk", "tn");
  w.line("nvcuda::wmma::mma_sync(acc, fa, fb, acc);");
  w.close();
  w.line("nvcuda::wmma::store_matrix_sync(" + c + " + tm * " + str(N) +
         " + tn, acc, " + str(N) + ", nvcuda::wmma::mem_row_major);");
  w.close();
}

LogicalResult emitMaskTest(KernelSourceWriter &w, Operation *op, Region &mask,
                           const AttentionRegionInputs &in,
                           const std::string &tileAllKept) {
  if (mask.empty()) {
    w.line("kept = 1;");
    return success();
  }
  AttentionRegionEmitter emitter(mask, "mk_");
  FailureOr<SmallVector<std::string>> text = emitter.emitForward(in, "keep");
  if (failed(text))
    return op->emitError() << "cannot emit the mask region of the CUDA "
                              "attention kernel";
  if (!tileAllKept.empty())
    w.line("if (" + tileAllKept + ") kept = 1; else");
  w.open("");
  lines(w, *text);
  w.line("kept = keep;");
  w.close();
  return success();
}

namespace {
// The score region's statements: per pair, and free of s, i and j.
LogicalResult scoreStatements(k::AttentionOp op, const AttentionRegionInputs &in,
                              SmallVector<std::string> &pair,
                              SmallVector<std::string> &invariant) {
  AttentionRegionEmitter score(op.getScore(), "sc_");
  FailureOr<SmallVector<std::string>> text =
      score.emitForwardHoisted(in, "score", invariant);
  if (failed(text))
    return op->emitError() << "cannot emit the score region of the CUDA "
                              "attention kernel";
  pair = std::move(*text);
  return success();
}
} // namespace

LogicalResult emitScore(KernelSourceWriter &w, k::AttentionOp op,
                        const AttentionRegionInputs &in,
                        const std::string &product) {
  w.line("const float s = " +
         ScalarExprEmitter::floatLiteral(op.getScale().convertToDouble()) +
         " * " + product + ";");
  w.line("(void)s; // read only by some score regions");
  if (op.getScore().empty()) {
    w.line("const float score = s;");
    return success();
  }
  SmallVector<std::string> pair, invariant;
  if (failed(scoreStatements(op, in, pair, invariant)))
    return failure();
  lines(w, pair);
  return success();
}

LogicalResult emitScoreInvariants(KernelSourceWriter &w, k::AttentionOp op,
                                  const AttentionRegionInputs &in) {
  if (op.getScore().empty())
    return success();
  SmallVector<std::string> pair, invariant;
  if (failed(scoreStatements(op, in, pair, invariant)))
    return failure();
  writeScoreInvariants(w, invariant);
  return success();
}

void writeScoreInvariants(KernelSourceWriter &w, ArrayRef<std::string> invariant) {
  if (invariant.empty())
    return;
  w.line("// the score's terms that are the same for every pair of (b, h)");
  for (const std::string &line : invariant)
    w.line(line);
}

LogicalResult emitBlockSkip(KernelSourceWriter &w, Operation *op,
                            Region &mask, const AttentionRegionInputs &in,
                            const Dims &n, int64_t rows, int64_t cols,
                            const std::string &onSkip,
                            const std::string &tileAllKept) {
  if (!blockSkipSyncs(mask))
    return success();
  const bool all = !tileAllKept.empty();
  if (std::optional<SmallVector<LinearMaskTest>> tests = linearMaskTests(mask)) {
    // Every thread decides the same from the tile's corners. The barrier
    // stays, as the pair-by-pair test's __syncthreads_or was one: a kernel
    // whose every tile is skipped reads, after its loop, shared memory that
    // other threads wrote before it (the fp32 backward's zeroed dK and dV).
    // The two-stage pipelines count on it too (TilePipeline::findKeptSyncs):
    // it orders a tile's reads of a stage before the next issue into it.
    w.line("// skip the tile when the mask keeps none of its pairs, decided "
           "at the tile's corners (a conjunction of tests linear in i, j)");
    w.line("int anyKept = 1, allKept = 1;");
    w.open("");
    w.line("const int64_t iLast = (i0 + " + str(rows) + " < " + str(n.T) +
           " ? i0 + " + str(rows) + " : " + str(n.T) + ") - 1;");
    w.line("const int64_t jLast = (j0 + " + str(cols) + " < " + str(n.S) +
           " ? j0 + " + str(cols) + " : " + str(n.S) + ") - 1;");
    for (const LinearMaskTest &test : *tests) {
      AttentionRegionEmitter emitter(mask, "mk_");
      FailureOr<SmallVector<std::string>> text =
          emitter.emitValue(in, test.test, "holds");
      if (failed(text))
        return op->emitError() << "cannot emit the mask region of the CUDA "
                                  "attention kernel";
      w.open("");
      w.line("int corners = 0; // of the 4 where this test holds");
      w.open("for (int corner = 0; corner < 4; ++corner)");
      w.line("const int64_t " + in.i + " = corner & 1 ? iLast : i0, " + in.j +
             " = corner & 2 ? jLast : j0;");
      w.line("(void)" + in.i + "; (void)" + in.j + "; // a test may read one");
      lines(w, *text);
      w.line("corners += holds;");
      w.close();
      if (test.failsIfAtCorners)
        w.line("anyKept &= corners > 0;");
      w.line(test.holdsIfAtCorners ? "allKept &= corners == 4;"
                                   : "allKept = 0;");
      w.close();
    }
    w.close();
    w.line("__syncthreads();");
    w.line("if (!anyKept) " + onSkip);
    if (all)
      w.line("const int " + tileAllKept + " = allKept;");
    else
      w.line("(void)allKept;");
    return success();
  }
  w.line("// skip the tile when the mask keeps none of its pairs");
  w.line(all ? "int anyKept = 0, allKept = 1;" : "int anyKept = 0;");
  w.open("for (int e = threadIdx.x; e < " + str(rows * cols) + "; e += " +
         str(kThreads) + ")");
  w.line("const int64_t i = i0 + e / " + str(cols) + ", j = j0 + e % " +
         str(cols) + ";");
  w.line("if (i >= " + str(n.T) + " || j >= " + str(n.S) + ") continue;");
  w.line("int kept = 0;");
  if (failed(emitMaskTest(w, op, mask, in)))
    return failure();
  w.line("anyKept |= kept;");
  if (all)
    w.line("allKept &= kept;");
  w.close();
  w.line("if (!__syncthreads_or(anyKept)) " + onSkip);
  if (all)
    w.line("const int " + tileAllKept + " = __syncthreads_and(allKept);");
  return success();
}

// The shared memory of the forward for tiles Br x Bc.
SharedLayout forwardLayout(const TilePlan &p) {
  SharedLayout l;
  int64_t e = p.elemBytes();
  l.add("sQ", p.elem(), p.Br * p.Dp, e);
  l.add("sK", p.elem(), p.Bc * p.Dp, e);
  l.add("sV", p.elem(), p.Bc * p.Dvp, e);
  l.add("sS", "float", p.Br * p.Bc, 4);
  if (p.bf16)
    l.add("sP", "uint16_t", p.Br * p.Bc, 2);
  l.add("sO", "float", p.Br * p.Dvp, 4);
  l.add("sM", "float", p.Br, 4);
  l.add("sL", "float", p.Br, 4);
  return l;
}

LogicalResult emitForward(Operation *operation, KernelSourceWriter &w,
                          CudaLaunch &launch, int64_t sharedBudget) {
  auto op = cast<k::AttentionOp>(operation);
  if (cast<RankedTensorType>(op.getQ().getType()).getElementType().isBF16())
    return emitForwardMma(op, w, launch, sharedBudget);
  Dims n = dimsOf(op);
  FailureOr<PlannedTiles> tiles =
      chooseTiles(op, n, "forward", sharedBudget, forwardLayout);
  if (failed(tiles))
    return failure();
  const TilePlan &p = tiles->plan;
  const SharedLayout &layout = tiles->layout;
  int64_t qTiles = (n.T + p.Br - 1) / p.Br;
  launch = {static_cast<uint32_t>(n.B * n.H * qTiles),
            static_cast<uint32_t>(kThreads),
            static_cast<uint32_t>(layout.size())};
  if (p.bf16)
    includeWmma(w);

  AttentionRegionInputs in = attentionLoopInputs(w, op.getCaptures());
  Value q = op.getQ(), k = op.getK(), v = op.getV();
  Value out = op.getOut(), lse = op.getLse();
  AttentionDropout drop = emitAttentionDropout(
      w, op.getDropoutProbability(), op.getRngState(), "cuda");
  w.line("// flash attention forward: q [" + str(n.B) + ", " + str(n.H) +
         ", " + str(n.T) + ", " + str(n.D) + "], k/v [" + str(n.B) + ", " +
         str(n.KVH) + ", " + str(n.S) + ", " + str(n.D) + "/" + str(n.Dv) +
         "], " + str(n.G) + " query heads per kv head; tiles " + str(p.Br) +
         " x " + str(p.Bc) + (p.bf16 ? ", bf16 tensor cores" : ", fp32") +
         ", " + str(layout.size()) + " shared bytes");
  declareDynamicShared(w);
  layout.declare(w);
  w.line("const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;");
  w.line("const int64_t bh = blockIdx.x / " + str(qTiles) + ";");
  w.line("const int64_t b = bh / " + str(n.H) + ", h = bh % " + str(n.H) +
         ", kvh = h / " + str(n.G) + ";");
  w.line("const int64_t i0 = (blockIdx.x % " + str(qTiles) + ") * " +
         str(p.Br) + ";");
  if (failed(emitScoreInvariants(w, op, in)))
    return failure();
  emitLoadTile(w, p, "sQ", w.ptr(q), n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D), "i0", n.T,
               p.Br, n.D, p.Dp);
  w.line("for (int e = threadIdx.x; e < " + str(p.Br * p.Dvp) + "; e += " +
         str(kThreads) + ") sO[e] = 0.0f;");
  w.open("for (int r = threadIdx.x; r < " + str(p.Br) + "; r += " +
         str(kThreads) + ")");
  w.line("sM[r] = -INFINITY;");
  w.line("sL[r] = 0.0f;");
  w.close();
  w.line("__syncthreads();");

  w.open("for (int64_t j0 = 0; j0 < " + str(n.S) + "; j0 += " + str(p.Bc) +
         ")");
  if (failed(emitBlockSkip(w, op, op.getMask(), in, n, p.Br, p.Bc,
                           "continue;")))
    return failure();
  emitLoadTile(w, p, "sK", w.ptr(k), n.headOffset(true, "b", "kvh", n.D), n.rowStride(true, n.D), "j0", n.S, p.Bc,
               n.D, p.Dp);
  emitLoadTile(w, p, "sV", w.ptr(v), n.headOffset(true, "b", "kvh", n.Dv), n.rowStride(true, n.Dv), "j0", n.S,
               p.Bc, n.Dv, p.Dvp);
  w.line("__syncthreads();");
  w.line("// S = Q K^T [" + str(p.Br) + ", " + str(p.Bc) + "]");
  emitTileMatmul(w, p, p.Br, p.Bc, p.Dp, {"sQ", false, p.Dp},
                 {"sK", true, p.Dp}, "sS", /*accumulate=*/false);
  w.line("__syncthreads();");

  w.line("// online softmax, one warp per row");
  w.open("for (int r = warp; r < " + str(p.Br) + "; r += " + str(kWarps) +
         ")");
  w.line("const int64_t i = i0 + r;");
  w.line("const float mOld = sM[r];");
  w.line("float rowMax = -INFINITY;");
  w.open("for (int c = lane; c < " + str(p.Bc) + "; c += 32)");
  w.line("const int64_t j = j0 + c;");
  w.line("float val = -INFINITY;");
  w.open("if (i < " + str(n.T) + " && j < " + str(n.S) + ")");
  w.line("int kept = 0;");
  if (failed(emitMaskTest(w, op, op.getMask(), in)))
    return failure();
  w.open("if (kept)");
  if (failed(emitScore(w, op, in, "sS[r * " + str(p.Bc) + " + c]")))
    return failure();
  w.line("val = score;");
  w.close();
  w.close();
  w.line("sS[r * " + str(p.Bc) + " + c] = val;");
  w.line("rowMax = fmaxf(rowMax, val);");
  w.close();
  w.line("rowMax = kiln_warp_max(rowMax);");
  w.line("const float mNew = fmaxf(mOld, rowMax);");
  w.line("// no kept key so far: p = 0 and nothing to rescale");
  w.line("const float corr = mNew == -INFINITY ? 1.0f : expf(mOld - mNew);");
  w.line("float rowSum = 0.0f;");
  w.open("for (int c = lane; c < " + str(p.Bc) + "; c += 32)");
  w.line("const float val = sS[r * " + str(p.Bc) + " + c];");
  w.line("const float pv = val == -INFINITY ? 0.0f : expf(val - mNew);");
  w.line("rowSum += pv;");
  // Dropout (the same Philox draw as the CPU kernel and the backward)
  // weights v by p z; l and lse sum every p.
  std::string weight = "pv";
  if (drop.enabled) {
    w.line("const float pvd = pv > 0.0f ? pv * " +
           drop.factor("bh", "i", "j0 + c") + " : 0.0f;");
    weight = "pvd";
  }
  w.line(p.bf16 ? "sP[r * " + str(p.Bc) + " + c] = kiln_f32_to_bf16(" +
                      weight + ");"
                : "sS[r * " + str(p.Bc) + " + c] = " + weight + ";");
  w.close();
  w.line("rowSum = kiln_warp_sum(rowSum);");
  w.line("for (int d = lane; d < " + str(p.Dvp) + "; d += 32) sO[r * " +
         str(p.Dvp) + " + d] *= corr;");
  w.open("if (lane == 0)");
  w.line("sL[r] = sL[r] * corr + rowSum;");
  w.line("sM[r] = mNew;");
  w.close();
  w.close(); // rows
  w.line("__syncthreads();");
  w.line("// O += P V [" + str(p.Br) + ", " + str(p.Dvp) + "]");
  emitTileMatmul(w, p, p.Br, p.Dvp, p.Bc, {p.bf16 ? "sP" : "sS", false, p.Bc},
                 {"sV", false, p.Dvp}, "sO", /*accumulate=*/true);
  w.line("__syncthreads();");
  w.close(); // key tiles

  w.line("// out = O / l; rows with no kept key: out = 0, lse = -inf");
  w.open("for (int e = threadIdx.x; e < " + str(p.Br * n.Dv) + "; e += " +
         str(kThreads) + ")");
  w.line("const int r = e / " + str(n.Dv) + ", d = e % " + str(n.Dv) + ";");
  w.line("if (i0 + r >= " + str(n.T) + ") continue;");
  w.line("const float l = sL[r];");
  w.line("const float o = l > 0.0f ? sO[r * " + str(p.Dvp) +
         " + d] / l : 0.0f;");
  std::string idx = n.rowOffset(false, "b", "h", "i0 + r", n.Dv) + " + d";
  w.line(w.ptr(out) + "[" + idx + "] = " +
         (p.bf16 ? "kiln_f32_to_bf16(o);" : "o;"));
  w.close();
  w.open("for (int r = threadIdx.x; r < " + str(p.Br) + "; r += " +
         str(kThreads) + ")");
  w.line("if (i0 + r >= " + str(n.T) + ") continue;");
  w.line(w.ptr(lse) + "[bh * " + str(n.T) +
         " + i0 + r] = sL[r] > 0.0f ? sM[r] + logf(sL[r]) : -INFINITY;");
  w.close();
  return success();
}

} // namespace cuda_attention

bool hasAttentionCudaKernel(Operation *op) {
  return isa<k::AttentionOp, k::AttentionGradOp>(op);
}

int64_t attentionSharedBudget(const std::vector<std::string> &archs) {
  if (archs.empty()) // no archs named: kilnc's default ones
    return defaultAttentionSharedBudget();
  int64_t limit = INT64_MAX;
  for (const std::string &arch : archs)
    limit = std::min(limit, schema::cudaMaxSharedBytesPerBlock(arch));
  return limit - cuda_attention::kStaticSharedReserve;
}

int64_t defaultAttentionSharedBudget() {
  return std::min(schema::cudaMaxSharedBytesPerBlock("sm_80"),
                  schema::cudaMaxSharedBytesPerBlock("sm_90a")) -
         cuda_attention::kStaticSharedReserve;
}

LogicalResult emitAttentionCudaKernel(Operation *op, KernelSourceWriter &w,
                                      CudaLaunch &launch,
                                      int64_t sharedBudget) {
  if (isa<k::AttentionOp>(op))
    return cuda_attention::emitForward(op, w, launch, sharedBudget);
  return cuda_attention::emitBackward(op, w, launch, sharedBudget);
}

} // namespace kiln
