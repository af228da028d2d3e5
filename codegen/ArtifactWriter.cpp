//===- ArtifactWriter.cpp - Buffers, kernels and schedule of the step -----===//
//
// Algorithm:
//  1. One buffer per argument of @step, its role from `kiln.role`
//     (param -> Parameter with the `kiln.init` initializer, adam_m/adam_v,
//     input, lr, step).
//  2. Walk the body in order. kiln.reshape: a view buffer (alias_of the
//     input's storage), no step. Non-splat kiln.constant: a Constant buffer
//     holding the data, no step. kiln.matmul: a GemmCall. kiln.adamw: a
//     kernel whose results are the param/m/v argument buffers (in place).
//     Everything else: a CpuKernelEmitter kernel and a KernelCall, one new
//     Activation buffer per result.
//  3. func.return: mark loss/grad/grad_norm buffers (copying into a fresh
//     buffer when the value's buffer is not a plain activation of its own),
//     and check that param/adam_m/adam_v results are the in-place buffers.
//  4. serialize: TrainConfig from `kiln.train`, plus vocab_size from the ops
//     that token ids from the data index (see vocabularySize).
//
//===----------------------------------------------------------------------===//

#include "codegen/ArtifactWriter.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"
#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/IR/BuiltinAttributes.h"

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
  return failure();
}

std::string roleKey(StringRef role, StringRef name) {
  return (role + ":" + name).str();
}

// Whether `value` is (a reshape view of) an argument of @step with
// kiln.role = "input": indices the data loader fills from the token file.
bool isDataInput(func::FuncOp func, Value value) {
  while (auto reshape = value.getDefiningOp<k::ReshapeOp>())
    value = reshape->getOperand(0);
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != func.getOperation())
    return false;
  auto role =
      func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), k::kRoleAttrName);
  return role && role.getValue() == k::role::kInput;
}

// TrainConfig.vocab_size: the largest token id + 1 the step can index with
// data from the token file. Token ids index the table of a kiln.embedding
// (tokens) and the classes of a kiln.cross_entropy (targets); both come from
// the same file, so the bound is the smallest of those dimensions. 0 when no
// data input indexes anything (nothing for the runtime to check).
int64_t vocabularySize(func::FuncOp func) {
  int64_t vocab = 0;
  auto bound = [&](int64_t size) {
    vocab = vocab == 0 ? size : std::min(vocab, size);
  };
  func.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<k::EmbeddingOp>(op)) {
      // table [V, D] gathered by indices [...]
      if (isDataInput(func, embedding.getIndices()))
        bound(cast<RankedTensorType>(embedding.getTable().getType())
                  .getDimSize(0));
    } else if (auto crossEntropy = dyn_cast<k::CrossEntropyOp>(op)) {
      // logits [..., V], targets [...]
      if (isDataInput(func, crossEntropy.getTargets())) {
        auto logits = cast<RankedTensorType>(crossEntropy.getLogits().getType());
        bound(logits.getDimSize(logits.getRank() - 1));
      }
    }
  });
  return vocab;
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

uint32_t ArtifactWriter::storageOf(uint32_t index) const {
  while (buffers[index].aliasOf >= 0)
    index = static_cast<uint32_t>(buffers[index].aliasOf);
  return index;
}

FailureOr<uint32_t> ArtifactWriter::addBuffer(Value value, Operation *op,
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

uint32_t ArtifactWriter::addKernel(const CpuKernel &kernel, Location loc) {
  auto it = kernelIndex.find(kernel.entry);
  if (it != kernelIndex.end())
    return it->second;
  kernelList.push_back(
      {kernel.entry, kernel.source, locationString(loc), kernel.ops});
  uint32_t index = kernelList.size() - 1;
  kernelIndex[kernel.entry] = index;
  return index;
}

LogicalResult ArtifactWriter::planArguments(func::FuncOp func) {
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto role = func.getArgAttrOfType<StringAttr>(i, k::kRoleAttrName);
    auto nameAttr = func.getArgAttrOfType<StringAttr>(i, k::kNameAttrName);
    if (!role)
      return func.emitError() << "argument " << i << " has no kiln.role";
    std::string name = nameAttr ? nameAttr.str() : role.str();
    FailureOr<uint32_t> index = addBuffer(arg, func, name);
    if (failed(index))
      return failure();
    PlannedBuffer &buffer = buffers[*index];
    StringRef r = role.getValue();
    if (r == k::role::kParam) {
      buffer.role = schema::BufferRole_Parameter;
      auto init = func.getArgAttrOfType<k::InitializerAttr>(i, k::kInitAttrName);
      if (!init)
        return func.emitError()
               << "parameter '" << name << "' has no kiln.init initializer";
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
      buffer.init = {initKind, static_cast<float>(init.getStd())};
    } else if (r == k::role::kAdamM) {
      buffer.role = schema::BufferRole_AdamM;
    } else if (r == k::role::kAdamV) {
      buffer.role = schema::BufferRole_AdamV;
    } else if (r == k::role::kInput) {
      buffer.role = schema::BufferRole_Input;
    } else if (r == k::role::kLearningRate) {
      buffer.role = schema::BufferRole_LearningRate;
    } else if (r == k::role::kStep) {
      buffer.role = schema::BufferRole_StepCount;
    } else {
      return func.emitError() << "argument " << i << " has unknown kiln.role '"
                              << r << "'";
    }
    argumentBuffers[roleKey(r, name)] = *index;
  }
  return success();
}

// C[b] = op(A[b]) op(B[b]): lhs [..., M, K] (or [..., K, M]), rhs [K, N]
// shared over the batch or [..., K, N] (or [N, K] / [..., N, K]).
LogicalResult ArtifactWriter::planMatmul(Operation *op) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value result = op->getResult(0);
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  auto resType = cast<RankedTensorType>(result.getType());
  if (!lhsType.getElementType().isF32() || lhsType.getRank() < 2 ||
      rhsType.getRank() < 2 || resType.getRank() < 2)
    return op->emitError() << "codegen supports f32 matmuls of rank >= 2 only";
  auto boolAttr = [&](StringRef name) {
    auto attr = op->getAttrOfType<BoolAttr>(name);
    return attr && attr.getValue();
  };
  PlannedGemm g;
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
  std::string name = locationString(op->getLoc());
  FailureOr<uint32_t> c =
      addBuffer(result, op, (op->getName().getStringRef() + "@" + name).str());
  if (failed(c))
    return failure();
  g.c = *c;
  flops += 2.0 * g.m * g.n * g.k * g.batch;
  PlannedStep step;
  step.gemm = g;
  step.location = name;
  schedule.push_back(std::move(step));
  return success();
}

LogicalResult ArtifactWriter::planKernel(Operation *op) {
  KernelGroup group = KernelGroup::forOp(op);
  FailureOr<CpuKernel> kernel = CpuKernelEmitter::emit(group);
  if (failed(kernel))
    return failure();
  std::string loc = locationString(op->getLoc());
  PlannedStep step;
  step.kernel = addKernel(*kernel, op->getLoc());
  step.location = loc;
  for (Value v : group.inputs)
    step.buffers.push_back(bufferOf.lookup(v));

  if (isa<k::AdamWOp>(op)) {
    // In place: new_param, new_m, new_v live in the buffers of param, m, v,
    // which must not be read after the update.
    for (auto [result, operandIndex] :
         llvm::zip(op->getResults(), std::array<unsigned, 3>{0, 2, 3})) {
      Value operand = op->getOperand(operandIndex);
      // The operand and every reshape view of it share one buffer: none may
      // be read after the update (func.return included: returned values are
      // copied out after the whole schedule).
      SmallVector<Value> sharing{operand};
      for (size_t next = 0; next < sharing.size(); ++next)
        for (Operation *user : sharing[next].getUsers()) {
          if (auto view = dyn_cast<k::ReshapeOp>(user))
            sharing.push_back(view.getResult());
          else if (user != op && user->getBlock() == op->getBlock() &&
                   op->isBeforeInBlock(user))
            return user->emitError()
                   << "reads a value that kiln.adamw updates in place earlier";
        }
      uint32_t storage = storageOf(bufferOf.lookup(operand));
      bufferOf[result] = storage;
      step.buffers.push_back(storage);
    }
  } else {
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      std::string name = op->getName().getStringRef().str();
      if (op->getNumResults() > 1)
        name += "#" + std::to_string(i);
      FailureOr<uint32_t> index = addBuffer(result, op, name + "@" + loc);
      if (failed(index))
        return failure();
      step.buffers.push_back(*index);
    }
  }
  schedule.push_back(std::move(step));
  return success();
}

LogicalResult ArtifactWriter::planOp(Operation *op) {
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
      buffers[*index].constantData.assign(raw.begin(), raw.end());
      return success();
    }
  }
  if (isa<k::MatmulOp>(op))
    return planMatmul(op);
  if (op->getDialect() != module->getContext()->getLoadedDialect("kiln") ||
      !CpuKernelEmitter::supports(op))
    return op->emitError() << "codegen does not support '" << op->getName()
                           << "'";
  return planKernel(op);
}

LogicalResult ArtifactWriter::planReturn(func::FuncOp func,
                                         func::ReturnOp ret) {
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto role = func.getResultAttrOfType<StringAttr>(i, k::kRoleAttrName);
    if (!role)
      continue;
    auto nameAttr = func.getResultAttrOfType<StringAttr>(i, k::kNameAttrName);
    StringRef r = role.getValue();
    std::string name = nameAttr ? nameAttr.str() : r.str();
    uint32_t index = bufferOf.lookup(value);

    if (r == k::role::kParam || r == k::role::kAdamM || r == k::role::kAdamV) {
      auto it = argumentBuffers.find(roleKey(r, name));
      if (it == argumentBuffers.end() || storageOf(index) != it->second)
        return ret.emitError() << "result " << i << " (" << r << " '" << name
                               << "') is not updated in place in the "
                                  "argument with the same role and name";
      continue;
    }
    schema::BufferRole bufferRole;
    if (r == k::role::kLoss)
      bufferRole = schema::BufferRole_Loss;
    else if (r == k::role::kGrad)
      bufferRole = schema::BufferRole_Gradient;
    else if (r == k::role::kGradNorm)
      bufferRole = schema::BufferRole_GradNorm;
    else
      return ret.emitError() << "result " << i << " has unknown kiln.role '"
                             << r << "'";

    // A result needs a buffer of its own: copy when the value lives in an
    // argument, a constant, a view, or a buffer that is already a result.
    if (buffers[index].role != schema::BufferRole_Activation ||
        buffers[index].aliasOf >= 0) {
      FailureOr<CpuKernel> copy =
          CpuKernelEmitter::emitCopy(cast<RankedTensorType>(value.getType()));
      if (failed(copy))
        return ret.emitError() << "cannot copy result " << i;
      PlannedBuffer buffer = buffers[index];
      buffer.aliasOf = -1;
      buffer.init.reset();
      buffer.constantData.clear();
      buffers.push_back(std::move(buffer));
      uint32_t fresh = buffers.size() - 1;
      PlannedStep step;
      step.kernel = addKernel(*copy, value.getLoc());
      step.buffers = {index, fresh};
      step.location = locationString(value.getLoc());
      schedule.push_back(std::move(step));
      index = fresh;
    }
    buffers[index].role = bufferRole;
    buffers[index].name = name;
  }
  return success();
}

LogicalResult ArtifactWriter::plan() {
  auto func = module.lookupSymbol<func::FuncOp>("step");
  if (!func)
    return module.emitError() << "codegen needs a func.func @step";
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "codegen needs a single-block @step";
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

FailureOr<std::string> ArtifactWriter::serialize() {
  auto train = module->getAttrOfType<DictionaryAttr>(k::kTrainAttrName);
  if (!train)
    return module.emitError() << "codegen needs the module attribute kiln.train";
  auto intField = [&](StringRef key) -> int64_t {
    auto attr = train.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : 0;
  };
  auto optimizer = train.getAs<StringAttr>("optimizer");
  auto model = module->getAttrOfType<StringAttr>(k::kModelAttrName);

  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  // Each kernel's buffer signature, from its first call: a kernel is shared
  // only by calls with identical source, hence identical baked-in shapes.
  // (Every kernel takes at least its output, so an empty list is "not seen".)
  std::vector<std::vector<schema::KernelArg>> kernelArgs(kernelList.size());
  for (const PlannedStep &step : schedule) {
    if (step.gemm || !kernelArgs[step.kernel].empty())
      continue;
    for (uint32_t b : step.buffers) {
      int64_t elements = 1;
      for (int64_t d : buffers[b].shape)
        elements *= d;
      kernelArgs[step.kernel].emplace_back(buffers[b].dtype, elements);
    }
  }
  std::vector<flatbuffers::Offset<schema::Kernel>> kernelOffsets;
  for (size_t i = 0; i < kernelList.size(); ++i) {
    const EmittedKernel &kernel = kernelList[i];
    kernelOffsets.push_back(schema::CreateKernelDirect(
        fbb, kernel.entry.c_str(), kernel.source.c_str(),
        kernel.location.c_str(), kernel.ops.c_str(), &kernelArgs[i]));
  }

  std::vector<flatbuffers::Offset<schema::Buffer>> bufferOffsets;
  for (const PlannedBuffer &b : buffers) {
    auto name = fbb.CreateString(b.name);
    auto shape = fbb.CreateVector(b.shape);
    flatbuffers::Offset<schema::Initializer> init = 0;
    if (b.init)
      init = schema::CreateInitializer(fbb, b.init->first, b.init->second);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data = 0;
    if (b.role == schema::BufferRole_Constant)
      data = fbb.CreateVector(b.constantData);
    bufferOffsets.push_back(schema::CreateBuffer(fbb, name, b.role, b.dtype,
                                                 shape, init, data,
                                                 b.aliasOf));
  }

  std::vector<flatbuffers::Offset<schema::Step>> stepOffsets;
  for (const PlannedStep &s : schedule) {
    flatbuffers::Offset<void> op;
    schema::Operation kind;
    if (s.gemm) {
      const PlannedGemm &g = *s.gemm;
      op = schema::CreateGemmCall(fbb, g.a, g.b, g.c, g.m, g.n, g.k, g.batch,
                                  g.transA, g.transB, g.strideA, g.strideB,
                                  g.strideC)
               .Union();
      kind = schema::Operation_GemmCall;
    } else {
      op = schema::CreateKernelCallDirect(fbb, s.kernel, &s.buffers).Union();
      kind = schema::Operation_KernelCall;
    }
    stepOffsets.push_back(
        schema::CreateStep(fbb, kind, op, fbb.CreateString(s.location)));
  }

  auto step = module.lookupSymbol<func::FuncOp>("step");
  auto trainConfig = schema::CreateTrainConfigDirect(
      fbb, intField("batch"), intField("seq"),
      optimizer ? optimizer.getValue().str().c_str() : "adamw",
      step ? vocabularySize(step) : 0);
  auto artifact = schema::CreateArtifactDirect(
      fbb, schema::kArtifactVersion, model ? model.getValue().str().c_str() : "",
      "cpu", trainConfig, CpuKernelEmitter::prelude(), &kernelOffsets,
      &bufferOffsets, &stepOffsets, flops);
  schema::FinishArtifactBuffer(fbb, artifact);
  // The flatbuffer, then the integrity trailer (runtime/schema/ArtifactChecksum.h).
  std::string bytes(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                    fbb.GetSize());
  return bytes + schema::checksumTrailer(fbb.GetBufferPointer(), fbb.GetSize());
}

} // namespace kiln
