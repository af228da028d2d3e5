//===- FuseGemmEpilogue.cpp - GEMMs with their bias / GELU epilogues ------===//
//
// A separate pass from --kiln-fusion (and run just before it) because the
// rule is different: not a group growing over element-wise loops, but a
// match on one GEMM's operands and result, whose outcome is one GEMM call
// with a cuBLASLt epilogue (the CPU applies the same formulas after sgemm).
//
// Algorithm, for each of @step, @update and @eval (single-block bodies).
//  0. A GEMM with bf16 operands whose f32 result is read only by its bf16
//     rounding writes bf16 itself (the same fp32 accumulator rounded once).
// A matmul qualifies when it is one GEMM matrix (batch 1 after codegen folds
// a shared [K, N] rhs into the rows) with an f32 result:
//  1. forward, P = matmul(...) read only by
//       a. add(P, broadcast(bias [N] along the rows)) -> Bias, then, when the
//          sum S is read by a gelu G and every other reader of S runs after
//          G: + gelu -> BiasGelu (S yielded too when read outside: the aux
//          output, the backward's gelu input);
//       b. gelu(P) -> Gelu (P yielded as the aux output when read outside);
//  2. backward, gelu_grad(x, P) with P read only there -> Dgelu (x is the
//     aux input), and + a reduce_sum of its result over the leading dims
//     (the bias gradient) -> DgeluBgrad;
//  3. a reduce_sum R of X over its leading dims (a bias gradient) where a
//     qualifying matmul reads X (or a reshape of the same value) as its k-side
//     rows -- rhs [K, N] or transposed lhs [K, M] -- with the same last dim:
//     the GEMM reduces that operand over k -> BgradB / BgradA.
//  GELU epilogues that keep or read the gelu input (aux) need N % 8 == 0
//  (cuBLASLt's aux leading dimension).
//  Under precision = bf16 (cuBLASLt: bias and aux have D's type, other types
//  only for IMMA and fp8 -- cublasLt.h, BIAS_DATA_TYPE, EPILOGUE_AUX_DATA_TYPE):
//   1c. forward, a bf16 GEMM's widened product + bias [+ gelu], each rounded
//       once to bf16 -> Bias / BiasGelu with a bf16 D, bias and aux;
//   2b. backward, gelu_grad(widen(Ab), P) for an f32 GEMM with bf16 operands,
//       read only as its bf16 rounding Gb (the next GEMMs' operand) and by
//       bias-gradient sums -> Dgelu with a bf16 D and the bf16 aux Ab (no f32
//       copy of the gelu input); the sums read widen(Gb), so that 3 makes
//       them the BgradB of the weight-gradient GEMM reading Gb (in fp32:
//       DGELU_BGRAD's bias would be bf16 here, D's type);
//   3b. the operand sum of 3 where the GEMM reads the bf16 form of the summed
//       value: its exact widening (no rounding moves) or its rounding (the
//       bias gradient becomes the fp32 sum of the bf16 values the weight
//       gradient GEMM multiplies, as torch.autocast's linear backward sums
//       its bf16 grad_output). The bias gradient stays f32 (D's type).
//  A group is placed at its last member; it is refused when a value it
//  yields is read by an op before that point. Refused candidates get
//  `kiln.not_fused` on the matmul with the reason (fusion.txt lists them).
//  4. Each group becomes kiln.fusion gemm: the matmul first, then the
//     epilogue ops, yielding the values read outside.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionReport.h"
#include "passes/GemmEpilogueMatch.h"
#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFUSEGEMMEPILOGUE
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gemm_epilogue;

namespace {

// One GEMM and its epilogue ops, in block order once sorted.
struct GemmGroup {
  MatmulOp matmul;
  SmallVector<Operation *> epilogue; // in the order they compute
  // bias gradient of an operand: the reduce_sum to replace and the operand
  // index (0 lhs, 1 rhs) the GEMM reduces over k.
  ReduceSumOp operandSum;
  unsigned sumOperand = 0;
  // bf16 Dgelu: the widening of the bf16 aux, cloned into the kernel (its
  // other readers, if any, keep it), never moved.
  Operation *auxWiden = nullptr;
};

class GemmEpilogueFuser {
public:
  explicit GemmEpilogueFuser(func::FuncOp func)
      : block(func.getBody().front()) {}

  void run() {
    roundInGemms();
    SmallVector<MatmulOp> matmuls;
    for (Operation &op : block.without_terminator())
      if (auto matmul = dyn_cast<MatmulOp>(op))
        matmuls.push_back(matmul);
    SmallVector<GemmGroup> groups;
    // 1 and 2: the matmul's own result. A bf16 match replaces the matmul
    // by its fp32-accumulator twin.
    for (MatmulOp &matmul : matmuls) {
      std::optional<GemmGroup> group;
      if (isBf16(matmul.getResult()))
        group = matchBf16Epilogue(matmul);
      else if (!(group = matchBf16Dgelu(matmul)))
        group = matchResultEpilogue(matmul);
      if (group) {
        matmul = group->matmul;
        claimed.insert(matmul);
        groups.push_back(*group);
      }
    }
    // 3: bias gradients of an operand, for matmuls still without epilogue.
    SmallVector<ReduceSumOp> sums;
    for (Operation &op : block.without_terminator())
      if (auto sum = dyn_cast<ReduceSumOp>(op))
        if (!claimed.contains(sum) && isRowsSum(sum) && isF32(sum.getInput()))
          sums.push_back(sum);
    for (ReduceSumOp sum : sums)
      if (std::optional<GemmGroup> group = matchOperandSum(sum, matmuls)) {
        claimed.insert(group->matmul);
        claimed.insert(sum);
        groups.push_back(*group);
      }
    for (GemmGroup &group : groups) {
      if (group.operandSum)
        if (Operation *def = group.operandSum.getInput().getDefiningOp())
          maybeDead.insert(def);
      materialize(group);
    }
    eraseDeadViews();
  }

private:
  // 0. P = matmul(bf16, bf16) -> f32 read only by its rounding convert(P) ->
  // bf16 (the backward GEMM giving attention_grad its bf16 dout): the GEMM
  // writes bf16 itself. The same value -- the fp32 accumulator rounded once
  // to nearest even, as cuBLASLt rounds a bf16 D and the CPU narrows one --
  // without an f32 tensor or a convert kernel.
  void roundInGemms() {
    SmallVector<MatmulOp> rounded;
    for (Operation &op : block.without_terminator())
      if (auto matmul = dyn_cast<MatmulOp>(op))
        if (isF32(matmul.getResult()) && isBf16(matmul.getLhs()) &&
            isBf16(matmul.getRhs()) &&
            soleConvert(matmul.getResult(), /*toF32=*/false))
          rounded.push_back(matmul);
    for (MatmulOp matmul : rounded) {
      ConvertOp round = soleConvert(matmul.getResult(), /*toF32=*/false);
      matmul.getResult().setType(round.getResult().getType());
      round.getResult().replaceAllUsesWith(matmul.getResult());
      round->erase();
    }
  }

  // Records on the matmul why `consumer` did not become its epilogue.
  void refuse(Operation *matmul, Operation *consumer, StringRef reason) {
    std::string text = ("into " + consumer->getName().getStringRef() + " at " +
                        modelLocation(consumer->getLoc()) +
                        " as a GEMM epilogue: " + reason)
                           .str();
    if (auto old = matmul->getAttrOfType<StringAttr>(kNotFusedAttrName))
      text = old.getValue().str() + "; " + text;
    matmul->setAttr(kNotFusedAttrName,
                    StringAttr::get(matmul->getContext(), text));
  }

  // The first op of `ops` in block order (null for none): of several gelus
  // of one sum, the forward's, not a copy remat put in the backward.
  static Operation *firstOf(ArrayRef<Operation *> ops) {
    Operation *first = ops.empty() ? nullptr : ops.front();
    for (Operation *op : ops)
      if (op->isBeforeInBlock(first))
        first = op;
    return first;
  }

  // The last op of `ops` in block order.
  static Operation *lastOf(ArrayRef<Operation *> ops) {
    Operation *last = ops.front();
    for (Operation *op : ops)
      if (last->isBeforeInBlock(op))
        last = op;
    return last;
  }

  // The first reader outside `ops` of a value of `ops` that runs before the
  // group's place (its last member), or null: such a reader would need the
  // value before the fused GEMM computes it.
  // The bias broadcast is cloned into the kernel, never moved: its other
  // readers keep it.
  static Operation *earlyReader(ArrayRef<Operation *> ops) {
    Operation *last = lastOf(ops);
    for (Operation *op : ops) {
      if (isa<BroadcastOp>(op))
        continue;
      for (Operation *user : op->getUsers())
        if (!llvm::is_contained(ops, user) && user->isBeforeInBlock(last))
          return user;
    }
    return nullptr;
  }

  static bool onlyReader(Value v, Operation *reader) {
    return llvm::all_of(v.getUsers(),
                        [&](Operation *user) { return user == reader; });
  }

  // 1 and 2.
  std::optional<GemmGroup> matchResultEpilogue(MatmulOp matmul) {
    Value p = matmul.getResult();
    AddOp add;
    GeluOp gelu;
    GeluGradOp geluGrad;
    SmallVector<Operation *> gelus; // the forward's first (firstOf)
    for (Operation *user : p.getUsers()) {
      if (auto a = dyn_cast<AddOp>(user); a && !add)
        add = a;
      if (isa<GeluOp>(user))
        gelus.push_back(user);
      if (auto g = dyn_cast<GeluGradOp>(user); g && !geluGrad && g.getGrad() == p)
        geluGrad = g;
    }
    if (Operation *g = firstOf(gelus))
      gelu = cast<GeluOp>(g);
    Operation *consumer = add      ? add.getOperation()
                          : gelu   ? gelu.getOperation()
                                   : geluGrad.getOperation();
    if (!consumer)
      return std::nullopt;
    if (add)
      gelu = nullptr, geluGrad = nullptr;
    else if (gelu)
      geluGrad = nullptr;
    if (std::string why = whyNoEpilogue(matmul); !why.empty()) {
      refuse(matmul, consumer, why);
      return std::nullopt;
    }
    GemmGroup group{matmul, {}, nullptr, 0};
    if (add) {
      Value other = add.getLhs() == p ? add.getRhs() : add.getLhs();
      if (!rowBias(other) || add.getLhs() == add.getRhs()) {
        refuse(matmul, add,
               "the other operand is not a [N] vector broadcast along the "
               "rows (a bias per output column)");
        return std::nullopt;
      }
      if (!onlyReader(p, add)) {
        refuse(matmul, add,
               "the GEMM result is also read elsewhere, and no epilogue "
               "writes the product before the bias");
        return std::nullopt;
      }
      group.epilogue = {other.getDefiningOp(), add};
      // + gelu of the sum, when the sum is needed by nothing earlier.
      Value s = add.getResult();
      SmallVector<Operation *> geluUsers(llvm::make_filter_range(
          s.getUsers(), [](Operation *u) { return isa<GeluOp>(u); }));
      if (Operation *g = firstOf(geluUsers)) {
        SmallVector<Operation *> trial{matmul, other.getDefiningOp(), add, g};
        bool needsAux = llvm::any_of(
            s.getUsers(), [&](Operation *u) { return u != g; });
        if (needsAux && !auxLdOk(s))
          refuse(matmul, g,
                 "the gelu input is read again (an aux output) and cuBLASLt "
                 "needs its N divisible by 8");
        else if (Operation *early = earlyReader(trial))
          refuse(matmul, g,
                 (early->getName().getStringRef() + " at " +
                  modelLocation(early->getLoc()) +
                  " reads the gelu input before the gelu runs")
                     .str());
        else
          group.epilogue.push_back(g);
      }
    } else if (gelu) {
      if (!onlyReader(p, gelu) && !auxLdOk(p)) {
        refuse(matmul, gelu,
               "the gelu input is read again (an aux output) and cuBLASLt "
               "needs its N divisible by 8");
        return std::nullopt;
      }
      group.epilogue = {gelu};
    } else {
      if (!auxLdOk(p)) {
        refuse(matmul, geluGrad,
               "DGELU reads the gelu input as an aux matrix and cuBLASLt "
               "needs its N divisible by 8");
        return std::nullopt;
      }
      if (!onlyReader(p, geluGrad)) {
        refuse(matmul, geluGrad,
               "the incoming gradient is also read elsewhere, and DGELU "
               "writes only its product with gelu'");
        return std::nullopt;
      }
      group.epilogue = {geluGrad};
      // + the bias gradient: a sum of gelu_grad over the rows.
      for (Operation *user : geluGrad.getResult().getUsers()) {
        auto sum = dyn_cast<ReduceSumOp>(user);
        if (!sum || !isRowsSum(sum) || claimed.contains(sum))
          continue;
        SmallVector<Operation *> trial{matmul, geluGrad, sum};
        if (earlyReader(trial))
          continue;
        group.epilogue.push_back(sum);
        claimed.insert(sum);
        break;
      }
    }
    SmallVector<Operation *> members{matmul};
    members.append(group.epilogue);
    if (Operation *early = earlyReader(members)) {
      refuse(matmul, consumer,
             (early->getName().getStringRef() + " at " +
              modelLocation(early->getLoc()) +
              " reads a value of the group before the fused GEMM would run")
                 .str());
      return std::nullopt;
    }
    return group;
  }

  // 1c. A bf16 GEMM (precision = bf16): P = matmul(bf16, bf16) -> bf16,
  // read only as W = convert(P) -> f32, S = add(W, broadcast(bias [N] f32)),
  // read only as Sb = convert(S) -> bf16; + gelu when Sb is read by a
  // convert G -> f32 that a gelu reads, whose only reader is a convert to
  // bf16 (Gb). The group computes what cuBLASLt computes with a bf16 D:
  // the fp32 accumulator plus the bias, rounded once (Sb), and the gelu of
  // the unrounded sum, rounded once (Gb) -- not the product rounded to bf16
  // before the add, nor the gelu of the rounded sum. cuBLASLt takes the bias
  // in D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: "the same
  // type as the elements of output matrix" outside IMMA and fp8), so the
  // bias is rounded to bf16 outside the kernel and widened inside it.
  std::optional<GemmGroup> matchBf16Epilogue(MatmulOp matmul) {
    Value p = matmul.getResult();
    if (!isBf16(matmul.getLhs()) || !isBf16(matmul.getRhs()))
      return std::nullopt;
    ConvertOp widen = soleConvert(p, /*toF32=*/true);
    if (!widen || !widen.getResult().hasOneUse())
      return std::nullopt;
    auto add = dyn_cast<AddOp>(*widen.getResult().getUsers().begin());
    if (!add)
      return std::nullopt;
    if (std::string why = whyNoEpilogue(matmul, /*bf16Result=*/true);
        !why.empty()) {
      refuse(matmul, add, why);
      return std::nullopt;
    }
    Value w = widen.getResult();
    Value other = add.getLhs() == w ? add.getRhs() : add.getLhs();
    if (!rowBias(other) || add.getLhs() == add.getRhs() ||
        !isF32(other.getDefiningOp<BroadcastOp>().getInput())) {
      refuse(matmul, add,
             "the other operand is not a [N] f32 vector broadcast along the "
             "rows (a bias per output column)");
      return std::nullopt;
    }
    ConvertOp store = soleConvert(add.getResult(), /*toF32=*/false);
    if (!store) {
      refuse(matmul, add,
             "the bf16 GEMM's bias sum is read other than by one rounding "
             "to bf16, and the GEMM stores only its rounded result");
      return std::nullopt;
    }
    SmallVector<Operation *> members{matmul, widen, add, store};
    if (Operation *early = earlyReader(members)) {
      refuse(matmul, add,
             (early->getName().getStringRef() + " at " +
              modelLocation(early->getLoc()) +
              " reads a value of the group before the fused GEMM would run")
                 .str());
      return std::nullopt;
    }
    // + gelu: Sb -> convert G -> gelu g -> convert Gb.
    ConvertOp geluIn;
    GeluOp gelu;
    ConvertOp geluOut;
    // The forward's widening and gelu, the first of each in block order.
    SmallVector<Operation *> widenings, gelus;
    for (Operation *user : store.getResult().getUsers())
      if (auto g = dyn_cast<ConvertOp>(user);
          g && isF32(g.getResult()) &&
          llvm::any_of(g.getResult().getUsers(), llvm::IsaPred<GeluOp>))
        widenings.push_back(g);
    if (Operation *g = firstOf(widenings)) {
      geluIn = cast<ConvertOp>(g);
      for (Operation *u : g->getUsers())
        if (isa<GeluOp>(u))
          gelus.push_back(u);
      gelu = cast<GeluOp>(firstOf(gelus));
    }
    if (gelu) {
      geluOut = soleConvert(gelu.getResult(), /*toF32=*/false);
      // aux: the rounded sum, when anything but this gelu reads it.
      bool needsAux = !store.getResult().hasOneUse() ||
                      !geluIn.getResult().hasOneUse();
      // G is moved after the group when something else (the backward's
      // gelu_grad) reads it: it widens the aux output.
      SmallVector<Operation *> trial(members);
      trial.append({geluIn, gelu});
      if (geluOut)
        trial.push_back(geluOut);
      if (!geluOut)
        refuse(matmul, gelu,
               "the gelu's f32 result is read other than by one rounding to "
               "bf16, and the GEMM stores only its rounded result");
      else if (needsAux && !auxLdOk(store.getResult()))
        refuse(matmul, gelu,
               "the gelu input is read again (an aux output) and cuBLASLt "
               "needs its N divisible by 8");
      else if (Operation *early = earlyReader(trial))
        refuse(matmul, gelu,
               (early->getName().getStringRef() + " at " +
                modelLocation(early->getLoc()) +
                " reads the gelu input before the gelu runs")
                   .str());
      else
        members = trial;
      if (members.size() != trial.size())
        gelu = nullptr;
    }

    // Rewrite into the fp32-accumulator form, next to the add (every
    // operand of the chain is defined by then):
    //   P32 = matmul(...) -> f32; b16 = convert(bias) -> bf16 (outside);
    //   bb = broadcast(b16); bw = convert(bb) -> f32; S' = add(P32, bw);
    //   Sb = convert(S') -> bf16 [; g = gelu(S'); Gb = convert(g) -> bf16]
    auto bcast = other.getDefiningOp<BroadcastOp>();
    OpBuilder builder(add);
    Operation *wide = builder.clone(*matmul);
    auto resultType = cast<RankedTensorType>(p.getType());
    wide->getResult(0).setType(
        resultType.clone(builder.getF32Type()));
    auto biasType = cast<RankedTensorType>(bcast.getInput().getType());
    auto bias16 = builder.create<ConvertOp>(
        bcast.getLoc(), biasType.clone(builder.getBF16Type()), bcast.getInput());
    Operation *bb = builder.clone(*bcast);
    bb->setOperand(0, bias16.getResult());
    bb->getResult(0).setType(
        cast<RankedTensorType>(other.getType()).clone(builder.getBF16Type()));
    auto bw = builder.create<ConvertOp>(bcast.getLoc(), other.getType(),
                                        bb->getResult(0));
    Operation *sum = builder.clone(*add);
    sum->setOperands({wide->getResult(0), bw.getResult()});
    add.getResult().replaceAllUsesWith(sum->getResult(0));
    GemmGroup group{cast<MatmulOp>(wide), {bb, bw, sum, store}, nullptr, 0};
    if (gelu) {
      gelu->setOperand(0, sum->getResult(0));
      group.epilogue.append({gelu, geluOut});
      if (geluIn.getResult().use_empty())
        geluIn->erase();
      else
        geluIn->moveAfter(geluOut);
    }
    add->erase();
    widen->erase();
    matmul->erase();
    if (bcast->use_empty())
      bcast->erase();
    return group;
  }

  // 2b. A backward GEMM under precision = bf16: P = matmul(bf16, bf16) ->
  // f32 read only by G = gelu_grad(X, P), X = convert(Ab) -> f32 (the
  // forward's gelu input, stored in bf16), G read by one convert Gb -> bf16
  // (the operand of the next GEMMs) and otherwise only by bias-gradient
  // sums. The group computes what cuBLASLt's DGELU computes with a bf16 D
  // (its aux then has D's type, the stored Ab): gelu' of the widened aux
  // times the fp32 accumulator, rounded once to Gb. The sums then read
  // widen(Gb): the rounding point that moves, so that the bias gradient is
  // the fp32 sum of the bf16 values the weight-gradient GEMM multiplies, and
  // 3 fuses it into that GEMM (BGRADB with an fp32 D). Anything else (an
  // f32 reader of G) is left to the f32 form of 2 (an f32 aux).
  std::optional<GemmGroup> matchBf16Dgelu(MatmulOp matmul) {
    Value p = matmul.getResult();
    if (!isF32(p) || !isBf16(matmul.getLhs()) || !isBf16(matmul.getRhs()) ||
        !p.hasOneUse())
      return std::nullopt;
    auto grad = dyn_cast<GeluGradOp>(*p.getUsers().begin());
    if (!grad || grad.getGrad() != p || !widenedInput(grad.getInput()) ||
        !whyNoEpilogue(matmul).empty() || !auxLdOk(p))
      return std::nullopt;
    ConvertOp store;
    SmallVector<Operation *> sums;
    for (Operation *user : grad.getResult().getUsers()) {
      auto convert = dyn_cast<ConvertOp>(user);
      auto sum = dyn_cast<ReduceSumOp>(user);
      if (convert && isBf16(convert.getResult()) && !store)
        store = convert;
      else if (sum && isRowsSum(sum) && !claimed.contains(sum))
        sums.push_back(sum);
      else
        return std::nullopt;
    }
    if (!store)
      return std::nullopt;
    // The sums must run after the group, where widen(Gb) exists.
    SmallVector<Operation *> members{matmul, grad, store};
    if (earlyReader(members))
      return std::nullopt;
    if (!sums.empty()) {
      Operation *first = sums.front();
      for (Operation *sum : sums)
        if (sum->isBeforeInBlock(first))
          first = sum;
      OpBuilder builder(first);
      auto wide = builder.create<ConvertOp>(store.getLoc(), grad.getType(),
                                            store.getResult());
      for (Operation *sum : sums)
        sum->setOperand(0, wide.getResult());
    }
    auto widen = grad.getInput().getDefiningOp<ConvertOp>();
    GemmGroup group{matmul, {widen, grad, store}, nullptr, 0};
    group.auxWiden = widen;
    return group;
  }

  // 3. The first matmul without epilogue that reads sum's input (or a view
  // of it with the same last dim, its exact widening or its bf16 rounding:
  // 3b) as its k-side rows.
  std::optional<GemmGroup> matchOperandSum(ReduceSumOp sum,
                                           ArrayRef<MatmulOp> matmuls) {
    Value x = sum.getInput();
    for (MatmulOp matmul : matmuls) {
      if (claimed.contains(matmul) || !whyNoEpilogue(matmul).empty())
        continue;
      // rhs [K, N] untransposed, or lhs [K, M] transposed: rows are k.
      std::optional<unsigned> operand;
      if (!matmul.getTransposeRhs() &&
          operandForm(matmul.getRhs(), x) != OperandForm::None)
        operand = 1;
      else if (matmul.getTransposeLhs() &&
               operandForm(matmul.getLhs(), x) != OperandForm::None)
        operand = 0;
      if (!operand)
        continue;
      Value v = matmul->getOperand(*operand);
      if (shapeOf(v).size() != 2 || shapeOf(v).back() != shapeOf(x).back() ||
          !(isF32(v) || isBf16(v)))
        continue;
      SmallVector<Operation *> members{matmul, sum};
      if (Operation *early = earlyReader(members)) {
        refuse(matmul, sum,
               (early->getName().getStringRef() + " at " +
                modelLocation(early->getLoc()) +
                " reads a value of the group before the fused GEMM would run")
                   .str());
        continue;
      }
      return GemmGroup{matmul, {}, sum, *operand};
    }
    return std::nullopt;
  }

  // 4. kiln.fusion gemm at the group's last member.
  void materialize(GemmGroup &group) {
    // body: the ops cloned into the kernel; members: the ops it replaces
    // (the bias broadcast is cloned, and erased only when nothing else
    // reads it).
    SmallVector<Operation *> body{group.matmul};
    body.append(group.epilogue);
    auto clonedOnly = [&](Operation *op) {
      return isa<BroadcastOp>(op) || op == group.auxWiden;
    };
    SmallVector<Operation *> members;
    for (Operation *op : body)
      if (!clonedOnly(op))
        members.push_back(op);
    if (group.operandSum)
      members.push_back(group.operandSum);
    Operation *last = lastOf(members);

    // Inputs: what the body reads from outside, in the order it reads them.
    llvm::SetVector<Value> inputs;
    for (Operation *op : body)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !llvm::is_contained(body, def))
          inputs.insert(v);
      }

    // Outputs: every member value read outside the group.
    SmallVector<Value> outputs;
    for (Operation *op : members)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) {
              return !llvm::is_contained(members, u);
            }))
          outputs.push_back(r);

    MLIRContext *ctx = block.getParentOp()->getContext();
    OpBuilder builder(ctx);
    builder.setInsertionPointAfter(last);
    SmallVector<Location> locs;
    for (Operation *op : members)
      locs.push_back(op->getLoc());
    SmallVector<Type> types;
    for (Value v : outputs)
      types.push_back(v.getType());
    auto fusion = builder.create<FusionOp>(FusedLoc::get(ctx, locs), types,
                                           inputs.getArrayRef(),
                                           FusionKind::Gemm);
    Block *entry = new Block();
    fusion.getBody().push_back(entry);
    IRMapping map;
    for (Value v : inputs)
      map.map(v, entry->addArgument(v.getType(), v.getLoc()));
    builder.setInsertionPointToEnd(entry);
    for (Operation *op : body)
      builder.clone(*op, map);
    if (ReduceSumOp sum = group.operandSum) {
      // The bias gradient over the operand the GEMM reads (same elements
      // in the same row-major order: a view of the summed value).
      Value operand = map.lookup(group.matmul->getOperand(group.sumOperand));
      // A bf16 operand is summed in fp32 (its exact widening): cuBLASLt's
      // bias gradient has the fp32 D's type.
      if (isBf16(operand))
        operand = builder.create<ConvertOp>(
            sum.getLoc(),
            cast<RankedTensorType>(operand.getType())
                .clone(builder.getF32Type()),
            operand);
      auto cloned = builder.create<ReduceSumOp>(
          sum.getLoc(), sum.getResult().getType(), operand,
          builder.getDenseI64ArrayAttr({0}));
      map.map(sum.getResult(), cloned.getResult());
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    builder.create<YieldOp>(fusion.getLoc(), yielded);
    for (auto [v, result] : llvm::zip(outputs, fusion.getResults()))
      v.replaceAllUsesWith(result);
    // Members in reverse block order: each one's readers are gone first.
    llvm::sort(members,
               [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *op : members)
      if (op->use_empty())
        op->erase();
    for (Operation *op : body)
      if (clonedOnly(op) && op->use_empty())
        op->erase();
  }

  // The f32 views and widenings a fused bias-gradient sum read (under
  // precision = bf16, e.g. widen -> transpose -> reshape of attention's dq)
  // die with it: erased, or each would still be a kernel.
  void eraseDeadViews() {
    while (!maybeDead.empty()) {
      Operation *op = maybeDead.pop_back_val();
      if (!op->use_empty() || !isa<ConvertOp, TransposeOp, ReshapeOp>(op))
        continue;
      Operation *input = op->getOperand(0).getDefiningOp();
      op->erase();
      if (input)
        maybeDead.insert(input);
    }
  }

  Block &block;
  llvm::SmallPtrSet<Operation *, 16> claimed;
  llvm::SetVector<Operation *> maybeDead;
};

struct KilnFuseGemmEpiloguePass
    : public mlir::kiln::impl::KilnFuseGemmEpilogueBase<
          KilnFuseGemmEpiloguePass> {
  using Base::Base;

  void runOnOperation() override {
    for (StringRef name :
         {kStepFunctionName, kUpdateFunctionName, kEvalFunctionName}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (!func || !func.getBody().hasOneBlock())
        continue;
      GemmEpilogueFuser(func).run();
    }
  }
};

} // namespace
