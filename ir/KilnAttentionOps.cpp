//===- KilnAttentionOps.cpp - kiln.attention and kiln.attention_grad -----===//
//
// Text form and verifiers of the attention ops. The regions are the contract
// with codegen (codegen/AttentionRegionEmitter): it inlines them into the
// kernel as scalar C statements, so the verifier accepts only what that
// emitter can translate -- scalar arith and math ops, tensor.extract of a
// captured tensor, kiln.yield -- and refuses anything else on the offending
// op instead of letting codegen fail later far from the model line.
//
// Text form (both ops; attention_grad has six leading operands):
//   kiln.attention %q, %k, %v [captures(%c0, ...)] {scale = ...[, dropout = p]}
//       : (operand types) -> (result types)
//     [score(%s: f32, %b: index, %h: index, %i: index, %j: index,
//            %c0: <type of c0>, ...) { ... kiln.yield %r : f32 }]
//     [mask(%b: index, %h: index, %i: index, %j: index, %c0: ..., ...)
//            { ... kiln.yield %keep : i1 }]
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::kiln;

//===----------------------------------------------------------------------===//
// Parser and printer
//===----------------------------------------------------------------------===//

/// Parses `keyword(%arg: type, ...) { ... }` into `region` if `keyword` is
/// next; leaves the region empty otherwise.
static ParseResult parseOptionalNamedRegion(OpAsmParser &parser,
                                            StringRef keyword,
                                            Region &region) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return success();
  SmallVector<OpAsmParser::Argument> args;
  if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true) ||
      parser.parseRegion(region, args))
    return failure();
  return success();
}

/// The shared text form; `numLeading` is the count of operands before
/// `captures(...)` (3 for attention, 6 for attention_grad).
static ParseResult parseAttentionLike(OpAsmParser &parser,
                                      OperationState &result,
                                      unsigned numLeading) {
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  llvm::SMLoc operandsLoc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands))
    return failure();
  if (operands.size() != numLeading)
    return parser.emitError(operandsLoc)
           << "expected " << numLeading << " operands before captures, found "
           << operands.size();
  if (succeeded(parser.parseOptionalKeyword("captures")) &&
      parser.parseOperandList(operands, OpAsmParser::Delimiter::Paren))
    return failure();
  FunctionType type;
  llvm::SMLoc typeLoc;
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.getCurrentLocation(&typeLoc) || parser.parseType(type))
    return failure();
  if (parser.resolveOperands(operands, type.getInputs(), typeLoc,
                             result.operands))
    return failure();
  result.addTypes(type.getResults());
  Region *score = result.addRegion();
  Region *mask = result.addRegion();
  if (parseOptionalNamedRegion(parser, "score", *score) ||
      parseOptionalNamedRegion(parser, "mask", *mask))
    return failure();
  return success();
}

static void printNamedRegion(OpAsmPrinter &p, StringRef keyword,
                             Region &region) {
  if (region.empty())
    return;
  p.increaseIndent();
  p.printNewline();
  p << keyword << "(";
  llvm::interleaveComma(region.getArguments(), p, [&](BlockArgument arg) {
    p.printRegionArgument(arg);
  });
  p << ") ";
  p.printRegion(region, /*printEntryBlockArgs=*/false);
  p.decreaseIndent();
}

template <typename OpT>
static void printAttentionLike(OpT op, OpAsmPrinter &p, unsigned numLeading) {
  p << ' ';
  p.printOperands(op->getOperands().take_front(numLeading));
  if (!op.getCaptures().empty()) {
    p << " captures(";
    p.printOperands(op.getCaptures());
    p << ')';
  }
  // dropout = 0 and layout bhtd (the defaults, set on every op) are left
  // out of the text.
  SmallVector<StringRef, 2> elided;
  if (op.getDropoutProbability() == 0.0)
    elided.push_back(op.getDropoutAttrName().getValue());
  if (!op.isTokensMajor())
    elided.push_back(op.getLayoutAttrName().getValue());
  p.printOptionalAttrDict(op->getAttrs(), elided);
  p << " : ";
  p.printFunctionalType(op.getOperation());
  printNamedRegion(p, "score", op.getScore());
  printNamedRegion(p, "mask", op.getMask());
}

ParseResult AttentionOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseAttentionLike(parser, result, 3);
}
void AttentionOp::print(OpAsmPrinter &p) { printAttentionLike(*this, p, 3); }

ParseResult AttentionGradOp::parse(OpAsmParser &parser,
                                   OperationState &result) {
  return parseAttentionLike(parser, result, 6);
}
void AttentionGradOp::print(OpAsmPrinter &p) {
  printAttentionLike(*this, p, 6);
}

//===----------------------------------------------------------------------===//
// Shape checks
//===----------------------------------------------------------------------===//

/// `shape` of a per-head tensor in [B, H, T, D] order: dims 1 and 2 swapped
/// when `tokensMajor` (layout bthd).
static SmallVector<int64_t, 4> headsMajor(ArrayRef<int64_t> shape,
                                          bool tokensMajor) {
  SmallVector<int64_t, 4> dims(shape);
  if (tokensMajor)
    std::swap(dims[1], dims[2]);
  return dims;
}

/// q [B, H, T, D], k [B, KVH, S, D], v [B, KVH, S, Dv] (dims 1 and 2 swapped
/// in layout bthd); captures of a kind the kernels read. On success sets the
/// expected out and lse types.
static LogicalResult verifyQKV(Operation *op, RankedTensorType q,
                               RankedTensorType k, RankedTensorType v,
                               ValueRange captures, bool tokensMajor,
                               RankedTensorType &outType,
                               RankedTensorType &lseType) {
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return op->emitOpError() << "needs q, k and v of one element type, found "
                             << q << ", " << k << ", " << v;
  SmallVector<int64_t, 4> qs = headsMajor(q.getShape(), tokensMajor),
                          ks = headsMajor(k.getShape(), tokensMajor),
                          vs = headsMajor(v.getShape(), tokensMajor);
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return op->emitOpError() << "needs one batch size for q, k and v, found "
                             << q << ", " << k << ", " << v;
  if (ks[1] != vs[1] || ks[2] != vs[2])
    return op->emitOpError()
           << "needs k and v with the same kv heads and length, found " << k
           << " and " << v;
  if (ks[1] < 1 || qs[1] % ks[1] != 0)
    return op->emitOpError() << "needs the query heads (" << qs[1]
                             << ") to be a multiple of the kv heads ("
                             << ks[1] << ")";
  if (ks[3] != qs[3])
    return op->emitOpError() << "needs q and k with one head dim, found "
                             << qs[3] << " and " << ks[3];
  for (auto [i, capture] : llvm::enumerate(captures)) {
    Type elem = cast<RankedTensorType>(capture.getType()).getElementType();
    if (!elem.isF32() && !elem.isBF16() && !elem.isInteger(32) &&
        !elem.isInteger(64))
      return op->emitOpError() << "capture " << i << " has type "
                               << capture.getType()
                               << " (expected f32, bf16, i32 or i64 elements)";
  }
  outType = RankedTensorType::get(
      headsMajor({qs[0], qs[1], qs[2], vs[3]}, tokensMajor),
      q.getElementType());
  lseType = RankedTensorType::get({qs[0], qs[1], qs[2]},
                                  Float32Type::get(op->getContext()));
  return success();
}

/// 0 <= dropout < 1, and with dropout the last capture is the RNG state
/// tensor<2xi64> ([seed, micro-step offset]).
template <typename OpT>
static LogicalResult verifyDropout(OpT op) {
  double p = op.getDropoutProbability();
  if (!(p >= 0.0 && p < 1.0))
    return op.emitOpError() << "has dropout " << p
                            << " (expected a probability in [0, 1))";
  if (p == 0.0)
    return success();
  auto rng = op.getCaptures().empty()
                 ? RankedTensorType()
                 : cast<RankedTensorType>(op.getCaptures().back().getType());
  if (!rng || rng.getShape() != ArrayRef<int64_t>{2} ||
      !rng.getElementType().isInteger(64))
    return op.emitOpError()
           << "has dropout " << p
           << " but its last capture is not the RNG state tensor<2xi64> "
              "([seed, offset])";
  return success();
}

static LogicalResult expectType(Operation *op, StringRef what, Type actual,
                                Type expected) {
  if (actual != expected)
    return op->emitOpError() << what << " has type " << actual
                             << " but expected " << expected;
  return success();
}

LogicalResult AttentionOp::verify() {
  RankedTensorType outType, lseType;
  if (failed(verifyQKV(*this, getQ().getType(), getK().getType(),
                       getV().getType(), getCaptures(), isTokensMajor(),
                       outType, lseType)) ||
      failed(expectType(*this, "result 'out'", getOut().getType(), outType)) ||
      failed(expectType(*this, "result 'lse'", getLse().getType(), lseType)))
    return failure();
  return verifyDropout(*this);
}

LogicalResult AttentionGradOp::verify() {
  RankedTensorType outType, lseType;
  if (failed(verifyQKV(*this, getQ().getType(), getK().getType(),
                       getV().getType(), getCaptures(), isTokensMajor(),
                       outType, lseType)) ||
      failed(expectType(*this, "operand 'out'", getOut().getType(), outType)) ||
      failed(expectType(*this, "operand 'lse'", getLse().getType(), lseType)) ||
      failed(expectType(*this, "operand 'dout'", getDout().getType(),
                        outType)) ||
      failed(expectType(*this, "result 'dq'", getDq().getType(),
                        getQ().getType())) ||
      failed(expectType(*this, "result 'dk'", getDk().getType(),
                        getK().getType())) ||
      failed(expectType(*this, "result 'dv'", getDv().getType(),
                        getV().getType())) ||
      failed(verifyDropout(*this)))
    return failure();
  // One gradient per floating capture, in capture order.
  SmallVector<Type> expected;
  for (Value capture : getCaptures())
    if (isa<FloatType>(
            cast<RankedTensorType>(capture.getType()).getElementType()))
      expected.push_back(capture.getType());
  if (getCaptureGrads().size() != expected.size())
    return emitOpError() << "has " << getCaptureGrads().size()
                         << " capture gradients but " << expected.size()
                         << " floating-point captures";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getCaptureGrads().getTypes(), expected))) {
    auto [actual, want] = pair;
    if (actual != want)
      return emitOpError() << "capture gradient " << i << " has type "
                           << actual << " but expected " << want;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Region checks
//===----------------------------------------------------------------------===//

static bool isScalar(Type type) {
  return isa<IntegerType, IndexType, FloatType>(type);
}

/// Checks one region: its block arguments are `leading` then one per
/// capture, it yields exactly one `yieldType`, and its ops are scalar arith /
/// math ops or tensor.extract of a capture argument.
static LogicalResult verifyRegion(Operation *op, Region &region,
                                  StringRef name, ArrayRef<Type> leading,
                                  ValueRange captures, Type yieldType) {
  if (region.empty())
    return success();
  Block &block = region.front();
  SmallVector<Type> expected(leading);
  llvm::append_range(expected, captures.getTypes());
  if (block.getNumArguments() != expected.size())
    return op->emitOpError()
           << "has a " << name << " region with " << block.getNumArguments()
           << " arguments but expected " << expected.size() << " ("
           << leading.size() << " + one per capture)";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(block.getArgumentTypes(), expected))) {
    auto [actual, want] = pair;
    if (actual != want)
      return op->emitOpError() << "has a " << name << " region whose argument "
                               << i << " has type " << actual
                               << " but expected " << want;
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << "has a " << name
                             << " region that does not end with kiln.yield";
  if (yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != yieldType)
    return yield.emitOpError()
           << "in the " << name << " region must yield one " << yieldType;

  unsigned firstCapture = leading.size();
  for (Operation &inner : block.without_terminator()) {
    StringRef dialect = inner.getDialect()
                            ? inner.getDialect()->getNamespace()
                            : StringRef();
    if (inner.getName().getStringRef() == "tensor.extract") {
      auto arg = dyn_cast<BlockArgument>(inner.getOperand(0));
      if (!arg || arg.getOwner() != &block || arg.getArgNumber() < firstCapture)
        return inner.emitOpError()
               << "in the " << name
               << " region may only read a captured tensor (a block argument)";
      continue;
    }
    if (dialect != "arith" && dialect != "math")
      return inner.emitOpError()
             << "is not allowed in the " << name << " region of "
             << op->getName()
             << " (only scalar arith and math ops, tensor.extract of a "
                "capture, kiln.yield)";
    if (inner.getNumRegions() != 0 ||
        !llvm::all_of(inner.getOperandTypes(), isScalar) ||
        !llvm::all_of(inner.getResultTypes(), isScalar))
      return inner.emitOpError() << "in the " << name
                                 << " region must work on scalars";
  }
  return success();
}

template <typename OpT>
static LogicalResult verifyAttentionRegions(OpT op) {
  MLIRContext *ctx = op.getContext();
  Type f32 = Float32Type::get(ctx), index = IndexType::get(ctx);
  Type i1 = IntegerType::get(ctx, 1);
  if (failed(verifyRegion(op, op.getScore(), "score",
                          {f32, index, index, index, index}, op.getCaptures(),
                          f32)))
    return failure();
  return verifyRegion(op, op.getMask(), "mask", {index, index, index, index},
                      op.getCaptures(), i1);
}

LogicalResult AttentionOp::verifyRegions() {
  return verifyAttentionRegions(*this);
}
LogicalResult AttentionGradOp::verifyRegions() {
  return verifyAttentionRegions(*this);
}

//===----------------------------------------------------------------------===//
// Grouped-query attention from repeated k / v
//===----------------------------------------------------------------------===//

/// If `kv` [B, K*G, S, D] is kv heads [B, K, S, D] each repeated G times in
/// a row (reshape(broadcast([B, K, 1, S, D] or [B, K, S, D] -> [B, K, G, S,
/// D]))), the broadcast's input and G; otherwise {}.
static std::pair<Value, int64_t> repeatedHeads(Value kv) {
  auto reshape = kv.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return {};
  auto broadcast = reshape.getInput().getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return {};
  RankedTensorType wide = broadcast.getType();
  RankedTensorType input = broadcast.getInput().getType();
  auto out = llvm::cast<RankedTensorType>(kv.getType());
  if (wide.getRank() != 5 || out.getRank() != 4)
    return {};
  int64_t b = wide.getDimSize(0), k = wide.getDimSize(1),
          g = wide.getDimSize(2), s = wide.getDimSize(3),
          d = wide.getDimSize(4);
  if (g < 2 || out.getShape() != ArrayRef<int64_t>{b, k * g, s, d})
    return {};
  ArrayRef<int64_t> dims = broadcast.getDims();
  bool fromSizeOne = dims == ArrayRef<int64_t>{0, 1, 2, 3, 4} &&
                     input.getShape() == ArrayRef<int64_t>{b, k, 1, s, d};
  bool fromFour = dims == ArrayRef<int64_t>{0, 1, 3, 4} &&
                  input.getShape() == ArrayRef<int64_t>{b, k, s, d};
  if (!fromSizeOne && !fromFour)
    return {};
  return {broadcast.getInput(), g};
}

/// attention(q, repeat(k, G), repeat(v, G)) -> attention(q, k, v): query
/// head h of the repeated tensors reads head h / G of the originals, which
/// is the op's grouped-query rule, so nothing needs repeating in memory
/// (nor its gradient summing back over the group).
LogicalResult AttentionOp::canonicalize(AttentionOp op,
                                        PatternRewriter &rewriter) {
  // repeatedHeads reads [B, KVH, S, D]; layout bthd comes later (fusion
  // phase), after this has run.
  if (op.isTokensMajor())
    return failure();
  auto [k, kGroup] = repeatedHeads(op.getK());
  auto [v, vGroup] = repeatedHeads(op.getV());
  if (!k || !v || kGroup != vGroup)
    return failure();
  // [B, K, 1, S, D] -> [B, K, S, D]
  auto heads = [&](Value x) -> Value {
    auto type = llvm::cast<RankedTensorType>(x.getType());
    if (type.getRank() == 4)
      return x;
    ArrayRef<int64_t> s = type.getShape();
    return rewriter.create<ReshapeOp>(
        x.getLoc(),
        RankedTensorType::get({s[0], s[1], s[3], s[4]}, type.getElementType()),
        x);
  };
  Value newK = heads(k), newV = heads(v);
  rewriter.modifyOpInPlace(op, [&] {
    op.getKMutable().assign(newK);
    op.getVMutable().assign(newV);
  });
  return success();
}
