//===- CudaOptimizerKernels.cpp - Accumulation, clipping scale, updates ---===//
//
// The CUDA kernels of the ops in ir/KilnOptimizerOps.td, with the CPU
// kernels' semantics (CpuOptimizerKernels.cpp): the updates work in place,
// a non-finite `scale` skips the step (nothing written; update_sq = 0 and
// param_sq of the unchanged parameter are still reported).
//
// An update kernel gives each update op a segment of its grid (one segment
// for a single op; one per parameter for a multi-tensor kernel, a kiln.fusion
// "optimizer", so the whole update is one launch). A segment's blocks stride
// over its parameter running the formulas shared with the CPU
// (emitUpdateElementStatements); each thread sums its elements' squared
// update and squared new value in float, each block combines its threads
// (kiln_block_sum_double), and the segment's last block (kiln_last_of on the
// segment's counter) adds the segment's block partials in block order: the
// same bits on every run, no floating-point atomics. Which segment a block
// runs is a static table in the source (a chain of `blockIdx.x < end`
// tests), since every parameter has a static size and its own buffer.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaBespokeKernels.h"

#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string literal(const APFloat &v) {
  return ScalarExprEmitter::floatLiteral(v.convertToDouble());
}

// The blocks of one update inside its kernel, as C expressions: blocks
// [first, first + count) of the grid run it over `elements` parameters,
// their norm partials at partial[2 * block], its last-block counter `done`.
// A single update has literals (segment 0 of the whole grid); a
// multi-tensor kernel reads them from its segment table.
struct UpdateSegment {
  std::string first, count, elements, done;
};

// The update kernels' scratch: per-block norm partials and one last-block
// counter per segment.
void declareUpdateScratch(KernelSourceWriter &w, uint32_t blocks,
                          size_t segments) {
  w.global("__device__ double " + kEntryPlaceholder + "_partial[" +
           str(2 * blocks) + "];");
  w.global("__device__ unsigned int " + kEntryPlaceholder + "_done[" +
           str(segments) + "];");
}

// Writes the update of optimizer op `op` over the blocks of `seg`: the
// guard, the scalars, a loop over the parameter strided by the segment's
// threads running the shared formulas (emitUpdateElementStatements) when
// the scale is finite, and the norm reduction into update_sq / param_sq.
// `name` gives the pointer of each of op's operands and results. Ends the
// segment's blocks with `return`.
void emitUpdateSegment(Operation *op, KernelSourceWriter &w,
                       const UpdateSegment &seg,
                       function_ref<std::string(Value)> name) {
  Value param = op->getOperand(0);
  Value scale = op->getOperands().back();
  Value updateSq = op->getResult(op->getNumResults() - 2);
  Value paramSq = op->getResult(op->getNumResults() - 1);
  std::string partial = (kEntryPlaceholder + "_partial").str();
  w.line("const float scale = " + name(scale) + "[0];");
  w.line("const bool apply = isfinite(scale); // else: skipped step");
  emitUpdateScalarStatements(op, w, name);
  w.line("const int64_t block = (int64_t)blockIdx.x - " + seg.first + ";");
  w.line("const int64_t stride = (int64_t)" + seg.count + " * blockDim.x;");
  w.line("float du = 0.0f, pp = 0.0f;");
  auto accumulateNorms = [&] {
    w.line("const float delta = pn - p;");
    w.line("du += delta * delta;");
    w.line("pp += pn * pn;");
  };
  // Runs of 8 elements per thread: the parameter, gradient and state
  // loaded whole into registers (kiln_lanes8: 32-byte runs, 16-byte vector
  // loads; every buffer starts 256-byte aligned), updated lane by lane, the
  // results stored whole (nothing when the step is skipped). One element
  // per thread keeps too few loads in flight for the memory bandwidth.
  auto lanes = [&](Value v) { return PointwiseBody::laneCopy(name(v)); };
  w.line("const int64_t runs = " + seg.elements + " / 8;");
  w.open("for (int64_t q = block * blockDim.x + threadIdx.x; q < runs; q += stride)");
  w.line("const int64_t i0 = q * 8;");
  for (Value v : updateElementOperands(op))
    w.line("const kiln_lanes8<float> " + lanes(v) + " = kiln_load_lanes8(" + name(v) +
           " + i0);");
  for (Value v : updateElementResults(op))
    w.line("kiln_lanes8<float> " + lanes(v) + ";");
  w.open("KILN_UNROLL for (int j = 0; j < 8; ++j)");
  w.line("const float p = " + lanes(param) + ".v[j];");
  w.line("float pn = p;");
  w.open("if (apply)");
  emitUpdateElementStatements(
      op, w, [&](Value v) { return lanes(v) + ".v"; }, "j");
  w.close();
  accumulateNorms();
  w.close();
  w.open("if (apply)");
  for (Value v : updateElementResults(op))
    w.line("kiln_store_lanes8(" + name(v) + " + i0, " + lanes(v) + ");");
  w.close();
  w.close();
  // The last (fewer than 8) elements, one per thread.
  w.open("for (int64_t i = runs * 8 + block * blockDim.x + threadIdx.x; i < " +
         seg.elements + "; i += stride)");
  w.line("const float p = " + name(param) + "[i];");
  w.line("float pn = p;");
  w.open("if (apply)");
  emitUpdateElementStatements(op, w, name);
  w.close();
  accumulateNorms();
  w.close();
  w.line("const double blockDu = kiln_block_sum_double(du);");
  w.line("const double blockPp = kiln_block_sum_double(pp);");
  w.open("if (threadIdx.x == 0)");
  w.line(partial + "[2 * blockIdx.x] = blockDu;");
  w.line(partial + "[2 * blockIdx.x + 1] = blockPp;");
  w.close();
  w.line("if (!kiln_last_of(&" + seg.done + ", " + seg.count + ")) return;");
  w.line("double sumDu = 0.0, sumPp = 0.0;");
  w.open("for (unsigned int b = " + seg.first + " + threadIdx.x; b < " +
         seg.first + " + " + seg.count + "; b += blockDim.x)");
  w.line("sumDu += __ldcg(&" + partial + "[2 * b]);");
  w.line("sumPp += __ldcg(&" + partial + "[2 * b + 1]);");
  w.close();
  w.line("sumDu = kiln_block_sum_double(sumDu);");
  w.line("sumPp = kiln_block_sum_double(sumPp);");
  w.open("if (threadIdx.x == 0)");
  w.line(name(updateSq) + "[0] = (float)sumDu;");
  w.line(name(paramSq) + "[0] = (float)sumPp;");
  w.close();
  w.line("return;");
}

// The blocks an update of `elements` parameters gets: a thread per run of
// 8 (emitUpdateSegment), at most kCudaMaxGrid.
uint32_t updateBlocks(int64_t elements) {
  return cudaGridFor((elements + 7) / 8, kCudaBlock);
}

// One update op alone: segment 0 is the whole grid.
LogicalResult emitSingleUpdate(Operation *op, KernelSourceWriter &w,
                               CudaLaunch &launch) {
  uint32_t grid = updateBlocks(numElements(shapeOf(op->getOperand(0))));
  launch = {grid, kCudaBlock, 0};
  declareUpdateScratch(w, grid, 1);
  w.line("// " + updateSummary(op));
  UpdateSegment seg{"0u", str(grid) + "u",
                    str(numElements(shapeOf(op->getOperand(0)))),
                    (kEntryPlaceholder + "_done[0]").str()};
  emitUpdateSegment(op, w, seg, [&](Value v) { return w.ptr(v); });
  return success();
}

bool isUpdate(Operation *op) {
  return isa<k::AdamOp, k::SgdOp, k::SgdMomentumOp>(op);
}

// result = acc + value * scale (in place on the accumulator).
LogicalResult emitAccumulate(Operation *op, KernelSourceWriter &w,
                             CudaLaunch &launch) {
  auto acc = cast<k::AccumulateOp>(op);
  int64_t n = numElements(shapeOf(acc.getAcc()));
  std::string scale = literal(acc.getScale());
  launch = {cudaGridFor(n, kCudaBlock), kCudaBlock, 0};
  w.line("// accumulate " + str(n) + " elements, in place: acc += value * " +
         scale);
  openGridStrideLoop(w, n);
  w.line(w.ptr(acc.getResult()) + "[i] = " + w.ptr(acc.getAcc()) + "[i] + " +
         w.ptr(acc.getValue()) + "[i] * " + scale + ";");
  w.close();
  return success();
}

// NaN for a non-finite loss or grad norm, else the clip_grad_norm_ factor.
// One thread does it (launched as one warp).
LogicalResult emitGradScale(Operation *op, KernelSourceWriter &w,
                            CudaLaunch &launch) {
  launch = {1, 32, 0};
  w.line("if (blockIdx.x != 0 || threadIdx.x != 0) return;");
  emitGradScaleStatements(cast<k::GradScaleOp>(op), w);
  return success();
}

} // namespace

bool hasOptimizerCudaKernel(Operation *op) {
  return isa<k::AccumulateOp, k::GradScaleOp, k::AdamOp, k::SgdOp,
             k::SgdMomentumOp>(op);
}

LogicalResult emitOptimizerCudaKernel(Operation *op, KernelSourceWriter &w,
                                      CudaLaunch &launch) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<k::AccumulateOp>(
          [&](auto) { return emitAccumulate(op, w, launch); })
      .Case<k::GradScaleOp>([&](auto) { return emitGradScale(op, w, launch); })
      .Case<k::AdamOp, k::SgdOp, k::SgdMomentumOp>(
          [&](auto) { return emitSingleUpdate(op, w, launch); })
      .Default([&](Operation *) {
        return op->emitError()
               << "codegen has no CUDA kernel for '" << op->getName() << "'";
      });
}

// The segment table: one row per update, sorted by first block:
//   { first block, blocks, elements, formula, buffers[operands..., results...] }
// Blocks find their row by binary search, then run the body of its formula
// (one `case` per distinct op kind and attributes, so the text and the
// compile time grow with the number of formulas, not of parameters) on the
// pointers buffers[row[4 + k]].
LogicalResult emitMultiTensorUpdateCudaKernel(const KernelGroup &group,
                                              KernelSourceWriter &w,
                                              CudaLaunch &launch) {
  constexpr size_t kMaxSlots = 12; // adam: 7 operands, 5 results
  auto bufferIndex = [&](Value v) -> int64_t {
    auto in = llvm::find(group.inputs, v);
    if (in != group.inputs.end())
      return in - group.inputs.begin();
    auto out = llvm::find(group.outputs, v);
    if (out != group.outputs.end())
      return group.inputs.size() + (out - group.outputs.begin());
    return -1;
  };
  SmallVector<Operation *> formulas; // first op of each distinct formula
  SmallVector<std::string> formulaKeys, rows;
  uint32_t blocks = 0;
  for (Operation *op : group.ops) {
    if (!isUpdate(op))
      return op->emitError() << "a multi-tensor optimizer kernel holds "
                                "adam, sgd and sgd_momentum updates only";
    // The formula text depends on the op kind and its own attributes only
    // (not on discardable ones such as kiln.not_fused).
    std::string key;
    llvm::raw_string_ostream os(key);
    os << op->getName();
    for (NamedAttribute attr : op->getAttrs())
      if (!attr.getName().getValue().contains('.'))
        os << " " << attr.getName().getValue() << "=" << attr.getValue();
    auto known = llvm::find(formulaKeys, key);
    size_t formula = known - formulaKeys.begin();
    if (known == formulaKeys.end()) {
      formulaKeys.push_back(key);
      formulas.push_back(op);
    }
    int64_t n = numElements(shapeOf(op->getOperand(0)));
    uint32_t count = updateBlocks(n);
    std::string row = "{" + str(blocks) + "u, " + str(count) + "u, " +
                      str(n) + "u, " + str(formula) + "u";
    SmallVector<Value> slots(op->getOperands());
    slots.append(op->result_begin(), op->result_end());
    for (Value v : slots) {
      int64_t index = bufferIndex(v);
      if (index < 0)
        return op->emitError() << "reads or writes a value that is no "
                                  "buffer of the multi-tensor kernel";
      row += ", " + str(index) + "u";
    }
    rows.push_back(row + "}");
    blocks += count;
  }
  launch = {blocks, kCudaBlock, 0};
  declareUpdateScratch(w, blocks, rows.size());
  emitSegmentLookup(w, rows, 4 + kMaxSlots,
                    str(group.ops.size()) + " optimizer updates in one launch",
                    "first block, blocks, elements, formula, buffers");
  w.line("const unsigned int first = row[0], count = row[1];");
  w.line("const int64_t n = row[2];");
  w.open("switch (row[3])");
  for (auto [formula, op] : llvm::enumerate(formulas)) {
    w.open("case " + str(formula) + ":");
    w.line("// formula " + str(formula) + ": " + formulaKeys[formula]);
    SmallVector<Value> slots(op->getOperands());
    slots.append(op->result_begin(), op->result_end());
    for (auto [k, v] : llvm::enumerate(slots))
      w.line("float* b" + str(k) + " = (float*)buffers[row[" + str(4 + k) +
             "]];");
    UpdateSegment seg{"first", "count", "n",
                      (kEntryPlaceholder + "_done[lo]").str()};
    emitUpdateSegment(op, w, seg, [&](Value v) {
      return "b" + str(llvm::find(slots, v) - slots.begin());
    });
    w.close();
  }
  w.close();
  return success();
}

} // namespace kiln
