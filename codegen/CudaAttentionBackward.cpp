//===- CudaAttentionBackward.cpp - Flash attention backward for CUDA ------===//
//
// The kernel of kiln.attention_grad: deterministic (no floating-point
// atomics; every sum in a fixed order) and launched once, its blocks in two
// roles so that no block writes an element another block writes. This file
// has the shared-memory version of the roles (every tile product through
// shared memory): fp32, and bf16 with head dims past 128; bf16 up to 128
// takes the register-resident roles of CudaAttentionBackwardMma.cpp, the
// same design with other tiles.
//
//  A. dK/dV: one block per (b, kv head, tile of Bc keys), grid
//     B * KVH * ceil(S / Bc). K and V tiles stay in shared memory, dK and dV
//     accumulate in shared fp32. For each query head of the group and each
//     tile of Br query rows (skipped when the mask keeps none of its pairs):
//     load Q, dO; D_i = dO_i . O_i and lse_i per row; S = Q K^T and
//     dP = dO V^T (tensor cores for bf16); per pair, where kept:
//     p = exp(score - lse_i), dS = p (dP - D_i) (with dropout, regenerating
//     the forward's z from codegen/PhiloxRandom.inc: dS = p (z dP - D_i),
//     and P holds p z for dV), and the score region's
//     reverse mode gives ds = dS dscore/ds; then dV += P^T dO and
//     dK += (scale ds)^T Q. dK, dV are written once at the end.
//  B. dQ: one block per (b, h, tile of Br query rows), grid
//     B * H * ceil(T / Br), walking the key tiles the same way and
//     accumulating dQ += (scale ds) K in shared fp32, written once.
//     Capture gradients: each role-B block adds dS dscore/dcapture into its
//     private slice (double, zeroed by the block first) of a workspace
//     [role-B blocks, partial elements], in orders fixed by the code:
//     a read whose element does not depend on j (slope[h], xy[b, i, 0]) is
//     summed by row r's thread over its pairs and key tiles and added once
//     at the end; one that depends on j only (xy[b, j, 0]) by column c's
//     thread per tile, the column sums then added together when their
//     elements differ, else one after another; any other read by thread 0
//     pair by pair (emitCapturePass). The block that finishes last
//     (kiln_last_block on a completion counter) sums the slices in block
//     order; with per-sample captures the last block of each sample sums
//     that sample's slices first, side by side (emitCaptureReduction).
//     TSP with learned coordinates, [32, 32, 1024, 64] on an H200: 2,167 ms
//     fwd+bwd with thread 0 walking every pair, 129.65 ms so.
//     A capture whose every read in the score indexes dim 0 with b (dim 0
//     of size B: xy[b, i, 0] in a TSP distance bias) can only get gradient
//     from blocks of that b, so a block keeps only its [b] sub-tensor and
//     the reduction sums only the H * qTiles blocks of that b; likewise
//     dim 0 indexed with h (size H: slope[h]) and the B * qTiles blocks of
//     that head. Without this the partials of a [B, T, 2] capture grow as
//     B^2 H T^2 and pass the workspace limit at benchmark sizes.
//
// D_i is recomputed by every block that needs it (instead of a separate
// kernel, because one op is one kernel in the artifact); it costs one more
// read of O per query tile.
//
// Scratch is in the memory plan, not in __device__ arrays: the slices are a
// Workspace argument after the outputs (live during this call only, on
// bytes the plan has free then) and the counter a WorkspaceCounter argument
// (persistent, 4 bytes). The counter is zeroed by the plan, not the kernel:
// the runtime zeroes the arena once when it allocates it, and
// kiln_last_block's last block resets the counter to 0 before it returns,
// so every launch (CUDA graph replays, accumulation steps) starts from 0.
// The kernel cannot zero it itself: no block knows it runs before the
// others finish.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaAttentionBackward.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {
namespace cuda_attention {

SharedLayout backwardLayout(const TilePlan &p) {
  SharedLayout l;
  int64_t e = p.elemBytes();
  l.add("sQ", p.elem(), p.Br * p.Dp, e);
  l.add("sdO", p.elem(), p.Br * p.Dvp, e);
  l.add("sK", p.elem(), p.Bc * p.Dp, e);
  l.add("sV", p.elem(), p.Bc * p.Dvp, e);
  l.add("sS", "float", p.Br * p.Bc, 4);
  l.add("sdP", "float", p.Br * p.Bc, 4); // dP, then dS (role B)
  l.add("sP", p.elem(), p.Br * p.Bc, e);
  l.add("sdS", p.elem(), p.Br * p.Bc, e); // scale * ds
  l.add("sLse", "float", p.Br, 4);
  l.add("sDi", "float", p.Br, 4);
  int64_t roles = l.mark();
  if (!p.dkvInWorkspace) {
    l.add("sdK", "float", p.Bc * p.Dp, 4); // role A
    l.add("sdV", "float", p.Bc * p.Dvp, 4);
  }
  l.rewind(roles);
  l.add("sdQ", "float", p.Br * p.Dp, 4); // role B
  return l;
}

namespace {

// Capture-gradient workspaces larger than this are refused (a [blocks,
// capture elements] array of doubles, planned scratch of the call).
constexpr int64_t kMaxWorkspaceBytes = int64_t(1) << 30;

std::string toFloat(const TilePlan &p, const std::string &e) {
  return p.bf16 ? "kiln_bf16_to_f32(" + e + ")" : e;
}
std::string fromFloat(const TilePlan &p, const std::string &e) {
  return p.bf16 ? "kiln_f32_to_bf16(" + e + ")" : e;
}


// The partial of capture `c` from its reads in the score region. Only the
// score's tensor.extracts get gradients (the mask yields an i1), so reads in
// the mask do not matter. A value of b or h computed by an op (b + 0) is
// not recognized: the capture keeps a whole partial, which is only larger.
CapturePartial capturePartial(k::AttentionGradOp op, unsigned c,
                              const Dims &n) {
  auto type = cast<RankedTensorType>(op.getCaptures()[c].getType());
  CapturePartial whole{CapturePartial::Whole, type.getNumElements()};
  Block *block = op.getScoreBlock();
  if (!block || type.getRank() == 0)
    return whole;
  // Score arguments: (s, b, h, i, j, captures...).
  BlockArgument arg = block->getArgument(5 + c);
  Value b = block->getArgument(1), h = block->getArgument(2);
  bool bySample = type.getDimSize(0) == n.B;
  bool byHead = type.getDimSize(0) == n.H;
  bool read = false;
  for (Operation *user : arg.getUsers()) {
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract)
      return whole;
    Value first = extract.getIndices()[0];
    bySample &= first == b;
    byHead &= first == h;
    read = true;
  }
  if (read && bySample)
    return {CapturePartial::PerSample, type.getNumElements() / n.B};
  if (read && byHead)
    return {CapturePartial::PerHead, type.getNumElements() / n.H};
  return whole;
}

} // namespace


namespace {
// A hook that evaluates a capture read's adjoint and drops it.
CaptureGradHook ignoreCaptureGrads() {
  return [](unsigned, const std::string &, const std::string &adjoint, unsigned) {
    return "(void)(" + adjoint + ");";
  };
}
} // namespace

LogicalResult
BackwardEmitter::scoreBackward(const CaptureGradHook &hook,
                               AttentionRegionEmitter::Backward &out,
                               SmallVector<std::string> *invariant) {
  if (op.getScore().empty()) {
    out.forward = {"const float score = s;"};
    out.reverse = {"const float ds = dS;"};
    return success();
  }
  AttentionRegionEmitter emitter(op.getScore(), "sc_");
  FailureOr<AttentionRegionEmitter::Backward> text =
      emitter.emitBackward(in, "score", "dS", "ds", hook, invariant);
  if (failed(text))
    return op->emitError() << "cannot differentiate the score region in the "
                              "CUDA attention kernel";
  out = std::move(*text);
  return success();
}

// lse_i and D_i = dO_i . O_i of the tile's rows (one warp per row); rows
// past T get lse = -inf, so every pair of theirs is skipped.
LogicalResult BackwardEmitter::emitRowStats(int64_t rows) {
  w.open("for (int r = threadIdx.x >> 5; r < " + str(rows) + "; r += " +
         str(kWarps) + ")");
  w.line("const int64_t row = bh * " + str(n.T) + " + i0 + r; // of lse");
  w.line("const int64_t oo = " + n.rowOffset(false, "b", "h", "i0 + r", n.Dv) +
         ";");
  w.line("float di = 0.0f;");
  w.line("if (i0 + r < " + str(n.T) + ") for (int d = threadIdx.x & 31; d < " +
         str(n.Dv) + "; d += 32) di += " +
         toFloat(p, w.ptr(op.getDout()) + "[oo + d]") + " * " +
         toFloat(p, w.ptr(op.getOut()) + "[oo + d]") + ";");
  w.line("di = kiln_warp_sum(di);");
  w.open("if ((threadIdx.x & 31) == 0)");
  w.line("sDi[r] = di;");
  w.line("sLse[r] = i0 + r < " + str(n.T) + " ? " + w.ptr(op.getLse()) + "[row]" +
         (lseBase2 ? " * " + std::string(kLog2eLiteral) : "") + " : -INFINITY;");
  w.close();
  w.close();
  return success();
}

// S = Q K^T and dP = dO V^T, both [Br, Bc].
LogicalResult BackwardEmitter::emitProducts() {
  w.line("// S = Q K^T, dP = dO V^T [" + str(p.Br) + ", " + str(p.Bc) + "]");
  emitTileMatmul(w, p, p.Br, p.Bc, p.Dp, {"sQ", false, p.Dp},
                 {"sK", true, p.Dp}, "sS", false);
  emitTileMatmul(w, p, p.Br, p.Bc, p.Dvp, {"sdO", false, p.Dvp},
                 {"sV", true, p.Dvp}, "sdP", false);
  return success();
}

LogicalResult BackwardEmitter::emitPairTerms(const std::string &sAcc,
                                             const std::string &dpAcc,
                                             const std::string &row,
                                             const std::string &tileAllKept) {
  AttentionRegionEmitter::Backward score;
  // Capture gradients are summed by emitCapturePass, in order. The terms
  // free of s, i and j are emitScoreInvariants'.
  SmallVector<std::string> hoisted;
  if (failed(scoreBackward(ignoreCaptureGrads(), score, &hoisted)))
    return failure();
  w.line("const float L = sLse[" + row + "];");
  w.line("(void)i; // read only by some regions");
  w.line("float pv = 0.0f, seed = 0.0f, dsv = 0.0f;");
  w.open("if (j < " + str(n.S) + " && L != -INFINITY)");
  w.line("int kept = 0;");
  if (failed(emitMaskTest(w, op, op.getMask(), in, tileAllKept)))
    return failure();
  w.open("if (kept)");
  w.line("const float s = " + scale + " * " + sAcc + ";");
  w.line("(void)s;");
  lines(w, score.forward);
  w.line(lseBase2 ? "pv = exp2f(score * " + std::string(kLog2eLiteral) + " - L);"
                  : "pv = expf(score - L);");
  if (drop.enabled) {
    // The forward used p z: dP = z (dO . v), and dV takes p z.
    w.line("const float z = " + drop.factor("bh", "i", "j") + ";");
    w.line("const float dS = pv * (z * " + dpAcc + " - sDi[" + row + "]);");
    w.line("pv *= z;");
  } else {
    w.line("const float dS = pv * (" + dpAcc + " - sDi[" + row + "]);");
  }
  lines(w, score.reverse);
  w.line("seed = dS;");
  w.line("dsv = " + scale + " * ds;");
  w.close();
  w.close();
  return success();
}

// Per pair (i, j) of the tile: P, dS (kept in sdP for the capture pass) and
// scale * ds; masked, out-of-range and fully masked rows' pairs get zeros.
LogicalResult BackwardEmitter::emitPairs() {
  w.open("for (int e = threadIdx.x; e < " + str(p.Br * p.Bc) + "; e += " +
         str(kThreads) + ")");
  w.line("const int r = e / " + str(p.Bc) + ";");
  w.line("const int64_t i = i0 + r, j = j0 + e % " + str(p.Bc) + ";");
  if (failed(emitPairTerms("sS[e]", "sdP[e]", "r", "")))
    return failure();
  w.line("sP[e] = " + fromFloat(p, "pv") + ";");
  w.line("sdS[e] = " + fromFloat(p, "dsv") + ";");
  w.line("sdP[e] = seed;");
  w.close();
  return success();
}

LogicalResult BackwardEmitter::emitScoreInvariants() {
  AttentionRegionEmitter::Backward unused;
  SmallVector<std::string> invariant;
  if (failed(scoreBackward(ignoreCaptureGrads(), unused, &invariant)))
    return failure();
  writeScoreInvariants(w, invariant);
  return success();
}

// Which way each capture read's gradient is summed (captureReads).
LogicalResult BackwardEmitter::classifyCaptureReads() {
  captureReads.clear();
  if (gradTotal == 0 || op.getScore().empty())
    return success();
  CaptureGradHook classify = [&](unsigned, const std::string &,
                                 const std::string &, unsigned uses) {
    captureReads.push_back(!(uses & kIndexUsesJ) ? CaptureRead::Row
                           : !(uses & kIndexUsesI) ? CaptureRead::Column
                                                   : CaptureRead::Pair);
    return std::string();
  };
  AttentionRegionEmitter::Backward unused;
  return scoreBackward(classify, unused);
}

// The element of the block's slice `cg` that capture c's flat `index` is:
// a per-sample or per-head slice starts at element b * count or h * count.
std::string BackwardEmitter::captureTarget(unsigned c,
                                           const std::string &index) {
  std::string local = index;
  if (partial[c].kind == CapturePartial::PerSample)
    local = "(" + index + " - b * " + str(partial[c].count) + ")";
  else if (partial[c].kind == CapturePartial::PerHead)
    local = "(" + index + " - h * " + str(partial[c].count) + ")";
  return str(gradOffset[c]) + " + " + local;
}

// Role B's start: the block's slice zeroed, the row sums (kept across the
// key tiles: a row read's element is the same in every tile) at zero.
void BackwardEmitter::emitCaptureSetup() {
  if (gradTotal == 0)
    return;
  w.line("double* cg = " + workspace + " + tile * " + str(gradTotal) + ";");
  w.line("for (int64_t e = threadIdx.x; e < " + str(gradTotal) + "; e += " +
         str(kThreads) + ") cg[e] = 0.0;");
  w.line("__shared__ int64_t kiln_cg_at[" + str(kThreads) +
         "]; // targets of an ordered add");
  for (auto [k, read] : llvm::enumerate(captureReads))
    if (read == CaptureRead::Row)
      w.line("double cgRow" + str(k) + " = 0.0; int64_t cgRowAt" + str(k) +
             " = -1;");
}

void BackwardEmitter::emitOrderedAdds(int64_t threads, const std::string &value,
                                      const std::string &at) {
  w.open("");
  w.line("const int64_t at = threadIdx.x < " + str(threads) + " ? " + at +
         " : -1;");
  w.line("if (threadIdx.x < " + str(threads) + ") kiln_cg_at[threadIdx.x] = at;");
  w.line("__syncthreads();");
  w.line("int distinct = 1;");
  w.line("if (at >= 0) for (int u = 0; u < (int)threadIdx.x; ++u) distinct &= "
         "kiln_cg_at[u] != at;");
  w.open("if (__syncthreads_and(distinct))");
  w.line("if (at >= 0) cg[at] += " + value + ";");
  w.close();
  w.open("else for (int u = 0; u < " + str(threads) + "; ++u)");
  w.line("if ((int)threadIdx.x == u && at >= 0) cg[at] += " + value + ";");
  w.line("__syncthreads();");
  w.close();
  w.line("__syncthreads(); // kiln_cg_at is free again");
  w.close();
}

// dS dscore/dcapture of the tile's pairs into the block's slice `cg`
// (role B only), in orders fixed by the code, never by timing:
//  - a read whose element does not depend on j (slope[h], xy[b, i, 0]):
//    row r's thread sums the row's pairs in order, across the key tiles;
//    emitCaptureFlush adds the sums after the last one;
//  - a read whose element depends on j but not i (xy[b, j, 0]): column c's
//    thread sums the column's pairs in order, then the column sums are
//    added (emitOrderedAdds);
//  - the others (both i and j, or the score): thread 0 walks the pairs in
//    order.
LogicalResult BackwardEmitter::emitCapturePass(int64_t rows, int64_t cols) {
  if (gradTotal == 0 || op.getScore().empty())
    return success();
  if (rows > kThreads || cols > kThreads)
    return op->emitError() << "capture gradients need a thread per tile row "
                              "and column";
  auto pass = [&](CaptureRead kind, const std::string &head,
                  const std::string &loop, const std::string &pair) {
    unsigned read = 0;
    CaptureGradHook hook = [&](unsigned c, const std::string &index,
                               const std::string &adjoint, unsigned) {
      unsigned k = read++;
      if (captureReads[k] != kind)
        return "(void)(" + adjoint + ");";
      std::string target = captureTarget(c, index);
      if (kind == CaptureRead::Pair)
        return "cg[" + target + "] += (double)" + adjoint + ";";
      std::string sum = kind == CaptureRead::Row ? "cgRow" : "cgCol";
      return sum + str(k) + " += (double)" + adjoint + "; " + sum + "At" +
             str(k) + " = " + target + ";";
    };
    // The terms free of s, i and j are role B's (emitScoreInvariants).
    AttentionRegionEmitter::Backward score;
    SmallVector<std::string> hoisted;
    if (failed(scoreBackward(hook, score, &hoisted)))
      return failure();
    w.line(head);
    w.open(loop);
    w.line("const int e = " + pair + ";");
    w.line("const float dS = sdP[e];");
    w.line("if (dS == 0.0f) continue; // masked, or no contribution");
    w.line("const int64_t i = i0 + e / " + str(cols) + ", j = j0 + e % " +
           str(cols) + ";");
    w.line("(void)i; (void)j;");
    w.line("const float s = " + scale + " * sS[e];");
    w.line("(void)s;");
    lines(w, score.forward);
    w.line("(void)score;");
    lines(w, score.reverse);
    w.line("(void)ds;");
    w.close();
    return success();
  };
  if (hasRead(CaptureRead::Row) &&
      failed(pass(CaptureRead::Row,
                  "// capture reads not depending on j: row r's thread, its "
                  "pairs in order",
                  "if (threadIdx.x < " + str(rows) + ") for (int c = 0; c < " +
                      str(cols) + "; ++c)",
                  "threadIdx.x * " + str(cols) + " + c")))
    return failure();
  if (hasRead(CaptureRead::Column)) {
    for (auto [k, read] : llvm::enumerate(captureReads))
      if (read == CaptureRead::Column)
        w.line("double cgCol" + str(k) + " = 0.0; int64_t cgColAt" + str(k) +
               " = -1;");
    if (failed(pass(CaptureRead::Column,
                    "// capture reads depending on j, not i: column c's "
                    "thread, its pairs in order",
                    "if (threadIdx.x < " + str(cols) + ") for (int r = 0; r < " +
                        str(rows) + "; ++r)",
                    "r * " + str(cols) + " + threadIdx.x")))
      return failure();
  }
  if (hasRead(CaptureRead::Pair) &&
      failed(pass(CaptureRead::Pair,
                  "// the other capture reads: thread 0, the pairs in order",
                  "if (threadIdx.x == 0) for (int q = 0; q < " +
                      str(rows * cols) + "; ++q)",
                  "q")))
    return failure();
  for (auto [k, read] : llvm::enumerate(captureReads))
    if (read == CaptureRead::Column)
      emitOrderedAdds(cols, "cgCol" + str(k), "cgColAt" + str(k));
  return success();
}

// After role B's last key tile: the row sums into the slice.
void BackwardEmitter::emitCaptureFlush(int64_t rows) {
  if (!hasRead(CaptureRead::Row))
    return;
  w.line("// capture reads not depending on j: the rows' sums");
  for (auto [k, read] : llvm::enumerate(captureReads))
    if (read == CaptureRead::Row)
      emitOrderedAdds(rows, "cgRow" + str(k), "cgRowAt" + str(k));
}

LogicalResult BackwardEmitter::emitRoleA() {
  w.line("// role A: dK, dV of one key tile");
  w.line("const int64_t bk = blockIdx.x / " + str(kvTiles) + ";");
  w.line("const int64_t b = bk / " + str(n.KVH) + ", kvh = bk % " +
         str(n.KVH) + ";");
  w.line("const int64_t j0 = (blockIdx.x % " + str(kvTiles) + ") * " +
         str(p.Bc) + ";");
  if (p.dkvInWorkspace) {
    // The block's dK/dV accumulators in its workspace slice (32-byte
    // aligned for wmma: the slice is a multiple of 16 x 16 floats).
    int64_t slice = p.Bc * (p.Dp + p.Dvp);
    w.line("float* sdK = " + dkvWorkspace + " + (int64_t)blockIdx.x * " +
           str(slice) + ";");
    w.line("float* sdV = sdK + " + str(p.Bc * p.Dp) + ";");
  }
  emitLoadTile(w, p, "sK", w.ptr(op.getK()), n.headOffset(true, "b", "kvh", n.D), n.rowStride(true, n.D), "j0",
               n.S, p.Bc, n.D, p.Dp);
  emitLoadTile(w, p, "sV", w.ptr(op.getV()), n.headOffset(true, "b", "kvh", n.Dv), n.rowStride(true, n.Dv), "j0",
               n.S, p.Bc, n.Dv, p.Dvp);
  w.line("for (int e = threadIdx.x; e < " + str(p.Bc * p.Dp) + "; e += " +
         str(kThreads) + ") sdK[e] = 0.0f;");
  w.line("for (int e = threadIdx.x; e < " + str(p.Bc * p.Dvp) + "; e += " +
         str(kThreads) + ") sdV[e] = 0.0f;");
  w.open("for (int64_t hh = 0; hh < " + str(n.G) + "; ++hh)");
  w.line("const int64_t h = kvh * " + str(n.G) + " + hh, bh = b * " +
         str(n.H) + " + h;");
  if (failed(emitScoreInvariants()))
    return failure();
  w.open("for (int64_t i0 = 0; i0 < " + str(n.T) + "; i0 += " + str(p.Br) +
         ")");
  if (failed(emitBlockSkip(w, op, op.getMask(), in, n, p.Br, p.Bc,
                           "continue;")))
    return failure();
  emitLoadTile(w, p, "sQ", w.ptr(op.getQ()), n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D), "i0",
               n.T, p.Br, n.D, p.Dp);
  emitLoadTile(w, p, "sdO", w.ptr(op.getDout()), n.headOffset(false, "b", "h", n.Dv), n.rowStride(false, n.Dv),
               "i0", n.T, p.Br, n.Dv, p.Dvp);
  if (failed(emitRowStats(p.Br)))
    return failure();
  w.line("__syncthreads();");
  if (failed(emitProducts()))
    return failure();
  w.line("__syncthreads();");
  if (failed(emitPairs()))
    return failure();
  w.line("__syncthreads();");
  w.line("// dV += P^T dO, dK += (scale ds)^T Q");
  emitTileMatmul(w, p, p.Bc, p.Dvp, p.Br, {"sP", true, p.Bc},
                 {"sdO", false, p.Dvp}, "sdV", true);
  emitTileMatmul(w, p, p.Bc, p.Dp, p.Br, {"sdS", true, p.Bc},
                 {"sQ", false, p.Dp}, "sdK", true);
  w.line("__syncthreads();");
  w.close(); // query tiles
  w.close(); // query heads of the group
  auto write = [&](Value result, const char *acc, int64_t d, int64_t dp) {
    w.open("for (int e = threadIdx.x; e < " + str(p.Bc * d) + "; e += " +
           str(kThreads) + ")");
    w.line("const int r = e / " + str(d) + ", d = e % " + str(d) + ";");
    w.line("if (j0 + r < " + str(n.S) + ") " + w.ptr(result) +
           "[" + n.rowOffset(true, "b", "kvh", "j0 + r", d) + " + d] = " +
           fromFloat(p, std::string(acc) + "[r * " + str(dp) + " + d]") +
           ";");
    w.close();
  };
  write(op.getDk(), "sdK", n.D, p.Dp);
  write(op.getDv(), "sdV", n.Dv, p.Dvp);
  return success();
}

LogicalResult BackwardEmitter::emitRoleB() {
  w.line("// role B: dQ (and capture gradients) of one query tile");
  w.line("const int64_t tile = blockIdx.x - " + str(blocksA) + ";");
  w.line("const int64_t bh = tile / " + str(qTiles) + ";");
  w.line("const int64_t b = bh / " + str(n.H) + ", h = bh % " + str(n.H) +
         ", kvh = h / " + str(n.G) + ";");
  w.line("const int64_t i0 = (tile % " + str(qTiles) + ") * " + str(p.Br) +
         ";");
  if (failed(emitScoreInvariants()))
    return failure();
  emitCaptureSetup();
  emitLoadTile(w, p, "sQ", w.ptr(op.getQ()), n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D), "i0",
               n.T, p.Br, n.D, p.Dp);
  emitLoadTile(w, p, "sdO", w.ptr(op.getDout()), n.headOffset(false, "b", "h", n.Dv), n.rowStride(false, n.Dv),
               "i0", n.T, p.Br, n.Dv, p.Dvp);
  w.line("for (int e = threadIdx.x; e < " + str(p.Br * p.Dp) + "; e += " +
         str(kThreads) + ") sdQ[e] = 0.0f;");
  if (failed(emitRowStats(p.Br)))
    return failure();
  w.line("__syncthreads();");
  w.open("for (int64_t j0 = 0; j0 < " + str(n.S) + "; j0 += " + str(p.Bc) +
         ")");
  if (failed(emitBlockSkip(w, op, op.getMask(), in, n, p.Br, p.Bc,
                           "continue;")))
    return failure();
  emitLoadTile(w, p, "sK", w.ptr(op.getK()), n.headOffset(true, "b", "kvh", n.D), n.rowStride(true, n.D), "j0",
               n.S, p.Bc, n.D, p.Dp);
  emitLoadTile(w, p, "sV", w.ptr(op.getV()), n.headOffset(true, "b", "kvh", n.Dv), n.rowStride(true, n.Dv), "j0",
               n.S, p.Bc, n.Dv, p.Dvp);
  w.line("__syncthreads();");
  if (failed(emitProducts()))
    return failure();
  w.line("__syncthreads();");
  if (failed(emitPairs()))
    return failure();
  w.line("__syncthreads();");
  // The capture pass reads sS and sdP, the product sdS and sK: no barrier
  // between them.
  if (failed(emitCapturePass(p.Br, p.Bc)))
    return failure();
  w.line("// dQ += (scale ds) K");
  emitTileMatmul(w, p, p.Br, p.Dp, p.Bc, {"sdS", false, p.Bc},
                 {"sK", false, p.Dp}, "sdQ", true);
  w.line("__syncthreads();");
  w.close(); // key tiles
  emitCaptureFlush(p.Br);
  w.open("for (int e = threadIdx.x; e < " + str(p.Br * n.D) + "; e += " +
         str(kThreads) + ")");
  w.line("const int r = e / " + str(n.D) + ", d = e % " + str(n.D) + ";");
  w.line("if (i0 + r < " + str(n.T) + ") " + w.ptr(op.getDq()) + "[" +
         n.rowOffset(false, "b", "h", "i0 + r", n.D) + " + d] = " +
         fromFloat(p, "sdQ[r * " + str(p.Dp) + " + d]") + ";");
  w.close();
  return success();
}

// The role-B slices summed in block order. With per-sample captures, the
// last role-B block of each sample sums that sample's elements (H * qTiles
// slices, its own counter done[1 + b]), so the B samples' sums run side by
// side instead of in one block; the last of those then sums the other
// captures over every block (done[0]).
void BackwardEmitter::emitCaptureReduction() {
  if (gradTotal == 0)
    return;
  w.line("// capture gradients: the slices summed in block order");
  auto sumCaptures = [&](bool perSample) {
    auto grads = op.getCaptureGrads().begin();
    for (auto [c, capture] : llvm::enumerate(op.getCaptures())) {
      if (gradOffset[c] < 0)
        continue;
      Value grad = *grads++;
      if ((partial[c].kind == CapturePartial::PerSample) != perSample)
        continue;
      int64_t count = cast<RankedTensorType>(capture.getType()).getNumElements();
      int64_t slice = partial[c].count;
      auto add = [&](const std::string &local) {
        return "sum += __ldcg(&" + workspace + "[t * " + str(gradTotal) + " + " +
               str(gradOffset[c]) + " + " + local + "]);";
      };
      // Role-B block t is (b, h, query tile) = t / (H qTiles), t / qTiles % H,
      // t % qTiles; the blocks that can touch the element, ascending.
      switch (partial[c].kind) {
      case CapturePartial::Whole:
        w.open("for (int64_t e = threadIdx.x; e < " + str(count) + "; e += " +
               str(kThreads) + ")");
        w.line("double sum = 0.0;");
        w.line("for (int64_t t = 0; t < " + str(blocksB) + "; ++t) " + add("e"));
        break;
      case CapturePartial::PerSample:
        // Sample b's elements [b * slice, (b + 1) * slice).
        w.open("for (int64_t e = b * " + str(slice) + " + threadIdx.x; e < (b + 1) * " +
               str(slice) + "; e += " + str(kThreads) + ")");
        w.line("double sum = 0.0;");
        w.line("const int64_t first = b * " + str(n.H * qTiles) + ";");
        w.line("for (int64_t t = first; t < first + " + str(n.H * qTiles) +
               "; ++t) " + add("e % " + str(slice)));
        break;
      case CapturePartial::PerHead:
        w.open("for (int64_t e = threadIdx.x; e < " + str(count) + "; e += " +
               str(kThreads) + ")");
        w.line("double sum = 0.0;");
        w.line("const int64_t head = e / " + str(slice) + ";");
        w.line("for (int64_t bb = 0; bb < " + str(n.B) +
               "; ++bb) for (int64_t t = (bb * " + str(n.H) + " + head) * " +
               str(qTiles) + "; t < (bb * " + str(n.H) + " + head + 1) * " +
               str(qTiles) + "; ++t) " + add("e % " + str(slice)));
        break;
      }
      bool bf16 =
          cast<RankedTensorType>(grad.getType()).getElementType().isBF16();
      w.line(w.ptr(grad) + "[e] = " +
             (bf16 ? "kiln_f32_to_bf16((float)sum);" : "(float)sum;"));
      w.close();
    }
  };
  if (!perSampleCaptures) {
    w.line("if (!kiln_last_block(" + done + ")) return;");
    sumCaptures(false);
    return;
  }
  w.line("if (blockIdx.x < " + str(blocksA) + ") return;");
  w.open("");
  w.line("const int64_t b = (blockIdx.x - " + str(blocksA) + ") / " +
         str(n.H * qTiles) + ";");
  w.line("if (!kiln_last_of(" + done + " + 1 + b, " + str(n.H * qTiles) +
         ")) return;");
  sumCaptures(true);
  w.close();
  bool others = llvm::any_of(llvm::seq<size_t>(0, partial.size()), [&](size_t c) {
    return gradOffset[c] >= 0 && partial[c].kind != CapturePartial::PerSample;
  });
  if (others) {
    w.line("if (!kiln_last_of(" + done + ", " + str(n.B) + ")) return;");
    sumCaptures(false);
  }
}

bool BackwardEmitter::hasCaptureGradients(k::AttentionGradOp op) {
  return llvm::any_of(op.getCaptures(), [](Value c) {
    return isa<FloatType>(cast<RankedTensorType>(c.getType()).getElementType());
  });
}

LogicalResult BackwardEmitter::emit(CudaLaunch &launch,
                                    const SharedLayout &layout,
                                    const MmaBackwardPlan *mma) {
  const int64_t sharedBytes = layout.size();
  lseBase2 = mma != nullptr;
  qTiles = (n.T + p.Br - 1) / p.Br;
  kvTiles = (n.S + p.Bc - 1) / p.Bc;
  blocksA = n.B * n.KVH * kvTiles;
  blocksB = n.B * n.H * qTiles;
  launch = {static_cast<uint32_t>(blocksA + blocksB),
            static_cast<uint32_t>(kThreads),
            static_cast<uint32_t>(sharedBytes)};
  gradOffset.assign(op.getCaptures().size(), -1);
  partial.assign(op.getCaptures().size(), {});
  for (auto [c, capture] : llvm::enumerate(op.getCaptures())) {
    auto type = cast<RankedTensorType>(capture.getType());
    if (!isa<FloatType>(type.getElementType()))
      continue;
    partial[c] = capturePartial(op, c, n);
    gradOffset[c] = gradTotal;
    gradTotal += partial[c].count;
  }
  perSampleCaptures = llvm::any_of(llvm::seq<size_t>(0, partial.size()), [&](size_t c) {
    return gradOffset[c] >= 0 && partial[c].kind == CapturePartial::PerSample;
  });
  if (failed(classifyCaptureReads()))
    return failure();
  if (gradTotal * blocksB * 8 > kMaxWorkspaceBytes)
    return op->emitError() << "the CUDA attention backward would need "
                           << gradTotal * blocksB * 8
                           << " bytes of capture-gradient workspace (at most "
                           << kMaxWorkspaceBytes << ")";
  if (mma)
    includeMma(w);
  else if (p.bf16)
    includeWmma(w);
  if (gradTotal > 0) {
    // Doubles in an I64 buffer (the schema has no f64; only this kernel
    // reads them); the counter is an I32 read as unsigned.
    workspace = w.scratch("cg_all", "double",
                          {"attention_grad.capture_partials",
                           schema::DType_I64, blocksB * gradTotal,
                           schema::BufferRole_Workspace});
    // done[0], and done[1 + b] for sample b with per-sample captures.
    done = w.scratch("done", "unsigned int",
                     {"attention_grad.done", schema::DType_I32,
                      perSampleCaptures ? 1 + n.B : 1,
                      schema::BufferRole_WorkspaceCounter});
  }
  if (p.dkvInWorkspace)
    dkvWorkspace = w.scratch("dkv_all", "float",
                             {"attention_grad.dkv_f32", schema::DType_F32,
                              blocksA * p.Bc * (p.Dp + p.Dvp),
                              schema::BufferRole_Workspace});
  drop = emitAttentionDropout(w, op.getDropoutProbability(), op.getRngState(),
                              "cuda");
  w.line("// flash attention backward: q [" + str(n.B) + ", " + str(n.H) +
         ", " + str(n.T) + ", " + str(n.D) + "], k/v [" + str(n.B) + ", " +
         str(n.KVH) + ", " + str(n.S) + ", " + str(n.D) + "/" + str(n.Dv) +
         "]; tiles " + str(p.Br) + " x " + str(p.Bc) +
         (mma ? ", stepping " + str(mma->inner) + ", bf16 mma.sync"
              : p.bf16 ? ", bf16 tensor cores" : ", fp32") + ", " +
         str(sharedBytes) + " shared bytes" +
         (p.dkvInWorkspace ? " (dK/dV accumulators in the workspace)" : "") +
         "; blocks [0, " + str(blocksA) +
         "): dK/dV, then " + str(blocksB) + " dQ blocks");
  declareDynamicShared(w);
  layout.declare(w);
  w.open("if (blockIdx.x < " + str(blocksA) + ")");
  if (failed(mma ? emitRoleAMma(*mma) : emitRoleA()))
    return failure();
  w.close();
  w.open("else");
  if (failed(mma ? emitRoleBMma(*mma) : emitRoleB()))
    return failure();
  w.close();
  emitCaptureReduction();
  return success();
}

LogicalResult emitBackward(Operation *operation, KernelSourceWriter &w,
                           CudaLaunch &launch, int64_t sharedBudget) {
  auto op = cast<k::AttentionGradOp>(operation);
  Dims n = dimsOf(op);
  // bf16 with head dims up to 128: the mma.sync roles, when they fit.
  TilePlan mmaTiles;
  mmaTiles.bf16 =
      cast<RankedTensorType>(op.getQ().getType()).getElementType().isBF16();
  mmaTiles.Br = mmaTiles.Bc = kWarps * 16;
  mmaTiles.Dp = roundUp16(n.D);
  mmaTiles.Dvp = roundUp16(n.Dv);
  if (mmaBackwardApplies(mmaTiles)) {
    MmaBackwardPlan m = mmaBackwardPlan(
        mmaTiles, BackwardEmitter::hasCaptureGradients(op));
    for (int64_t stages : {2, 1}) {
      m.stages = stages;
      SharedLayout layout = mmaBackwardLayout(mmaTiles, m);
      if (layout.size() <= sharedBudget)
        return BackwardEmitter(op, w, mmaTiles).emit(launch, layout, &m);
    }
  }
  FailureOr<PlannedTiles> tiles =
      chooseTiles(op, n, "backward", sharedBudget, backwardLayout);
  if (failed(tiles))
    return failure();
  return BackwardEmitter(op, w, tiles->plan)
      .emit(launch, tiles->layout, nullptr);
}

} // namespace cuda_attention
} // namespace kiln
