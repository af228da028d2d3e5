//===- CudaAttentionBackwardMma.cpp - bf16 attention backward on mma.sync -===//
//
// The two roles of kiln.attention_grad's kernel (CudaAttentionBackward.cpp
// has the design: deterministic, no floating-point atomics, role A's blocks
// write dK/dV, role B's dQ) for bf16 with head dims up to 128, with every
// tile product in the warps' registers in the layout of mma.sync.m16n8k16
// (CudaAttentionMma.cpp describes it), as FlashAttention-2's backward:
//
//  A. 64 keys per block, warp w's 16 of them in the rows of its
//     accumulators, K and V in shared memory for the whole block. For each
//     query head of the group, the steps of `inner` query rows are
//     software-pipelined (emitTilePipeline): Q, dO and O of the next kept
//     step, and its lse, travel to shared memory by cp.async while this
//     one is computed. The step's D_i = dO_i . O_i come from those tiles
//     (128 / inner threads a row). S^T = K Q^T and dP^T = V dO^T read Q's
//     and dO's rows as B's columns (ldmatrix); per element of S^T, with
//     lse_i and D_i from shared memory, p and scale * ds in place of S^T
//     and dP^T, then converted to A fragments as the forward does with P;
//     dK += dS^T Q and dV += P^T dO read the same row-major Q and dO
//     transposed (ldmatrix.trans), so no transposed copy is made. dK and
//     dV accumulate in registers and are written once.
//  B. 64 query rows per block, warp w's 16 in its rows, Q, dO, lse and D_i
//     loaded once: S = Q K^T and dP = dO V^T per pipelined step of `inner`
//     keys (K and V by cp.async), ds in place of dP, then dQ += (scale ds) K
//     with K read transposed by ldmatrix.trans. With floating captures, s
//     and dS also go to shared memory for the ordered capture pass of the
//     shared-memory kernel.
//
// Two stages where the shared-memory budget allows, else one (each step
// copied, then computed). K and V (role A), Q and dO (role B) fragments are
// read from shared memory at each use: each is one 4-register read reused
// across a whole row of products, and registers go to the accumulators.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaAttentionBackward.h"

#include "codegen/KernelSourceWriter.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {
namespace cuda_attention {

namespace {

// Rows a role owns per block (16 per warp).
constexpr int64_t kRows = kWarps * 16;

void zeroAccumulators(KernelSourceWriter &w, const std::string &name,
                      int64_t tiles) {
  w.line("float " + name + "[" + str(tiles) + "][4];");
  w.line("KILN_UNROLL for (int c = 0; c < " + str(tiles) + "; ++c) " + name +
         "[c][0] = " + name + "[c][1] = " + name + "[c][2] = " + name +
         "[c][3] = 0.0f;");
}

// acc[c] += A(warp's 16 rows of `aTile`) B(rows c * 8.. of `bTile`) over
// `depth` (a multiple of 16) for c < tiles (even): B's columns are rows of
// the row-major `bTile`, two 8-row slices per ldmatrix.
void emitProductsInto(KernelSourceWriter &w, const std::string &acc,
                      int64_t tiles, const std::string &aTile,
                      const std::string &bTile, int64_t depth, int64_t ld) {
  w.open("KILN_UNROLL for (int kc = 0; kc < " + str(depth / 16) + "; ++kc)");
  w.line("uint32_t a[4];");
  emitFragmentA(w, "a", aTile, "warp * 16", "kc * 16", ld);
  w.open("KILN_UNROLL for (int cc = 0; cc < " + str(tiles / 2) + "; ++cc)");
  emitMmaBPair(w, acc + "[2 * cc]", acc + "[2 * cc + 1]", "a", bTile, "cc * 16", "kc * 16", ld);
  w.close();
  w.close();
}

// acc[d] += A(columns of the warp's accumulators `from`) B where B's
// element (k, n) is bTile[k * ld + 8 d + n] (the row-major tile whose rows
// are the accumulators' columns, read transposed by ldmatrix.trans), for
// d < tiles (even).
void emitAccumulate(KernelSourceWriter &w, const std::string &acc,
                    int64_t tiles, const std::string &from, int64_t steps,
                    const std::string &bTile, int64_t ld) {
  w.open("KILN_UNROLL for (int kc = 0; kc < " + str(steps) + "; ++kc)");
  w.line("const uint32_t a[4] = " + packedA(from, "kc") + ";");
  w.open("KILN_UNROLL for (int dd = 0; dd < " + str(tiles / 2) + "; ++dd)");
  emitMmaBPairTransposed(w, acc + "[2 * dd]", acc + "[2 * dd + 1]", "a", bTile, "kc * 16",
                         "dd * 16", ld);
  w.close();
  w.close();
}

} // namespace

bool mmaBackwardApplies(const TilePlan &p) {
  return p.bf16 && p.Dp <= 128 && p.Dvp <= 128;
}

MmaBackwardPlan mmaBackwardPlan(const TilePlan &p, bool captureGradients) {
  MmaBackwardPlan m;
  m.inner = p.Dp <= 64 && p.Dvp <= 64 ? 64 : 32;
  m.captureTiles = captureGradients;
  return m;
}

SharedLayout mmaBackwardLayout(const TilePlan &p, const MmaBackwardPlan &m) {
  SharedLayout l;
  l.add("sLse", "float", kRows, 4);
  l.add("sDi", "float", kRows, 4);
  int64_t roles = l.mark();
  // role A: its keys once, then per stage a query tile's Q, dO, O, lse
  l.add("aK", "uint16_t", kRows * paddedStride(p.Dp), 2);
  l.add("aV", "uint16_t", kRows * paddedStride(p.Dvp), 2);
  l.add("aQ", "uint16_t", m.stages * m.inner * paddedStride(p.Dp), 2);
  l.add("adO", "uint16_t", m.stages * m.inner * paddedStride(p.Dvp), 2);
  l.add("aO", "uint16_t", m.stages * m.inner * paddedStride(p.Dvp), 2);
  l.add("aLse", "float", m.stages * m.inner, 4);
  l.rewind(roles);
  // role B: its query rows once, then per stage a key tile's K, V
  l.add("bQ", "uint16_t", kRows * paddedStride(p.Dp), 2);
  l.add("bdO", "uint16_t", kRows * paddedStride(p.Dvp), 2);
  l.add("bK", "uint16_t", m.stages * m.inner * paddedStride(p.Dp), 2);
  l.add("bV", "uint16_t", m.stages * m.inner * paddedStride(p.Dvp), 2);
  if (m.captureTiles) {
    l.add("sS", "float", kRows * m.inner, 4);
    l.add("sdP", "float", kRows * m.inner, 4);
  }
  return l;
}

// Per element (c, e) of the warp's accumulators S (`accS`) and dP
// (`accDP`), `tiles` slices of 8: with i, j the pair and `row` its row in
// sLse / sDi, p replaces S and scale * ds replaces dP (zeros where the
// pair is masked or out of range). With `captureIndex`, s and dS go to
// sS / sdP there for the capture pass.
LogicalResult BackwardEmitter::emitMmaPairs(const std::string &accS,
                                            const std::string &accDP,
                                            int64_t tiles, const std::string &i,
                                            const std::string &j,
                                            const std::string &row,
                                            const std::string &captureIndex) {
  w.open("KILN_UNROLL for (int c = 0; c < " + str(tiles) + "; ++c)");
  w.open("KILN_UNROLL for (int e = 0; e < 4; ++e)");
  w.line("const int64_t i = " + i + ", j = " + j + ";");
  w.line("const int rr = " + row + ";");
  if (failed(emitPairTerms(accS, accDP, "rr", allKept())))
    return failure();
  if (!captureIndex.empty()) {
    w.line("sS[" + captureIndex + "] = " + accS + ";");
    w.line("sdP[" + captureIndex + "] = seed;");
  } else {
    w.line("(void)seed;");
  }
  w.line(accS + " = pv;");
  w.line(accDP + " = dsv;");
  w.close();
  w.close();
  return success();
}

LogicalResult BackwardEmitter::emitRoleAMma(const MmaBackwardPlan &m) {
  const int64_t ldD = paddedStride(p.Dp), ldDv = paddedStride(p.Dvp), steps = m.inner / 8;
  const int64_t stageQ = m.inner * ldD, stageO = m.inner * ldDv;
  std::string q = w.ptr(op.getQ()), dout = w.ptr(op.getDout()), out = w.ptr(op.getOut());
  lines(w, {
               "// role A: dK, dV of 64 keys (warp w: keys 16 w..), " +
                   str(m.inner) + " query rows at a time",
               "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;",
               "const int g = lane >> 2, t = lane & 3;",
               "const int64_t bk = blockIdx.x / " + str(kvTiles) + ";",
               "const int64_t b = bk / " + str(n.KVH) + ", kvh = bk % " +
                   str(n.KVH) + ";",
               "const int64_t j0 = (blockIdx.x % " + str(kvTiles) + ") * " +
                   str(kRows) + ";",
               "const int64_t jRow[2] = {j0 + warp * 16 + g, j0 + warp * 16 "
               "+ g + 8};",
           });
  emitVectorFlag(w, "vecQ", q, n.D);
  emitVectorFlag(w, "vecK", w.ptr(op.getK()), n.D);
  emitVectorFlag(w, "vecV", w.ptr(op.getV()), n.Dv);
  emitVectorFlag(w, "vecdO", dout, n.Dv);
  emitVectorFlag(w, "vecO", out, n.Dv);
  emitLoadTile16(w, "aK", w.ptr(op.getK()), n.headOffset(true, "b", "kvh", n.D), n.rowStride(true, n.D), "j0",
                 "vecK", n.S, kRows, n.D, p.Dp);
  emitLoadTile16(w, "aV", w.ptr(op.getV()), n.headOffset(true, "b", "kvh", n.Dv), n.rowStride(true, n.Dv), "j0",
                 "vecV", n.S, kRows, n.Dv, p.Dvp);
  zeroAccumulators(w, "dk", p.Dp / 8);
  zeroAccumulators(w, "dv", p.Dvp / 8);
  w.open("for (int64_t hh = 0; hh < " + str(n.G) + "; ++hh)");
  w.line("const int64_t h = kvh * " + str(n.G) + " + hh, bh = b * " +
         str(n.H) + " + h;");
  w.line("(void)h;");
  if (failed(emitScoreInvariants()))
    return failure();
  TilePipeline pipeline;
  pipeline.corner = "i0";
  pipeline.limit = n.T;
  pipeline.step = m.inner;
  pipeline.stages = m.stages;
  pipeline.allKept = allKept();
  pipeline.findKept = [&](const std::string &var, const std::string &allVar) {
    return emitNextKeptTile(w, op, op.getMask(), in, n, m.inner, kRows, var, "i0", n.T, allVar);
  };
  pipeline.findKeptSyncs = blockSkipSyncs(op.getMask());
  pipeline.issue = [&](const std::string &i, const std::string &stage) {
    emitAsyncTile16(w, "aQ + " + stage + " * " + str(stageQ), q,
                    n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D), i, "vecQ", n.T,
                    m.inner, n.D, p.Dp);
    emitAsyncTile16(w, "adO + " + stage + " * " + str(stageO), dout,
                    n.headOffset(false, "b", "h", n.Dv), n.rowStride(false, n.Dv), i, "vecdO",
                    n.T, m.inner, n.Dv, p.Dvp);
    emitAsyncTile16(w, "aO + " + stage + " * " + str(stageO), out,
                    n.headOffset(false, "b", "h", n.Dv), n.rowStride(false, n.Dv), i, "vecO", n.T,
                    m.inner, n.Dv, p.Dvp);
    emitAsyncFloats(w, "aLse + " + stage + " * " + str(m.inner), w.ptr(op.getLse()),
                    "bh * " + str(n.T) + " + " + i, i, m.inner, n.T);
  };
  pipeline.body = [&]() -> LogicalResult {
    w.line("const uint16_t* sQs = aQ + stage * " + str(stageQ) + ";");
    w.line("const uint16_t* sdOs = adO + stage * " + str(stageO) + ";");
    emitTileRowStats(m.inner, ldDv);
    w.line("// S^T = K Q^T, dP^T = V dO^T: the warp's 16 keys x " + str(m.inner) +
           " query rows");
    zeroAccumulators(w, "st", steps);
    zeroAccumulators(w, "dpt", steps);
    emitProductsInto(w, "st", steps, "aK", "sQs", p.Dp, ldD);
    emitProductsInto(w, "dpt", steps, "aV", "sdOs", p.Dvp, ldDv);
    w.line("__syncthreads(); // sLse and sDi of the tile complete");
    if (failed(emitMmaPairs("st[c][e]", "dpt[c][e]", steps, "i0 + c * 8 + 2 * t + (e & 1)",
                            "jRow[e >> 1]", "c * 8 + 2 * t + (e & 1)", "")))
      return failure();
    w.line("// dV += P^T dO, dK += (scale ds)^T Q");
    emitAccumulate(w, "dv", p.Dvp / 8, "st", m.inner / 16, "sdOs", ldDv);
    emitAccumulate(w, "dk", p.Dp / 8, "dpt", m.inner / 16, "sQs", ldD);
    return success();
  };
  if (failed(emitTilePipeline(w, pipeline)))
    return failure();
  w.close(); // query heads of the group
  auto write = [&](Value result, const char *acc, int64_t d, int64_t tiles) {
    w.open("KILN_UNROLL for (int c = 0; c < " + str(tiles) +
           "; ++c) KILN_UNROLL for (int e = 0; e < 4; ++e)");
    w.line("const int64_t j = jRow[e >> 1];");
    w.line("const int col = c * 8 + 2 * t + (e & 1);");
    w.line("if (j < " + str(n.S) + " && col < " + str(d) + ") " +
           w.ptr(result) + "[" + n.rowOffset(true, "b", "kvh", "j", d) +
           " + col] = kiln_f32_to_bf16(" + acc + "[c][e]);");
    w.close();
  };
  write(op.getDk(), "dk", n.D, p.Dp / 8);
  write(op.getDv(), "dv", n.Dv, p.Dvp / 8);
  return success();
}

// Role A's row statistics of the query tile in this stage, from shared
// memory: D_i = dO_i . O_i (128 / rows threads a row, each over pairs of
// columns, summed by shuffles; the padding columns are zeros) into sDi, and
// the stage's lse in base 2 (lseBase2) into sLse (-inf past the queries,
// which skips their pairs).
void BackwardEmitter::emitTileRowStats(int64_t rows, int64_t ld) {
  const int64_t per = kThreads / rows;
  w.line("// D_i = dO_i . O_i and lse_i of the tile's rows");
  w.open("");
  w.line("const uint16_t* sOs = aO + stage * " + str(rows * ld) + ";");
  w.line("const int r = threadIdx.x / " + str(per) + ", part = threadIdx.x % " + str(per) + ";");
  w.line("float di = 0.0f;");
  w.open("KILN_UNROLL for (int d = 2 * part; d < " + str(p.Dvp) + "; d += " + str(2 * per) +
         ")");
  w.line("const uint32_t x = kiln_ld_pair(sdOs + r * " + str(ld) +
         " + d), y = kiln_ld_pair(sOs + r * " + str(ld) + " + d);");
  w.line("di += kiln_bf16_to_f32((uint16_t)(x & 0xffffu)) * kiln_bf16_to_f32((uint16_t)(y & "
         "0xffffu)) + kiln_bf16_to_f32((uint16_t)(x >> 16)) * kiln_bf16_to_f32((uint16_t)(y >> "
         "16));");
  w.close();
  for (int64_t offset = per / 2; offset >= 1; offset /= 2)
    w.line("di += __shfl_xor_sync(0xffffffffu, di, " + str(offset) + ");");
  w.open("if (part == 0)");
  w.line("sDi[r] = di;");
  w.line("sLse[r] = i0 + r < " + str(n.T) + " ? aLse[stage * " + str(rows) + " + r] * " +
         kLog2eLiteral + " : -INFINITY;");
  w.close();
  w.close();
}

LogicalResult BackwardEmitter::emitRoleBMma(const MmaBackwardPlan &m) {
  const int64_t ldD = paddedStride(p.Dp), ldDv = paddedStride(p.Dvp), steps = m.inner / 8;
  const int64_t stageK = m.inner * ldD, stageV = m.inner * ldDv;
  std::string k = w.ptr(op.getK()), v = w.ptr(op.getV());
  lines(w, {
               "// role B: dQ (and capture gradients) of 64 query rows "
               "(warp w: rows 16 w..), " +
                   str(m.inner) + " keys at a time",
               "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;",
               "const int g = lane >> 2, t = lane & 3;",
               "const int64_t tile = blockIdx.x - " + str(blocksA) + ";",
               "const int64_t bh = tile / " + str(qTiles) + ";",
               "const int64_t b = bh / " + str(n.H) + ", h = bh % " +
                   str(n.H) + ", kvh = h / " + str(n.G) + ";",
               "const int64_t i0 = (tile % " + str(qTiles) + ") * " +
                   str(kRows) + ";",
               "const int64_t iRow[2] = {i0 + warp * 16 + g, i0 + warp * 16 "
               "+ g + 8};",
               "(void)h;",
           });
  if (failed(emitScoreInvariants()))
    return failure();
  emitCaptureSetup();
  emitVectorFlag(w, "vecQ", w.ptr(op.getQ()), n.D);
  emitVectorFlag(w, "vecK", k, n.D);
  emitVectorFlag(w, "vecV", v, n.Dv);
  emitVectorFlag(w, "vecdO", w.ptr(op.getDout()), n.Dv);
  emitLoadTile16(w, "bQ", w.ptr(op.getQ()), n.headOffset(false, "b", "h", n.D), n.rowStride(false, n.D),
                 "i0", "vecQ", n.T, kRows, n.D, p.Dp);
  emitLoadTile16(w, "bdO", w.ptr(op.getDout()), n.headOffset(false, "b", "h", n.Dv), n.rowStride(false, n.Dv),
                 "i0", "vecdO", n.T, kRows, n.Dv, p.Dvp);
  if (failed(emitRowStats(kRows)))
    return failure();
  zeroAccumulators(w, "dq", p.Dp / 8);
  TilePipeline pipeline = keyTilePipeline(w, op, op.getMask(), in, n, kRows, m.inner, m.stages,
                                          allKept(), k, v, "bK", "bV", p.Dp, p.Dvp);
  pipeline.body = [&]() -> LogicalResult {
    w.line("const uint16_t* sKs = bK + stage * " + str(stageK) + ";");
    w.line("const uint16_t* sVs = bV + stage * " + str(stageV) + ";");
    w.line("// S = Q K^T, dP = dO V^T: the warp's 16 rows x " + str(m.inner) + " keys");
    zeroAccumulators(w, "st", steps);
    zeroAccumulators(w, "dp", steps);
    emitProductsInto(w, "st", steps, "bQ", "sKs", p.Dp, ldD);
    emitProductsInto(w, "dp", steps, "bdO", "sVs", p.Dvp, ldDv);
    std::string captureIndex =
        m.captureTiles ? "(warp * 16 + g + (e >> 1) * 8) * " + str(m.inner) +
                             " + c * 8 + 2 * t + (e & 1)"
                       : "";
    if (failed(emitMmaPairs("st[c][e]", "dp[c][e]", steps, "iRow[e >> 1]",
                            "j0 + c * 8 + 2 * t + (e & 1)", "warp * 16 + g + (e >> 1) * 8",
                            captureIndex)))
      return failure();
    if (m.captureTiles) {
      w.line("__syncthreads(); // sS and sdP complete");
      if (failed(emitCapturePass(kRows, m.inner)))
        return failure();
    }
    w.line("// dQ += (scale ds) K");
    emitAccumulate(w, "dq", p.Dp / 8, "dp", m.inner / 16, "sKs", ldD);
    return success();
  };
  if (failed(emitTilePipeline(w, pipeline)))
    return failure();
  emitCaptureFlush(kRows);
  w.open("KILN_UNROLL for (int c = 0; c < " + str(p.Dp / 8) +
         "; ++c) KILN_UNROLL for (int e = 0; e < 4; ++e)");
  w.line("const int64_t i = iRow[e >> 1];");
  w.line("const int col = c * 8 + 2 * t + (e & 1);");
  w.line("if (i < " + str(n.T) + " && col < " + str(n.D) + ") " +
         w.ptr(op.getDq()) + "[" + n.rowOffset(false, "b", "h", "i", n.D) +
         " + col] = kiln_f32_to_bf16(dq[c][e]);");
  w.close();
  return success();
}

} // namespace cuda_attention
} // namespace kiln
