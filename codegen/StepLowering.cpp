//===- StepLowering.cpp - The training-step module as a StepProgram -------===//
//
// Algorithm, for @step, @update and @eval (when present), in that order,
// each becoming one PlannedProgram:
//  1. One buffer per argument, shared across programs by "role:name": the
//     first program that names a parameter, input, accumulator, gradient,
//     optimizer state, lr or step creates it, later ones reuse it (same
//     shape required). Parameters take `kiln.init` and `kiln.weight_decay`.
//  2. Walk the body in order. kiln.reshape: a view buffer (alias_of the
//     input's storage), no step. Non-splat kiln.constant: a Constant buffer
//     holding the data, no step. kiln.matmul: a GemmCall; kiln.fusion
//     "gemm": a GemmCall with an epilogue (GemmEpilogueWriter.cpp);
//     kiln.matmul_accumulate: a GemmCall adding into its acc's buffer (in
//     place, like the update ops below). kiln.adam,
//     kiln.sgd, kiln.sgd_momentum, kiln.accumulate: a kernel whose updated
//     results are their operands' buffers (in place). kiln.fusion: one
//     kernel for its region (operands in, results out; its members' in-place
//     results in the matching operands' buffers). Collectives
//     (kiln.all_reduce, reduce_scatter, all_gather, local_shard): a
//     CollectiveCall (StepLoweringCollectives.cpp). Everything else: a
//     kernel from KernelTable (the target's emitter) and a KernelCall, one
//     new Activation buffer per result.
//  3. func.return: param/state results must be in place in the argument of
//     the same role and name, and so must loss/grad results when that
//     argument exists (accumulators). Every other result (loss, grad,
//     metric, norms, eval_loss) gets a buffer of its own (a copy when the
//     value's buffer is not a plain activation) with its role and name,
//     shared under "role:name" (so @update reads @step's gradients).
//  4. Parameters pad-dims padded (kiln.true_shape) give their true shape to
//     their Parameter, Gradient and optimizer-state buffers (logical_shape).
//  5. The step program's own decisions, free of MLIR (StepProgram.cpp):
//     which collectives overlap the entries after them, and the memory plan
//     (MemoryPlan.cpp) over the final buffers and schedules.
// The serializer (ArtifactSerializer.cpp) writes the result with the
// header ArtifactHeader.cpp reads from the module.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLowering.h"

#include "codegen/CudaKernelEmitter.h"
#include "codegen/CudnnAttention.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"
#include "runtime/schema/BufferRoles.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

FailureOr<schema::DType> dtypeOf(Type t) {
  if (t.isF32())
    return schema::DType_F32;
  if (t.isBF16())
    return schema::DType_BF16;
  if (t.isF16())
    return schema::DType_F16;
  if (t.isInteger(32))
    return schema::DType_I32;
  if (t.isInteger(64))
    return schema::DType_I64;
  if (t.isInteger(1))
    return schema::DType_Bool;
  return failure();
}

std::string roleKey(StringRef role, StringRef name) {
  return (role + ":" + name).str();
}

} // namespace

std::string locationString(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return locationString(site.getCallee());
  if (auto name = dyn_cast<NameLoc>(loc))
    return locationString(name.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations()) {
      std::string s = locationString(inner);
      if (!s.empty())
        return s;
    }
    return "";
  }
  if (auto opaque = dyn_cast<OpaqueLoc>(loc))
    return locationString(opaque.getFallbackLocation());
  return "";
}

uint32_t StepLowering::storageOf(uint32_t index) const {
  return program.storageOf(index);
}

FailureOr<uint32_t> StepLowering::addBuffer(Value value, Operation *op,
                                              StringRef name) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return op->emitError() << "codegen needs statically shaped tensors, got "
                           << value.getType();
  FailureOr<schema::DType> dtype = dtypeOf(type.getElementType());
  if (failed(dtype))
    return op->emitError() << "unsupported element type "
                           << type.getElementType();
  PlannedBuffer buffer;
  buffer.name = name.str();
  buffer.dtype = *dtype;
  buffer.shape.assign(type.getShape().begin(), type.getShape().end());
  buffers.push_back(std::move(buffer));
  uint32_t index = buffers.size() - 1;
  bufferOf[value] = index;
  return index;
}

namespace {

// The schema role of a kiln.role, for buffers that programs share.
schema::BufferRole sharedRole(k::Role role) {
  switch (role) {
  case k::Role::Param:
    return schema::BufferRole_Parameter;
  case k::Role::Input:
    return schema::BufferRole_Input;
  case k::Role::Loss:
    return schema::BufferRole_Loss;
  case k::Role::Grad:
    return schema::BufferRole_Gradient;
  case k::Role::GradNorm:
    return schema::BufferRole_GradNorm;
  case k::Role::AdamM:
    return schema::BufferRole_AdamM;
  case k::Role::AdamV:
    return schema::BufferRole_AdamV;
  case k::Role::Momentum:
    return schema::BufferRole_Momentum;
  case k::Role::LearningRate:
    return schema::BufferRole_LearningRate;
  case k::Role::Step:
    return schema::BufferRole_StepCount;
  case k::Role::Metric:
    return schema::BufferRole_Metric;
  case k::Role::UpdateNorm:
    return schema::BufferRole_UpdateNorm;
  case k::Role::ParamNorm:
    return schema::BufferRole_ParamNorm;
  case k::Role::EvalLoss:
    return schema::BufferRole_EvalLoss;
  case k::Role::DropoutRng:
    return schema::BufferRole_DropoutRng;
  }
  llvm_unreachable("every kiln.role has a buffer role");
}

FailureOr<std::pair<schema::InitKind, float>>
initializerOf(func::FuncOp func, unsigned i, StringRef name) {
  auto init = func.getArgAttrOfType<k::InitializerAttr>(i, k::kInitAttrName);
  if (!init)
    return func.emitError() << "parameter '" << name
                            << "' has no kiln.init initializer";
  StringRef kind = init.getKind();
  schema::InitKind initKind;
  if (kind == "normal")
    initKind = schema::InitKind_Normal;
  else if (kind == "zeros")
    initKind = schema::InitKind_Zeros;
  else if (kind == "ones")
    initKind = schema::InitKind_Ones;
  else
    return func.emitError() << "parameter '" << name
                            << "' has unknown initializer '" << kind << "'";
  return std::make_pair(initKind, static_cast<float>(init.getStd()));
}

} // namespace

FailureOr<uint32_t> StepLowering::sharedBuffer(Value value, Operation *where,
                                                 k::Role role,
                                                 StringRef name) {
  std::string key = roleKey(k::stringifyRole(role), name);
  auto it = sharedBuffers.find(key);
  if (it != sharedBuffers.end()) {
    const PlannedBuffer &existing = buffers[it->second];
    auto type = cast<RankedTensorType>(value.getType());
    if (ArrayRef<int64_t>(existing.shape) != type.getShape())
      return where->emitError()
             << k::stringifyRole(role) << " '" << name << "' has type "
             << value.getType()
             << " here but another program uses it with shape ["
             << llvm::make_range(existing.shape.begin(), existing.shape.end())
             << "]";
    bufferOf[value] = it->second;
    return it->second;
  }
  FailureOr<uint32_t> index = addBuffer(value, where, name);
  if (failed(index))
    return failure();
  buffers[*index].role = sharedRole(role);
  sharedBuffers[key] = *index;
  return index;
}

void StepLowering::markShard(PlannedBuffer &buffer, DictionaryAttr attrs) {
  auto axis = attrs ? attrs.getAs<StringAttr>(k::kShardAxisAttrName) : StringAttr();
  auto whole = attrs ? attrs.getAs<DenseI64ArrayAttr>(k::kWholeShapeAttrName)
                     : DenseI64ArrayAttr();
  if (!axis || !whole)
    return;
  buffer.shardAxis = axis.str();
  buffer.wholeShape.assign(whole.asArrayRef().begin(), whole.asArrayRef().end());
  if (auto dim = attrs.getAs<IntegerAttr>(k::kShardDimAttrName))
    buffer.shardDim = dim.getInt();
}

LogicalResult StepLowering::planArguments(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    std::optional<k::Role> role = k::getArgumentRole(func, i);
    auto nameAttr = func.getArgAttrOfType<StringAttr>(i, k::kNameAttrName);
    if (!role)
      return func.emitError() << "argument " << i << " has no kiln.role";
    StringRef r = k::stringifyRole(*role);
    std::string name = nameAttr ? nameAttr.str() : r.str();
    if (llvm::is_contained({k::Role::Metric, k::Role::GradNorm,
                            k::Role::UpdateNorm, k::Role::ParamNorm,
                            k::Role::EvalLoss},
                           *role))
      return func.emitError() << "argument " << i << " has kiln.role '" << r
                              << "', which only a result may have";
    FailureOr<uint32_t> index = sharedBuffer(arg, func, *role, name);
    if (failed(index))
      return failure();
    markShard(buffers[*index], func.getArgAttrDict(i));
    if (*role != k::Role::Param)
      continue;
    PlannedBuffer &buffer = buffers[*index];
    FailureOr<std::pair<schema::InitKind, float>> init =
        initializerOf(func, i, name);
    if (failed(init))
      return failure();
    buffer.init = *init;
    if (auto decay =
            func.getArgAttrOfType<FloatAttr>(i, k::kWeightDecayAttrName))
      buffer.weightDecay = static_cast<float>(decay.getValueAsDouble());
    if (auto trueShape =
            func.getArgAttrOfType<DenseI64ArrayAttr>(i, k::kTrueShapeAttrName))
      trueShapes[name].assign(trueShape.asArrayRef().begin(),
                              trueShape.asArrayRef().end());
  }
  return success();
}

// C[b] = op(A[b]) op(B[b]): lhs [..., M, K] (or [..., K, M]), rhs [K, N]
// shared over the batch or [..., K, N] (or [N, K] / [..., N, K]).
FailureOr<PlannedGemm>
StepLowering::gemmOf(Operation *op, unsigned firstOperand) {
  Value lhs = op->getOperand(firstOperand),
        rhs = op->getOperand(firstOperand + 1);
  Value result = op->getResult(0);
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  auto resType = cast<RankedTensorType>(result.getType());
  Type operandType = lhsType.getElementType();
  // fp32 accumulation always; a bf16 result is the fp32 one rounded
  // (mixed precision's forward activations).
  Type resultType = resType.getElementType();
  bool supportedTypes =
      (operandType.isF32() && resultType.isF32()) ||
      (operandType.isBF16() && (resultType.isF32() || resultType.isBF16()));
  if (!supportedTypes || lhsType.getRank() < 2 || rhsType.getRank() < 2 ||
      resType.getRank() < 2)
    return op->emitError() << "codegen supports matmuls of rank >= 2 with "
                              "f32 operands and result, or bf16 operands and "
                              "an f32 or bf16 result, only";
  auto boolAttr = [&](StringRef name) {
    auto attr = op->getAttrOfType<BoolAttr>(name);
    return attr && attr.getValue();
  };
  PlannedGemm g;
  g.tf32 = operandType.isF32() && precisionIs(k::Precision::Tf32);
  g.transA = boolAttr("transpose_lhs");
  g.transB = boolAttr("transpose_rhs");
  ArrayRef<int64_t> res = resType.getShape();
  ArrayRef<int64_t> lhsShape = lhsType.getShape();
  g.m = res[res.size() - 2];
  g.n = res.back();
  g.k = g.transA ? lhsShape[lhsShape.size() - 2] : lhsShape.back();
  g.batch = resType.getNumElements() / (g.m * g.n);
  bool sharedRhs = rhsType.getRank() == 2;
  if (sharedRhs && !g.transA && g.batch > 1) {
    // [..., M, K] x [K, N]: the batch rows are one [batch*M, K] matrix.
    g.m *= g.batch;
    g.batch = 1;
  }
  g.strideA = g.m * g.k;
  g.strideB = sharedRhs ? 0 : g.k * g.n;
  g.strideC = g.m * g.n;
  g.a = bufferOf.lookup(lhs);
  g.b = bufferOf.lookup(rhs);
  g.c = 0;
  return g;
}

LogicalResult StepLowering::planMatmul(Operation *op) {
  FailureOr<PlannedGemm> g = gemmOf(op);
  if (failed(g))
    return failure();
  std::string name = locationString(op->getLoc());
  FailureOr<uint32_t> c = addBuffer(
      op->getResult(0), op, (op->getName().getStringRef() + "@" + name).str());
  if (failed(c))
    return failure();
  g->c = *c;
  addGemmStep(op, *g);
  return success();
}

void StepLowering::addGemmStep(Operation *op, const PlannedGemm &g) {
  programs.back().flops += 2.0 * g.m * g.n * g.k * g.batch;
  PlannedStep step;
  step.gemm = g;
  step.location = locationString(op->getLoc());
  schedule->push_back(std::move(step));
}

// acc + op(lhs) op(rhs) as one GemmCall adding into acc's buffer.
LogicalResult StepLowering::planMatmulAccumulate(Operation *op) {
  FailureOr<PlannedGemm> g = gemmOf(op, /*firstOperand=*/1);
  if (failed(g) ||
      failed(planInPlace(op, op->getResult(0), op->getOperand(0))))
    return failure();
  g->c = bufferOf.lookup(op->getResult(0));
  g->accumulate = true;
  addGemmStep(op, *g);
  return success();
}

bool StepLowering::precisionIs(k::Precision precision) const {
  k::TrainConfigAttr train = k::getTrainConfig(module);
  return train && train.getPrecision() == precision;
}

// The operand whose buffer result `i` of an update / accumulate op is
// written into (in place), if any.
static std::optional<unsigned> inPlaceOperand(Operation *op, unsigned i) {
  SmallVector<std::pair<unsigned, unsigned>> inPlace; // result, operand
  if (isa<k::AdamOp>(op))
    inPlace = {{0, 0}, {1, 2}, {2, 3}}; // param, m, v
  else if (isa<k::SgdMomentumOp>(op))
    inPlace = {{0, 0}, {1, 2}}; // param, momentum buffer
  else if (isa<k::SgdOp, k::AccumulateOp>(op))
    inPlace = {{0, 0}}; // param / accumulator
  else if (auto scatter = dyn_cast<k::EmbeddingGradOp>(op); scatter && scatter.getAcc())
    inPlace = {{0, 2}}; // rows added into acc
  auto match =
      llvm::find_if(inPlace, [&](auto pair) { return pair.first == i; });
  if (match == inPlace.end())
    return std::nullopt;
  return match->second;
}

LogicalResult StepLowering::planKernel(Operation *op) {
  KernelGroup group = KernelGroup::forOp(op);
  FailureOr<EmittedKernel> kernel = kernels.emitGroup(group);
  if (failed(kernel))
    return failure();
  std::string loc = locationString(op->getLoc());
  PlannedStep step;
  step.kernel = kernels.add(*kernel, op->getLoc());
  step.location = loc;
  for (Value v : group.inputs)
    step.buffers.push_back(bufferOf.lookup(v));
  step.numInputs = step.buffers.size();

  // In place: results that live in the buffer of an operand.
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    if (std::optional<unsigned> operand = inPlaceOperand(op, i)) {
      if (failed(planInPlace(op, result, op->getOperand(*operand))))
        return failure();
      step.buffers.push_back(bufferOf.lookup(result));
      continue;
    }
    std::string name = op->getName().getStringRef().str();
    if (op->getNumResults() > 1)
      name += "#" + std::to_string(i);
    FailureOr<uint32_t> index = addBuffer(result, op, name + "@" + loc);
    if (failed(index))
      return failure();
    step.buffers.push_back(*index);
  }
  // cuDNN's fused attention as an alternative the CUDA runtime may pick.
  if (options.target == "cuda" && isa<k::AttentionOp, k::AttentionGradOp>(op)) {
    std::string whyNot;
    step.cudnnAttention = planCudnnAttention(
        op, [&](Value v) { return bufferOf.lookup(v); }, whyNot);
    // Its workspace, reserved in the plan like the kernels' scratch (a
    // Workspace buffer of this entry) but passed to no kernel.
    if (step.cudnnAttention) {
      int64_t bytes = schema::cudnnSdpaReservedBytes(step.cudnnAttention->shape());
      PlannedBuffer buffer;
      buffer.name = "cudnn_workspace@" + loc;
      buffer.role = schema::BufferRole_Workspace;
      buffer.dtype = schema::DType_F32;
      buffer.shape = {bytes / 4};
      buffers.push_back(std::move(buffer));
      step.cudnnAttention->workspace = static_cast<int32_t>(buffers.size() - 1);
    }
  }
  // Scratch (attention backward): one buffer per call, after the outputs;
  // the memory plan keeps a Workspace buffer live for this entry only.
  for (const KernelScratch &scratch : kernel->scratch) {
    PlannedBuffer buffer;
    buffer.name = scratch.name + "@" + loc;
    buffer.role = scratch.role;
    buffer.dtype = scratch.dtype;
    buffer.shape = {scratch.elements};
    buffers.push_back(std::move(buffer));
    step.buffers.push_back(buffers.size() - 1);
  }
  schedule->push_back(std::move(step));
  return success();
}

// One kernel for the whole region: its buffers are the fusion's operands
// (the block arguments) then its results (the yielded values). A yielded
// in-place result of a member (an optimizer update inside a multi-tensor
// kernel) lives in the buffer of the fusion operand its member updates.
LogicalResult StepLowering::planFusion(k::FusionOp fusion) {
  Block &body = fusion.getBody().front();
  KernelGroup group;
  for (Operation &op : body.without_terminator())
    group.ops.push_back(&op);
  group.inputs.assign(body.getArguments().begin(), body.getArguments().end());
  auto yield = cast<k::YieldOp>(body.getTerminator());
  group.outputs.assign(yield.getValues().begin(), yield.getValues().end());
  FailureOr<EmittedKernel> kernel = kernels.emitGroup(group);
  if (failed(kernel))
    return failure();
  if (!kernel->scratch.empty())
    return fusion.emitError() << "a fused kernel with scratch buffers is not "
                                 "supported (scratch is planned per op)";
  std::string loc = locationString(fusion->getLoc());
  PlannedStep step;
  step.kernel = kernels.add(*kernel, fusion->getLoc());
  step.location = loc;
  for (Value v : fusion.getInputs())
    step.buffers.push_back(bufferOf.lookup(v));
  step.numInputs = step.buffers.size();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(fusion.getResults(), yield.getValues()))) {
    auto [result, yielded] = pair;
    Operation *member = yielded.getDefiningOp();
    std::optional<unsigned> operand =
        member ? inPlaceOperand(member,
                                cast<OpResult>(yielded).getResultNumber())
               : std::nullopt;
    if (operand) {
      auto arg = dyn_cast<BlockArgument>(member->getOperand(*operand));
      if (!arg || arg.getOwner() != &body)
        return member->emitError()
               << "updates in place a value computed in the same kernel";
      if (failed(planInPlace(fusion, result,
                             fusion.getInputs()[arg.getArgNumber()])))
        return failure();
      step.buffers.push_back(bufferOf.lookup(result));
      continue;
    }
    std::string name = member ? member->getName().getStringRef().str()
                              : std::string("kiln.fusion");
    FailureOr<uint32_t> index = addBuffer(
        result, fusion,
        name + "#" + std::to_string(i) + "@" +
            locationString(member ? member->getLoc() : fusion->getLoc()));
    if (failed(index))
      return failure();
    step.buffers.push_back(*index);
  }
  schedule->push_back(std::move(step));
  return success();
}

bool isInPlaceRole(k::Role role) {
  return role == k::Role::Param || role == k::Role::AdamM ||
         role == k::Role::AdamV || role == k::Role::Momentum;
}

LogicalResult StepLowering::planInPlace(Operation *op, Value result,
                                         Value operand) {
  // The operand and every reshape view of it share one buffer: none may be
  // read after the update (func.return included: returned values are copied
  // out after the whole schedule).
  SmallVector<Value> sharing{operand};
  for (size_t next = 0; next < sharing.size(); ++next)
    for (Operation *user : sharing[next].getUsers()) {
      if (auto view = dyn_cast<k::ReshapeOp>(user))
        sharing.push_back(view.getResult());
      else if (user != op && user->getBlock() == op->getBlock() &&
               op->isBeforeInBlock(user))
        return user->emitError() << "reads a value that " << op->getName()
                                 << " updates in place earlier";
    }
  bufferOf[result] = storageOf(bufferOf.lookup(operand));
  return success();
}

LogicalResult StepLowering::planOp(Operation *op) {
  for (Value operand : op->getOperands())
    if (!bufferOf.count(operand))
      return op->emitError() << "operand defined outside the step function";
  std::string loc = locationString(op->getLoc());
  std::string name = (op->getName().getStringRef() + "@" + loc).str();

  if (isa<k::ReshapeOp>(op)) {
    // A row-major view: same storage, new shape.
    uint32_t storage = storageOf(bufferOf.lookup(op->getOperand(0)));
    FailureOr<uint32_t> index = addBuffer(op->getResult(0), op, name);
    if (failed(index))
      return failure();
    buffers[*index].aliasOf = static_cast<int32_t>(storage);
    return success();
  }
  if (auto constant = dyn_cast<k::ConstantOp>(op)) {
    auto value = op->getAttrOfType<DenseElementsAttr>("value");
    if (value && !value.isSplat()) {
      FailureOr<uint32_t> index = addBuffer(op->getResult(0), op, name);
      if (failed(index))
        return failure();
      ArrayRef<char> raw = value.getRawData();
      buffers[*index].role = schema::BufferRole_Constant;
      if (value.getElementType().isInteger(1)) {
        // MLIR packs i1 as bits; DType Bool is one byte (0 or 1) each.
        buffers[*index].constantData.clear();
        for (bool b : value.getValues<bool>())
          buffers[*index].constantData.push_back(b ? 1 : 0);
      } else {
        buffers[*index].constantData.assign(raw.begin(), raw.end());
      }
      return success();
    }
  }
  if (auto allReduce = dyn_cast<k::AllReduceOp>(op))
    return planAllReduce(allReduce);
  if (isa<k::ReduceScatterOp, k::AllGatherOp, k::LocalShardOp>(op))
    return planShardCollective(op);
  if (isa<k::MatmulOp>(op))
    return planMatmul(op);
  if (isa<k::MatmulAccumulateOp>(op))
    return planMatmulAccumulate(op);
  if (auto fusion = dyn_cast<k::FusionOp>(op))
    return fusion.getKind() == k::FusionKind::Gemm ? planGemmFusion(fusion)
                                      : planFusion(fusion);
  if (op->getDialect() != module->getContext()->getLoadedDialect("kiln") ||
      !(options.target == "cuda" ? CudaKernelEmitter::supports(op)
                                 : CpuKernelEmitter::supports(op)))
    return op->emitError() << "codegen does not support '" << op->getName()
                           << "'";
  return planKernel(op);
}

LogicalResult StepLowering::planReturn(func::FuncOp func,
                                         func::ReturnOp ret) {
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    std::optional<k::Role> role = k::getResultRole(func, i);
    if (!role)
      continue;
    auto nameAttr = func.getResultAttrOfType<StringAttr>(i, k::kNameAttrName);
    StringRef r = k::stringifyRole(*role);
    std::string name = nameAttr ? nameAttr.str() : r.str();
    uint32_t index = bufferOf.lookup(value);
    if (llvm::is_contained(
            {k::Role::Input, k::Role::LearningRate, k::Role::Step}, *role))
      return ret.emitError() << "result " << i << " has kiln.role '" << r
                             << "', which only an argument may have";

    // Updated in place: the argument of the same role and name holds it.
    auto shared = sharedBuffers.find(roleKey(r, name));
    bool inPlace = shared != sharedBuffers.end() &&
                   storageOf(index) == shared->second;
    if (isInPlaceRole(*role) && !inPlace)
      return ret.emitError() << "result " << i << " (" << r << " '" << name
                             << "') is not updated in place in the "
                                "argument with the same role and name";
    if (inPlace)
      continue;
    if (shared != sharedBuffers.end())
      return ret.emitError() << "result " << i << " (" << r << " '" << name
                             << "') is already produced elsewhere in the "
                                "artifact";

    // A result needs a buffer of its own: copy when the value lives in an
    // argument, a constant, a view, a buffer that is already a result, or
    // the storage of a view of another shape (an all-reduce in place on a
    // reshape: tensor parallelism's gradient of a [13, 1] parameter, summed
    // as [13] and viewed back; the other programs read the [13, 1] buffer).
    auto type = cast<RankedTensorType>(value.getType());
    if (buffers[index].role != schema::BufferRole_Activation ||
        buffers[index].aliasOf >= 0 ||
        ArrayRef<int64_t>(buffers[index].shape) != type.getShape()) {
      FailureOr<EmittedKernel> copy = kernels.emitCopy(type);
      if (failed(copy))
        return ret.emitError() << "cannot copy result " << i;
      PlannedBuffer buffer = buffers[index];
      buffer.shape.assign(type.getShape().begin(), type.getShape().end());
      buffer.aliasOf = -1;
      buffer.init.reset();
      buffer.constantData.clear();
      buffer.weightDecay = 0.0f;
      buffers.push_back(std::move(buffer));
      uint32_t fresh = buffers.size() - 1;
      PlannedStep step;
      step.kernel = kernels.add(*copy, value.getLoc());
      step.buffers = {index, fresh};
      step.numInputs = 1;
      step.location = locationString(value.getLoc());
      schedule->push_back(std::move(step));
      index = fresh;
    }
    buffers[index].role = sharedRole(*role);
    buffers[index].name = name;
    markShard(buffers[index], func.getResultAttrDict(i));
    sharedBuffers[roleKey(r, name)] = index;
  }
  return success();
}

LogicalResult StepLowering::planFunction(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "codegen needs a single-block @"
                            << func.getSymName();
  // One training step runs @step once per micro-batch and @update once.
  int64_t runs = 0;
  if (func.getSymName() == k::kStepFunctionName)
    runs = k::getGradAccumSteps(module);
  else if (func.getSymName() == k::kUpdateFunctionName)
    runs = 1;
  programs.push_back({func.getSymName().str(), {}, 0.0, runs});
  schedule = &programs.back().schedule;
  if (failed(planArguments(func)))
    return failure();
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(planReturn(func, ret)))
        return failure();
      continue;
    }
    if (failed(planOp(&op)))
      return failure();
  }
  return success();
}

// A padded parameter's gradient and optimizer state are padded the same way
// (they have its type): all of them carry its true shape.
void StepLowering::planLogicalShapes() {
  for (PlannedBuffer &buffer : buffers) {
    if (!schema::hasParameterLayout(buffer.role))
      continue;
    // A ZeRO shard's logical shape is the user's region of its whole shape.
    const std::vector<int64_t> &shape =
        buffer.shardAxis.empty() ? buffer.shape : buffer.wholeShape;
    auto it = trueShapes.find(buffer.name);
    if (it != trueShapes.end() && it->second.size() == shape.size())
      buffer.logicalShape = it->second;
  }
}

} // namespace kiln
