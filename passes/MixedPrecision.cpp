//===- MixedPrecision.cpp - bf16 GEMMs and bf16 activations ---------------===//
//
// --kiln-mixed-precision: with `precision = bf16` in kiln.train, GEMMs read
// bf16 operands and the forward activations that are stored for long (until
// the backward reads them) are stored in bf16, as torch.autocast does: tensor
// cores run at their bf16 rate and activation memory halves. Every kernel
// still computes in fp32 (codegen widens bf16 loads and rounds bf16 stores),
// the parameters stay fp32 masters, the gradients that reach the optimizer
// are fp32 sums, and the optimizer state is fp32.
//
// It runs after autodiff, on the joint forward + backward graph, so no VJP of
// a mixed-type op is ever needed: the rounding a forward value gets is seen by
// the backward too (it reads the same bf16 tensor), and gradients flow
// through the converts unchanged.
//
// What is bf16 and what stays fp32 (the decisions, and why):
//  - GEMM operands: bf16 (tensor-core inputs), fp32 accumulation.
//  - Forward GEMM results: bf16 (fp32 accumulate, rounded output), the
//    logits included, as torch.autocast's head GEMM (and Liger's and llm.c's
//    fused classifiers) make them: cross_entropy and its gradient read the
//    bf16 logits and widen each as they load it, so the log-sum-exp, the
//    loss and the softmax are fp32 sums of rounded logits. The logits are
//    the widest tensor of a step ([N, V], 2^17 classes for Llama-3): fp32
//    ones were 4 more bytes an element written by the GEMM and 4 more read
//    (twice: the max-and-sum pass, then the gradient pass) by the kernel.
//    A GEMM that makes logits again in the backward (a classifier chunk
//    whose gradient runs apart from its loss) rounds them too, so the loss
//    and its gradient see the same values.
//  - Bias adds (a forward GEMM's result plus a broadcast), softmax outputs
//    and unary activations with a derivative formula applied to a forward
//    GEMM result (SwiGLU's silu(x w1)): stored in bf16, as torch.autocast
//    computes elementwise ops on bf16 inputs; every reader (the next GEMM,
//    GELU and its gradient, softmax_grad, SwiGLU's product and its
//    gradient) reads the rounded value. These are the big activations the
//    backward keeps (GELU input [B, T, 4C], attention probabilities
//    [B, H, T, T], silu(x w1) [B, T, F]).
//  - layer_norm's normalized output and GELU's output are read by GEMMs
//    only (in GPT-style blocks): their one bf16 copy serves the forward GEMM
//    and the backward weight-gradient GEMM, so the fp32 value dies at once.
//  - Attention: q, k, v are read in bf16 (the flash kernels' tensor-core
//    inputs; the same shared converts as GEMM operands), kiln.attention's
//    out is stored in bf16 (it is a GEMM input, the output projection, and
//    attention_grad keeps it), lse stays f32 (a log-sum-exp: bf16 would
//    shift every recomputed probability by up to ~0.4%). attention_grad
//    reads bf16 q, k, v, out and a bf16 copy of dout, and writes dq, dk, dv
//    in bf16: the kernels accumulate them in fp32, and in a transformer
//    their only readers are views, concats and the projection's backward
//    GEMMs, which would round them to bf16 anyway, so the rounding happens
//    once either way and the tensors are half the size. Gradients of
//    captured tensors (a learned bias slope) stay f32: they go to the
//    optimizer like every parameter gradient.
//  - Stays fp32: the residual stream (what layer_norm reads and its backward
//    keeps: it accumulates many small updates, which bf16's 8-bit mantissa
//    would drop), layer_norm mean/rstd, the loss and metrics,
//    the gradients (activation gradients too: they live briefly), master
//    weights and optimizer state. Reductions accumulate in fp32 or wider.
//    One exception: an activation gradient a backward GEMM writes whose
//    every use is pointwise arithmetic that ends rounded to bf16 (SwiGLU's
//    and GELU's gradients, [B, T, F]: their results only feed the GEMMs of
//    the layer below) is stored in bf16, rounded once in the GEMM's
//    epilogue, as torch.autocast's bf16 GEMM writes it: the fp32 tensor would
//    be the largest write and read of the block's backward for digits the
//    next rounding drops anyway.
//
// Algorithm, for every function (the forward part of @step is what its
// loss and metric results depend on; @eval is all forward; @update has no
// GEMMs):
//  1. Read `precision` from kiln.train: absent, "fp32" or "tf32" (TF32 is a
//     GEMM setting codegen reads): nothing to do; "bf16": continue; anything
//     else: error.
//  2. Forward GEMM results (f32), and backward ones that are logits, become
//     bf16; cross-entropy reads them as they are (isLogits), every other
//     non-GEMM reader reads a widening kiln.convert.
//  3. Bias adds, softmax results and unary activations of GEMM results
//     (isActivationOfGemm) of the forward part, unless an fp32
//     reader needs them (residual stream, func.return): stored as
//     their bf16 convert; every other reader reads its widening convert.
//  4. For every f32 kiln.matmul, for each operand: a value widened from
//     bf16 is read as that bf16 value; a reshape of a value reads the
//     reshape of the value's bf16 copy (convert commutes with reshape, so
//     the forward GEMM and the backward GEMM that views the activation as a
//     matrix share one copy), and a transpose likewise (the bf16 transpose
//     moves half the bytes, and the transpose of a widened value needs no
//     convert at all: q, k, v heads, attention's out and dq/dk/dv); else
//     the bf16 convert made for an earlier GEMM is reused, or one is made
//     right after the value's definition. f32 views and widenings left
//     without readers are erased.
//  5. An operand that is already bf16 is left alone; integer or f16 GEMMs
//     are not touched.
//  6. Every f32 kiln.attention (before step 4, so the GEMMs share its
//     converts): q, k, v read as in step 4, out becomes bf16 and its fp32
//     readers read a widening convert; every f32 kiln.attention_grad reads
//     the bf16 forms of q, k, v, out, dout and produces bf16 dq, dk, dv
//     (fp32 readers read their widening).
//  7. A kiln.cross_entropy_grad or kiln.matmul whose every reader is its
//     bf16 convert produces bf16 itself: its kernel (or the GEMM's
//     epilogue) rounds each element once, as the convert did, so the values
//     are the same and the fp32 tensor is never stored: the logits'
//     gradient (read by the dx and dw GEMMs; an [N, V] buffer the size of
//     the logits, 206 MB per 1,024-row chunk of GPT-2's vocabulary) and the
//     backward GEMM whose only reader is attention_grad's bf16 dout (the
//     output projection's input gradient, [B, T, C] per layer: its fp32
//     write, the convert kernel's read and a launch saved).
//  8. A backward kiln.matmul (not in the forward part of a function that
//     has one: a loss or metric result) whose f32 result
//     reaches, through pointwise ops only, narrowing converts to bf16 and
//     nothing else (onlyRoundedOnward) produces bf16 itself; its readers
//     read a widening convert (fusion then loads the bf16 value in their
//     kernel).
//
//===----------------------------------------------------------------------===//

#include "passes/FusableOps.h"
#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNMIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Step 1: the precision setting (fp32 when there is no kiln.train).
Precision readPrecision(ModuleOp module) {
  TrainConfigAttr train = getTrainConfig(module);
  return train ? train.getPrecision() : Precision::Fp32;
}

bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

/// The ops the loss, eval loss and metric results depend on: the forward
/// part of the function (the rest of @step is its backward).
llvm::SmallPtrSet<Operation *, 32> forwardOps(func::FuncOp func) {
  llvm::SmallPtrSet<Operation *, 32> forward;
  SmallVector<Value> work;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    std::optional<Role> role = getResultRole(func, i);
    if (role == Role::Loss || role == Role::EvalLoss || role == Role::Metric)
      work.push_back(value);
  }
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  return forward;
}

/// Calls `fn` for every use of `value`, looking through reshapes (views).
void forEachReader(Value value, function_ref<void(OpOperand &)> fn) {
  for (OpOperand &use : value.getUses()) {
    if (auto view = dyn_cast<ReshapeOp>(use.getOwner()))
      forEachReader(view.getResult(), fn);
    else
      fn(use);
  }
}

/// Readers that need the fp32 value itself: a norm's input (the residual
/// stream, also kept for its backward) and the function's results (losses
/// and metrics are f32).
bool needsFp32(OpOperand &use) {
  Operation *user = use.getOwner();
  unsigned i = use.getOperandNumber();
  if (isa<LayerNormOp, RmsNormOp>(user))
    return i == 0;
  if (isa<LayerNormGradOp>(user))
    return i == 0 || i == 2 || i == 3;
  if (isa<RmsNormGradOp>(user))
    return i == 0 || i == 2;
  if (isa<MatmulAccumulateOp>(user)) // the fp32 sum the GEMM adds into
    return i == 0;
  return isa<func::ReturnOp>(user);
}

/// A GEMM operand (a tensor-core input): either operand of kiln.matmul, the
/// factors of kiln.matmul_accumulate (not the sum it adds into).
bool isGemmOperand(OpOperand &use) {
  Operation *user = use.getOwner();
  return isa<MatmulOp>(user) ||
         (isa<MatmulAccumulateOp>(user) && use.getOperandNumber() != 0);
}

/// The logits a cross-entropy kernel reads: bf16 ones are widened as they
/// are loaded, so they are read as they are (no f32 copy of [N, V]).
bool isLogits(OpOperand &use) {
  return isa<CrossEntropyOp, CrossEntropyGradOp>(use.getOwner()) &&
         use.getOperandNumber() == 0;
}

bool anyReaderNeedsFp32(Value value) {
  bool needs = false;
  forEachReader(value, [&](OpOperand &use) { needs |= needsFp32(use); });
  return needs;
}

Value createConvert(OpBuilder &b, Value value, Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  return b.create<ConvertOp>(value.getLoc(), type.clone(elementType), value);
}

/// The widening convert of a bf16 value, if `value` is one.
Value widenedFrom(Value value) {
  auto convert = value.getDefiningOp<ConvertOp>();
  if (convert && convert.getInput().getType().getElementType().isBF16() &&
      isF32Tensor(convert.getResult()))
    return convert.getInput();
  return Value();
}

/// Makes every GEMM reading `value` read `bits` (its bf16 form), and every
/// other reader except `keep` the f32 widening of `bits`, placed right
/// before the first of them:
/// there the fusion pass puts it into that reader's kernel (or clones it into
/// each reader's), not behind the producer, where it would become an fp32
/// copy that lives as long as the bf16 one.
void readWidened(Value value, Value bits, Operation *keep) {
  SmallVector<OpOperand *> readers;
  Operation *first = nullptr;
  for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
    if (use.getOwner() == keep)
      continue;
    if (isGemmOperand(use) || isLogits(use)) { // read as the bf16 value
      use.set(bits);
      continue;
    }
    readers.push_back(&use);
    if (!first || use.getOwner()->isBeforeInBlock(first))
      first = use.getOwner();
  }
  if (!first)
    return;
  OpBuilder b(first);
  Value widened = createConvert(b, bits, b.getF32Type());
  for (OpOperand *use : readers)
    use->set(widened);
}

class MixedPrecisionRewriter {
public:
  explicit MixedPrecisionRewriter(func::FuncOp func)
      : func(func), forward(forwardOps(func)) {}

  void run() {
    roundForwardGemmResults();
    storeActivationsInBf16();
    convertAttention();
    convertGemmOperands();
    eraseDeadViews();
    roundResultsReadInBf16();
    roundGradientsOnlyRoundedOnward();
  }

private:
  /// Step 2.
  void roundForwardGemmResults() {
    func.walk([&](MatmulOp matmul) {
      Value result = matmul.getResult();
      if (!isF32Tensor(result) || !isF32Tensor(matmul.getLhs()) ||
          !isF32Tensor(matmul.getRhs()))
        return;
      // Logits are rounded wherever they are made: a backward GEMM that
      // makes them again (a classifier chunk whose gradient could not run
      // with its loss) rounds them as the loss's forward GEMM did.
      bool logits = false;
      forEachReader(result, [&](OpOperand &use) { logits |= isLogits(use); });
      if (!forward.contains(matmul) && !logits)
        return;
      auto type = cast<RankedTensorType>(result.getType());
      OpBuilder b(matmul->getContext());
      b.setInsertionPointAfter(matmul);
      result.setType(type.clone(b.getBF16Type()));
      readWidened(result, result, nullptr);
      // The GEMM's bf16 result is what later GEMMs read (step 4).
    });
  }

  /// A forward GEMM result plus a broadcast (of a bias).
  static bool isBiasAdd(Operation *op) {
    if (!isa<AddOp>(op))
      return false;
    auto fromGemm = [](Value v) {
      Value bits = widenedFrom(v);
      return bits && bits.getDefiningOp<MatmulOp>();
    };
    Value a = op->getOperand(0), b = op->getOperand(1);
    return (fromGemm(a) && b.getDefiningOp<BroadcastOp>()) ||
           (fromGemm(b) && a.getDefiningOp<BroadcastOp>());
  }

  /// A unary formula op with a derivative (silu, sigmoid, relu, ...) of a
  /// forward GEMM result: SwiGLU's silu(x w1), which its backward keeps.
  static bool isActivationOfGemm(Operation *op) {
    auto formula = dyn_cast<ScalarFormulaOpInterface>(op);
    if (!formula || formula.getDerivativeFormula().empty() ||
        op->getNumOperands() != 1)
      return false;
    Value bits = widenedFrom(op->getOperand(0));
    return bits && bits.getDefiningOp<MatmulOp>();
  }

  /// Step 3.
  void storeActivationsInBf16() {
    SmallVector<Value> stored;
    for (Operation &op : func.getBody().front()) {
      if (!forward.contains(&op) ||
          !(isa<SoftmaxOp>(op) || isBiasAdd(&op) || isActivationOfGemm(&op)))
        continue;
      Value value = op.getResult(0);
      if (isF32Tensor(value) && !anyReaderNeedsFp32(value))
        stored.push_back(value);
    }
    OpBuilder b(func.getContext());
    for (Value value : stored) {
      b.setInsertionPointAfter(value.getDefiningOp());
      Value bits = createConvert(b, value, b.getBF16Type());
      readWidened(value, bits, bits.getDefiningOp());
    }
  }

  /// Step 4: the bf16 value a GEMM reads for f32 `value`.
  Value bf16Copy(Value value) {
    if (Value bits = widenedFrom(value))
      return bits;
    auto it = copies.find(value);
    if (it != copies.end())
      return it->second;
    OpBuilder b(value.getContext());
    Value copy;
    Operation *def = value.getDefiningOp();
    if (def && isa<ReshapeOp, TransposeOp, SliceOp>(def)) {
      // reshape(x) / transpose(x) / slice(x) read as the same op on the bf16
      // copy of x,
      // right after that copy: rounding commutes with moving elements, so
      // the values are the same, and a transpose moves half the bytes. When
      // x is itself widened from bf16 (an attention result, a stored
      // activation), no convert is left at all.
      Value source = bf16Copy(def->getOperand(0));
      if (Operation *sourceDef = source.getDefiningOp())
        b.setInsertionPointAfter(sourceDef);
      else
        b.setInsertionPointToStart(cast<BlockArgument>(source).getOwner());
      auto type = cast<RankedTensorType>(value.getType());
      Operation *view = b.clone(*def);
      view->setOperand(0, source);
      view->getResult(0).setType(type.clone(b.getBF16Type()));
      copy = view->getResult(0);
    } else {
      if (auto arg = dyn_cast<BlockArgument>(value))
        b.setInsertionPointToStart(arg.getOwner());
      else
        b.setInsertionPointAfter(value.getDefiningOp());
      copy = createConvert(b, value, b.getBF16Type());
    }
    copies[value] = copy;
    return copy;
  }

  /// Makes `result` bf16: GEMMs read it as is, every other reader reads a
  /// widening convert -- except attention_grad, which reads it in bf16.
  static void storeResultInBf16(Value result) {
    auto type = cast<RankedTensorType>(result.getType());
    result.setType(type.clone(BFloat16Type::get(result.getContext())));
    SmallVector<OpOperand *> gradReaders;
    for (OpOperand &use : result.getUses())
      if (isa<AttentionGradOp>(use.getOwner()))
        gradReaders.push_back(&use);
    readWidened(result, result, nullptr);
    for (OpOperand *use : gradReaders)
      use->set(result);
  }

  /// Step 6.
  void convertAttention() {
    SmallVector<AttentionOp> forwardOps;
    SmallVector<AttentionGradOp> gradOps;
    func.walk([&](Operation *op) {
      if (auto attention = dyn_cast<AttentionOp>(op);
          attention && isF32Tensor(attention.getQ()))
        forwardOps.push_back(attention);
      if (auto grad = dyn_cast<AttentionGradOp>(op);
          grad && isF32Tensor(grad.getQ()))
        gradOps.push_back(grad);
    });
    for (AttentionOp attention : forwardOps) {
      for (OpOperand *operand : {&attention.getQMutable(),
                                 &attention.getKMutable(),
                                 &attention.getVMutable()}) {
        noteView(operand->get());
        operand->set(bf16Copy(operand->get()));
      }
      storeResultInBf16(attention.getOut());
    }
    for (AttentionGradOp grad : gradOps) {
      // out is the forward's (now widened) result; dout an f32 gradient.
      for (OpOperand *operand :
           {&grad.getQMutable(), &grad.getKMutable(), &grad.getVMutable(),
            &grad.getOutMutable(), &grad.getDoutMutable()})
        if (isF32Tensor(operand->get())) {
          noteView(operand->get());
          operand->set(bf16Copy(operand->get()));
        }
      for (Value result : {grad.getDq(), grad.getDk(), grad.getDv()})
        storeResultInBf16(result);
    }
  }

  void convertGemmOperands() {
    func.walk([&](Operation *op) {
      for (OpOperand &operand : op->getOpOperands()) {
        if (!isGemmOperand(operand) || !isF32Tensor(operand.get())) // step 5
          continue;
        noteView(operand.get());
        operand.set(bf16Copy(operand.get()));
      }
    });
  }

  /// Step 7.
  void roundResultsReadInBf16() {
    SmallVector<Value> results;
    func.walk([&](Operation *op) {
      if (isa<CrossEntropyGradOp, MatmulOp>(op))
        results.push_back(op->getResult(0));
    });
    for (Value result : results) {
      if (!isF32Tensor(result) || result.use_empty())
        continue;
      auto bf16 = cast<RankedTensorType>(result.getType())
                      .clone(BFloat16Type::get(result.getContext()));
      SmallVector<ConvertOp> converts;
      bool allConverts = true;
      for (Operation *user : result.getUsers()) {
        auto convert = dyn_cast<ConvertOp>(user);
        allConverts &= convert && convert.getResult().getType() == bf16;
        if (allConverts)
          converts.push_back(convert);
      }
      if (!allConverts)
        continue;
      result.setType(bf16);
      for (ConvertOp convert : converts) {
        convert.getResult().replaceAllUsesWith(result);
        convert.erase();
      }
    }
  }

  /// Whether every value computed from `value` by pointwise ops (the ops
  /// fusion puts into one loop) ends in a narrowing convert to bf16 and in
  /// nothing else: no other op, no function result.
  static bool onlyRoundedOnward(Value value) {
    SmallVector<Value> work{value};
    llvm::SmallPtrSet<Operation *, 8> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (!seen.insert(user).second)
          continue;
        if (auto convert = dyn_cast<ConvertOp>(user)) {
          if (getElementTypeOrSelf(convert.getResult()).isBF16())
            continue;
          return false;
        }
        if (!fusion::isPointwise(user) || user->getNumResults() != 1 ||
            !isF32Tensor(user->getResult(0)))
          return false;
        work.push_back(user->getResult(0));
      }
    }
    return true;
  }

  /// Step 8.
  void roundGradientsOnlyRoundedOnward() {
    if (forward.empty()) // no loss, no gradients
      return;
    SmallVector<MatmulOp> gemms;
    func.walk([&](MatmulOp matmul) {
      if (!forward.contains(matmul) && isF32Tensor(matmul.getResult()) &&
          !matmul.getResult().use_empty() && onlyRoundedOnward(matmul.getResult()))
        gemms.push_back(matmul);
    });
    for (MatmulOp matmul : gemms) {
      Value result = matmul.getResult();
      auto type = cast<RankedTensorType>(result.getType());
      result.setType(type.clone(BFloat16Type::get(result.getContext())));
      readWidened(result, result, nullptr);
    }
  }

  /// Records `value` for eraseDeadViews when a view or a widening makes it.
  void noteView(Value value) {
    Operation *def = value.getDefiningOp();
    if (def && (isa<ReshapeOp, TransposeOp, SliceOp>(def) || widenedFrom(value)))
      views.insert(def);
  }

  /// f32 views and widenings only bf16 readers read are now dead (and so
  /// may be the views they were made from): a dead f32 transpose would
  /// still be a kernel.
  void eraseDeadViews() {
    while (!views.empty()) {
      Operation *view = views.pop_back_val();
      if (!view->use_empty())
        continue;
      Value input = view->getOperand(0);
      view->erase();
      noteView(input);
    }
  }

  func::FuncOp func;
  llvm::SmallPtrSet<Operation *, 32> forward;
  llvm::DenseMap<Value, Value> copies;
  llvm::SetVector<Operation *> views; // f32 views that may have died
};

struct KilnMixedPrecisionPass
    : public mlir::kiln::impl::KilnMixedPrecisionBase<KilnMixedPrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (readPrecision(module) != Precision::Bf16)
      return;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (func.getBody().hasOneBlock())
        MixedPrecisionRewriter(func).run();
  }
};

} // namespace
