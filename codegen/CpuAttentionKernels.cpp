//===- CpuAttentionKernels.cpp - Flash-style CPU attention kernels --------===//
//
// One generated kernel per kiln.attention (forward) and kiln.attention_grad
// (backward), with the op's score and mask regions inlined as C statements
// (codegen/AttentionRegionEmitter), every shape baked in and no [T, S]
// buffer.
//
// Forward, for each (b, h) in parallel and each query row i:
//  1. Walk the keys in blocks of kKeyBlock. For each key j: evaluate the
//     mask (skip the dot product when masked), s = scale * q_i . k_j, the
//     score region. A block with no kept key is skipped.
//  2. Online softmax: running max m and sum l; rescale l and the output
//     accumulator by exp(m_old - m_new), then add p = exp(score - m_new).
//  3. out = acc / l, lse = m + log(l); a row with no kept key gets out = 0,
//     lse = -inf.
//
// Backward, for each (b, kv head) in parallel (it owns dk, dv of that kv head
// and dq of its query heads, so no two threads write one element):
//  1. For each query head of the group and row i with a finite lse:
//     D_i = dout_i . out_i; for each kept key j: recompute the score,
//     p = exp(score - lse_i), dv_j += p dout_i, dp = dout_i . v_j,
//     dS = p (dp - D_i), then the score region's reverse mode gives
//     ds = dS dscore/ds and dS dscore/dcapture; dq_i += scale ds k_j,
//     dk_j += scale ds q_i.
//     With dropout (codegen/PhiloxRandom.inc), the forward weights v_j by
//     p z with z = keep(b, h, i, j) / (1 - p_drop) (l and lse still sum p),
//     and the backward regenerates z: dv_j += p z dout_i, dS = p (z dp - D_i).
//  2. Capture gradients go to a per-task double slice; after the parallel
//     loop the tasks are summed in task order. Every sum has a fixed order,
//     so the result is the same bits whatever the thread count.
//
// Scratch (the task's fp32 dk/dv accumulators [S, D] / [S, Dv] and the
// capture-gradient slices [tasks, capture elements] of doubles) is not
// allocated by the kernel: it is two or three Workspace arguments after the
// outputs, planned by the memory plan (live during this call only, so peak
// memory counts them). Their contents are undefined on entry: each task
// zeroes its own slices before accumulating.
//
//===----------------------------------------------------------------------===//

#include "codegen/AttentionDims.h"
#include "codegen/AttentionRegionEmitter.h"
#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

// Keys per block of the forward's online softmax (scores of one block live
// in a stack array).
constexpr int64_t kKeyBlock = 64;

std::string str(int64_t v) { return std::to_string(v); }


using Dims = AttentionDims;

// Writes `lines` at the current indentation.
void lines(KernelSourceWriter &w, ArrayRef<std::string> text) {
  for (const std::string &l : text)
    w.line(l);
}

// The mask test of key j: `if (!keep) <onMasked>`; nothing without a mask.
LogicalResult emitMask(KernelSourceWriter &w, Operation *op, Region &mask,
                       const AttentionRegionInputs &in,
                       const std::string &onMasked) {
  if (mask.empty())
    return success();
  AttentionRegionEmitter emitter(mask, "mk_");
  FailureOr<SmallVector<std::string>> text = emitter.emitForward(in, "keep");
  if (failed(text))
    return op->emitError() << "cannot emit the mask region of the CPU "
                              "attention kernel";
  lines(w, *text);
  w.line("if (!keep) " + onMasked);
  return success();
}

// s = scale * q_i . k_j with q_i in `qrow`; k_j at offset `ko`.
void emitRawScore(KernelSourceWriter &w, Value k, int64_t d, double scale) {
  w.line("float dot = 0.0f;");
  w.line("for (int64_t d = 0; d < " + str(d) + "; ++d) dot += qrow[d] * " +
         w.load(k, "ko + d") + ";");
  w.line("const float s = " + ScalarExprEmitter::floatLiteral(scale) +
         " * dot;");
}

LogicalResult emitAttentionForward(k::AttentionOp op, KernelSourceWriter &w) {
  Dims n = attentionDims(op);
  double scale = op.getScale().convertToDouble();
  AttentionRegionInputs in = attentionLoopInputs(w, op.getCaptures());
  Value q = op.getQ(), k = op.getK(), v = op.getV();
  Value out = op.getOut(), lse = op.getLse();
  AttentionDropout drop = emitAttentionDropout(
      w, op.getDropoutProbability(), op.getRngState(), "cpu");
  w.line("// flash attention forward: q [" + str(n.B) + ", " + str(n.H) +
         ", " + str(n.T) + ", " + str(n.D) + "], k/v [" + str(n.B) + ", " +
         str(n.KVH) + ", " + str(n.S) + ", " + str(n.D) + "/" + str(n.Dv) +
         "], " + str(n.G) + " query heads per kv head");
  w.parallelFor(n.B * n.H * n.T * n.S * (n.D + n.Dv));
  w.open("for (int64_t bh = 0; bh < " + str(n.B * n.H) + "; ++bh)");
  w.line("const int64_t b = bh / " + str(n.H) + ", h = bh % " + str(n.H) +
         ", kvh = h / " + str(n.G) + ";");
  w.line("float qrow[" + str(n.D) + "], acc[" + str(n.Dv) + "], sc[" +
         str(kKeyBlock) + "];");
  w.open("for (int64_t i = 0; i < " + str(n.T) + "; ++i)");
  w.line("const int64_t row = bh * " + str(n.T) + " + i; // of lse");
  w.line("const int64_t qo = " + n.rowOffset(false, "b", "h", "i", n.D) +
         ", oo = " + n.rowOffset(false, "b", "h", "i", n.Dv) + ";");
  w.line("for (int64_t d = 0; d < " + str(n.D) + "; ++d) qrow[d] = " +
         w.load(q, "qo + d") + ";");
  w.line("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d) acc[d] = 0.0f;");
  w.line("float m = -INFINITY, l = 0.0f;");
  w.open("for (int64_t j0 = 0; j0 < " + str(n.S) + "; j0 += " +
         str(kKeyBlock) + ")");
  w.line("const int64_t jn = " + str(n.S) + " - j0 < " + str(kKeyBlock) +
         " ? " + str(n.S) + " - j0 : " + str(kKeyBlock) + ";");
  w.line("float blockMax = -INFINITY;");
  w.open("for (int64_t jj = 0; jj < jn; ++jj)");
  w.line("const int64_t j = j0 + jj;");
  w.line("sc[jj] = -INFINITY;");
  if (failed(emitMask(w, op, op.getMask(), in, "continue;")))
    return failure();
  w.line("const int64_t ko = " + n.rowOffset(true, "b", "kvh", "j", n.D) +
         ";");
  emitRawScore(w, k, n.D, scale);
  if (!op.getScore().empty()) {
    AttentionRegionEmitter score(op.getScore(), "sc_");
    FailureOr<SmallVector<std::string>> text = score.emitForward(in, "score");
    if (failed(text))
      return op->emitError() << "cannot emit the score region of the CPU "
                                "attention kernel";
    lines(w, *text);
  } else {
    w.line("const float score = s;");
  }
  w.line("sc[jj] = score;");
  w.line("if (score > blockMax) blockMax = score;");
  w.close();
  w.line("if (blockMax == -INFINITY) continue; // no kept key in this block");
  w.line("const float mNew = m > blockMax ? m : blockMax;");
  w.line("const float corr = expf(m - mNew); // 0 while m is -inf");
  w.line("l *= corr;");
  w.line("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d) acc[d] *= corr;");
  w.open("for (int64_t jj = 0; jj < jn; ++jj)");
  w.line("if (sc[jj] == -INFINITY) continue;");
  w.line("const float p = expf(sc[jj] - mNew);");
  w.line("l += p;");
  w.line("const int64_t vo = " +
         n.rowOffset(true, "b", "kvh", "j0 + jj", n.Dv) + ";");
  // Dropout scales the weight of v only: l (and so lse) sums every p.
  std::string weight = "p";
  if (drop.enabled) {
    w.line("const float pd = p * " + drop.factor("bh", "i", "j0 + jj") + ";");
    weight = "pd";
  }
  w.line("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d) acc[d] += " +
         weight + " * " + w.load(v, "vo + d") + ";");
  w.close();
  w.line("m = mNew;");
  w.close();
  w.line("const float inv = l > 0.0f ? 1.0f / l : 0.0f; // no kept key: 0");
  w.line("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d) " +
         w.store(out, "oo + d", "acc[d] * inv"));
  w.line(w.ptr(lse) + "[row] = l > 0.0f ? m + logf(l) : -INFINITY;");
  w.close();
  w.close();
  return success();
}

LogicalResult emitAttentionBackward(k::AttentionGradOp op,
                                    KernelSourceWriter &w) {
  Dims n = attentionDims(op);
  double scale = op.getScale().convertToDouble();
  AttentionRegionInputs in = attentionLoopInputs(w, op.getCaptures());
  Value q = op.getQ(), k = op.getK(), v = op.getV(), out = op.getOut();
  Value lse = op.getLse(), dout = op.getDout();
  AttentionDropout drop = emitAttentionDropout(
      w, op.getDropoutProbability(), op.getRngState(), "cpu");

  // Offsets of each floating capture's gradient in a task's partial buffer.
  SmallVector<int64_t> gradOffset(op.getCaptures().size(), -1);
  // (capture index, capture, its gradient)
  SmallVector<std::tuple<unsigned, Value, Value>> gradOf;
  int64_t gradTotal = 0;
  {
    auto grads = op.getCaptureGrads().begin();
    for (auto [c, capture] : llvm::enumerate(op.getCaptures())) {
      auto type = cast<RankedTensorType>(capture.getType());
      if (!isa<FloatType>(type.getElementType()))
        continue;
      gradOffset[c] = gradTotal;
      gradTotal += type.getNumElements();
      gradOf.push_back({static_cast<unsigned>(c), capture, *grads++});
    }
  }
  int64_t tasks = n.B * n.KVH;
  w.line("// flash attention backward: q [" + str(n.B) + ", " + str(n.H) +
         ", " + str(n.T) + ", " + str(n.D) + "], k/v [" + str(n.B) + ", " +
         str(n.KVH) + ", " + str(n.S) + ", " + str(n.D) + "/" + str(n.Dv) +
         "]; one task per (b, kv head)");
  std::string dkAll = w.scratch(
      "dkf_all", "float",
      {"attention_grad.dk_f32", schema::DType_F32, tasks * n.S * n.D});
  std::string dvAll = w.scratch(
      "dvf_all", "float",
      {"attention_grad.dv_f32", schema::DType_F32, tasks * n.S * n.Dv});
  // Doubles in an I64 buffer (the schema has no f64; only the kernel reads
  // them, as doubles).
  if (gradTotal > 0)
    w.scratch("partial", "double",
              {"attention_grad.capture_partials", schema::DType_I64,
               tasks * gradTotal});
  w.parallelFor(n.B * n.H * n.T * n.S * (n.D + n.Dv));
  w.open("for (int64_t task = 0; task < " + str(tasks) + "; ++task)");
  w.line("const int64_t b = task / " + str(n.KVH) + ", kvh = task % " +
         str(n.KVH) + ";");
  if (gradTotal > 0) {
    w.line("double* cg = partial + task * " + str(gradTotal) + ";");
    w.line("for (int64_t e = 0; e < " + str(gradTotal) + "; ++e) cg[e] = 0.0;");
  }
  w.line("float* dkf = " + dkAll + " + task * " + str(n.S * n.D) +
         "; // [S, D]");
  w.line("float* dvf = " + dvAll + " + task * " + str(n.S * n.Dv) +
         "; // [S, Dv]");
  w.line("for (int64_t e = 0; e < " + str(n.S * n.D) + "; ++e) dkf[e] = 0.0f;");
  w.line("for (int64_t e = 0; e < " + str(n.S * n.Dv) +
         "; ++e) dvf[e] = 0.0f;");
  w.line("float qrow[" + str(n.D) + "], dorow[" + str(n.Dv) + "], dq[" +
         str(n.D) + "];");
  w.open("for (int64_t hh = 0; hh < " + str(n.G) + "; ++hh)");
  w.line("const int64_t h = kvh * " + str(n.G) + " + hh, bh = b * " +
         str(n.H) + " + h;");
  w.open("for (int64_t i = 0; i < " + str(n.T) + "; ++i)");
  w.line("const int64_t row = bh * " + str(n.T) + " + i; // of lse");
  w.line("const int64_t qo = " + n.rowOffset(false, "b", "h", "i", n.D) +
         ", oo = " + n.rowOffset(false, "b", "h", "i", n.Dv) + ";");
  w.line("for (int64_t d = 0; d < " + str(n.D) + "; ++d) dq[d] = 0.0f;");
  w.line("const float L = " + w.ptr(lse) + "[row];");
  w.open("if (L != -INFINITY)"); // rows with no kept key: all zero
  w.line("for (int64_t d = 0; d < " + str(n.D) + "; ++d) qrow[d] = " +
         w.load(q, "qo + d") + ";");
  w.line("float Di = 0.0f;");
  w.open("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d)");
  w.line("dorow[d] = " + w.load(dout, "oo + d") + ";");
  w.line("Di += dorow[d] * " + w.load(out, "oo + d") + ";");
  w.close();
  w.open("for (int64_t j = 0; j < " + str(n.S) + "; ++j)");
  if (failed(emitMask(w, op, op.getMask(), in, "continue;")))
    return failure();
  w.line("const int64_t ko = " + n.rowOffset(true, "b", "kvh", "j", n.D) +
         ", vo = " + n.rowOffset(true, "b", "kvh", "j", n.Dv) + ";");
  emitRawScore(w, k, n.D, scale);
  AttentionRegionEmitter::Backward score;
  if (!op.getScore().empty()) {
    AttentionRegionEmitter emitter(op.getScore(), "sc_");
    CaptureGradHook hook = [&](unsigned c, const std::string &index,
                               const std::string &adjoint, unsigned) {
      return "cg[" + str(gradOffset[c]) + " + " + index + "] += (double)" +
             adjoint + ";";
    };
    FailureOr<AttentionRegionEmitter::Backward> text =
        emitter.emitBackward(in, "score", "dS", "ds", hook);
    if (failed(text))
      return op->emitError() << "cannot differentiate the score region in "
                                "the CPU attention kernel";
    score = std::move(*text);
  } else {
    score.forward.push_back("const float score = s;");
    score.reverse.push_back("const float ds = dS;");
  }
  lines(w, score.forward);
  w.line("const float p = expf(score - L);");
  // With dropout the forward used p z (z = keep / (1 - p_drop), the same
  // Philox draw): dv += p z dout, dP = z (dout . v); D_i = dout . out
  // already sums p z (dout . v).
  std::string weight = "p", dpOf = "dp";
  if (drop.enabled) {
    w.line("const float z = " + drop.factor("bh", "i", "j") + ";");
    w.line("const float pd = p * z;");
    weight = "pd";
    dpOf = "z * dp";
  }
  w.line("float dp = 0.0f;");
  w.open("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d)");
  w.line("dvf[j * " + str(n.Dv) + " + d] += " + weight + " * dorow[d];");
  w.line("dp += dorow[d] * " + w.load(v, "vo + d") + ";");
  w.close();
  w.line("const float dS = p * (" + dpOf + " - Di);");
  lines(w, score.reverse);
  w.line("const float g = " + ScalarExprEmitter::floatLiteral(scale) +
         " * ds;");
  w.open("for (int64_t d = 0; d < " + str(n.D) + "; ++d)");
  w.line("dq[d] += g * " + w.load(k, "ko + d") + ";");
  w.line("dkf[j * " + str(n.D) + " + d] += g * qrow[d];");
  w.close();
  w.close(); // j
  w.close(); // finite lse
  w.line("for (int64_t d = 0; d < " + str(n.D) + "; ++d) " +
         w.store(op.getDq(), "qo + d", "dq[d]"));
  w.close(); // i
  w.close(); // hh
  w.open("for (int64_t j = 0; j < " + str(n.S) + "; ++j)");
  w.line("const int64_t ko = " + n.rowOffset(true, "b", "kvh", "j", n.D) +
         ", vo = " + n.rowOffset(true, "b", "kvh", "j", n.Dv) + ";");
  w.line("for (int64_t d = 0; d < " + str(n.D) + "; ++d) " +
         w.store(op.getDk(), "ko + d", "dkf[j * " + str(n.D) + " + d]"));
  w.line("for (int64_t d = 0; d < " + str(n.Dv) + "; ++d) " +
         w.store(op.getDv(), "vo + d", "dvf[j * " + str(n.Dv) + " + d]"));
  w.close();
  w.close(); // task

  // Capture gradients: the tasks' partials summed in task order.
  for (auto [c, capture, grad] : gradOf) {
    int64_t offset = gradOffset[c];
    int64_t count = cast<RankedTensorType>(capture.getType()).getNumElements();
    w.open("for (int64_t e = 0; e < " + str(count) + "; ++e)");
    w.line("double sum = 0.0;");
    w.line("for (int64_t t = 0; t < " + str(tasks) + "; ++t) sum += partial[t * " +
           str(gradTotal) + " + " + str(offset) + " + e];");
    w.line(w.store(grad, "e", "(float)sum"));
    w.close();
  }
  return success();
}

} // namespace

bool hasAttentionCpuKernel(Operation *op) {
  return isa<k::AttentionOp, k::AttentionGradOp>(op);
}

LogicalResult emitAttentionCpuKernel(Operation *op, KernelSourceWriter &w) {
  if (auto forward = dyn_cast<k::AttentionOp>(op))
    return emitAttentionForward(forward, w);
  return emitAttentionBackward(cast<k::AttentionGradOp>(op), w);
}

} // namespace kiln
