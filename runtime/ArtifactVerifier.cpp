//===- ArtifactVerifier.cpp - Content checks of a structurally valid .kart ===//
//
// The flatbuffers verifier only proves that every offset stays inside the
// file; it knows nothing about what the fields mean. These checks establish
// the invariants the CPU backend relies on, so that the executor's own
// indexing and every call it makes stay in bounds (the kernels' sources are
// C++ compiled as they are: these checks make each call match the signature
// the source was generated for; the checksum trailer guards the text):
//   1. header fields: target, train config (batch, seq, grad_accum, clip);
//   2. buffers: known dtype/role, non-negative shape, sane byte size,
//      aliases point to an earlier buffer of the same byte size, parameters
//      carry an initializer, constants carry exactly their bytes, exactly one
//      loss, scalar f32 control buffers, inputs shaped [batch, seq] i32,
//      gradients and optimizer state named after a parameter of its size;
//   3. kernels: a valid unique C identifier for every entry, a source;
//   4. programs: unique names, "step" and "update" present (and nothing
//      unknown); in each schedule every kernel and buffer index in range,
//      every KernelCall's buffers matching its kernel's signature (count,
//      dtype, elements), and every GEMM's operands large enough for
//      m/n/k/batch/strides, its epilogue's bias / aux buffers present
//      exactly when used, F32, of the sizes m and n imply, apart from C;
//      a KernelCall's cudnn_attention (CudnnAttentionCheck.cpp); a
//      CollectiveCall's axis, kind and buffers, and ZeRO shards
//      (CollectiveCheck.cpp).
// Messages name the offending entry and, for schedule entries, the model-file
// location the entry came from.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/CollectiveCheck.h"
#include "runtime/schema/BufferRoles.h"
#include "runtime/CudnnAttentionCheck.h"
#include "runtime/MemoryPlanCheck.h"
#include "runtime/PaddedLayout.h"
#include "runtime/Safetensors.h"

#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>

namespace kiln::rt {

namespace {

// No single buffer may exceed 1 TiB: far above any real plan, and small
// enough that element offsets never overflow int64 arithmetic.
constexpr int64_t kMaxBufferBytes = int64_t(1) << 40;

std::string locationSuffix(const flatbuffers::String *location) {
  if (!location || location->size() == 0)
    return "";
  return " (" + location->str() + ")";
}

bool isIdentifier(const flatbuffers::String *s) {
  if (!s || s->size() == 0)
    return false;
  for (size_t i = 0; i < s->size(); ++i) {
    char c = s->Get(i);
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0)))
      return false;
  }
  return true;
}

// Roles of one-element f32 buffers the runtime reads or writes.
bool isScalarRole(schema::BufferRole role) {
  switch (role) {
  case schema::BufferRole_Loss:
  case schema::BufferRole_GradNorm:
  case schema::BufferRole_LearningRate:
  case schema::BufferRole_StepCount:
  case schema::BufferRole_Metric:
  case schema::BufferRole_UpdateNorm:
  case schema::BufferRole_ParamNorm:
  case schema::BufferRole_EvalLoss:
    return true;
  default:
    return false;
  }
}

// Roles of which an artifact has at most one buffer (Loss: exactly one).
bool isSingletonRole(schema::BufferRole role) {
  return isScalarRole(role) && role != schema::BufferRole_Metric;
}

bool isF32Scalar(const schema::Buffer &buffer, const BufferInfo &info) {
  return buffer.dtype() == schema::DType_F32 && info.elements == 1;
}

// Walks one buffer's shape; fills `info.elements`/`bytes`.
Status checkShape(uint32_t index, const schema::Buffer &buffer,
                  BufferInfo &info) {
  size_t elementSize = dtypeSize(buffer.dtype());
  int64_t elements = 1;
  if (buffer.shape()) {
    for (uint32_t d = 0; d < buffer.shape()->size(); ++d) {
      int64_t dim = buffer.shape()->Get(d);
      if (dim < 0)
        return invalidArgument("buffer ", index, " ('", bufferName(buffer),
                               "') has negative dimension ", dim, " at axis ",
                               d);
      if (dim != 0 && elements > kMaxBufferBytes / dim)
        return invalidArgument("buffer ", index, " ('", bufferName(buffer),
                               "') is larger than 1 TiB");
      elements *= dim;
    }
  }
  if (elements > kMaxBufferBytes / static_cast<int64_t>(elementSize))
    return invalidArgument("buffer ", index, " ('", bufferName(buffer),
                           "') is larger than 1 TiB");
  info.elements = elements;
  info.bytes = elements * static_cast<int64_t>(elementSize);
  return okStatus();
}

// logical_shape (pad-dims): only on a Parameter or its Gradient / optimizer
// state, same rank as its (whole) shape, every dim in [1, padded dim], so
// the runtime's copies between the two layouts stay inside the tensor.
Status checkLogicalShape(const schema::Buffer &buffer,
                         const std::string &describe) {
  const auto *logical = buffer.logical_shape();
  if (!logical || logical->size() == 0)
    return okStatus();
  if (!schema::hasParameterLayout(buffer.role()))
    return invalidArgument(describe, " has a logical_shape but role ",
                           schema::EnumNameBufferRole(buffer.role()),
                           " (only parameters and their gradients and "
                           "optimizer state are padded)");
  std::vector<int64_t> shape = wholeShape(buffer);
  std::vector<int64_t> logicalShape(logical->begin(), logical->end());
  if (buffer.dtype() != schema::DType_F32 || buffer.alias_of() != -1)
    return invalidArgument(describe, " has a logical_shape but is not an f32 "
                           "buffer with storage of its own");
  if (logicalShape.size() != shape.size())
    return invalidArgument(describe, " has logical_shape ",
                           formatShape(logicalShape), " of another rank than "
                           "its shape ", formatShape(shape));
  for (size_t d = 0; d < shape.size(); ++d)
    if (logicalShape[d] < 1 || logicalShape[d] > shape[d])
      return invalidArgument(describe, " has logical_shape ",
                             formatShape(logicalShape),
                             " that does not fit in its shape ",
                             formatShape(shape), " (axis ", d, ")");
  return okStatus();
}

Status checkBuffer(const schema::Artifact &artifact, uint32_t index,
                   std::vector<BufferInfo> &infos) {
  const schema::Buffer &buffer = *artifact.buffers()->Get(index);
  auto describe = [&] {
    return detail::concat("buffer ", index, " ('", bufferName(buffer), "')");
  };
  if (dtypeSize(buffer.dtype()) == 0)
    return invalidArgument(describe(), " has unknown dtype ",
                           int(buffer.dtype()));
  if (buffer.role() < schema::BufferRole_MIN ||
      buffer.role() > schema::BufferRole_MAX)
    return invalidArgument(describe(), " has unknown role ",
                           int(buffer.role()));
  BufferInfo &info = infos[index];
  KILN_RETURN_IF_ERROR(checkShape(index, buffer, info));
  info.storage = index;

  int32_t alias = buffer.alias_of();
  if (alias != -1) {
    if (alias < 0 || static_cast<uint32_t>(alias) >= index)
      return invalidArgument(describe(), " aliases buffer ", alias,
                             ", which is not an earlier buffer");
    if (infos[alias].bytes != info.bytes)
      return invalidArgument(describe(), " (", info.bytes,
                             " bytes) aliases buffer ", alias, " ('",
                             bufferName(*artifact.buffers()->Get(alias)),
                             "', ", infos[alias].bytes,
                             " bytes): sizes differ");
    info.storage = infos[alias].storage;
  }

  schema::BufferRole role = buffer.role();
  const char *roleName = schema::EnumNameBufferRole(role);
  KILN_RETURN_IF_ERROR(checkLogicalShape(buffer, describe()));
  if (role != schema::BufferRole_Parameter && buffer.weight_decay() != 0)
    return invalidArgument(describe(), " has a weight_decay but role ",
                           roleName);
  if (role == schema::BufferRole_Parameter) {
    if (!std::isfinite(buffer.weight_decay()) || buffer.weight_decay() < 0)
      return invalidArgument(describe(), " has invalid weight_decay ",
                             buffer.weight_decay());
    if (!buffer.init())
      return invalidArgument(describe(), " is a Parameter without an Initializer");
    schema::InitKind kind = buffer.init()->kind();
    if (kind < schema::InitKind_MIN || kind > schema::InitKind_MAX)
      return invalidArgument(describe(), " has unknown initializer kind ",
                             int(kind));
    float stddev = buffer.init()->std();
    if (kind == schema::InitKind_Normal && !(std::isfinite(stddev) && stddev >= 0))
      return invalidArgument(describe(), " has invalid normal std ", stddev);
  } else if (buffer.init()) {
    return invalidArgument(describe(), " has an Initializer but role ",
                           roleName, " (only Parameter buffers are initialised)");
  }
  // The runtime writes parameters, optimizer state and control scalars as
  // f32 and tokens as i32; anything else would be reinterpreted silently.
  bool scalar = isScalarRole(role);
  bool needsF32 = scalar || schema::isPerParameterRole(role) ||
                  role == schema::BufferRole_Parameter;
  if (needsF32 && buffer.dtype() != schema::DType_F32)
    return invalidArgument(describe(), " has role ", roleName, " and dtype ",
                           schema::EnumNameDType(buffer.dtype()),
                           "; this runtime requires F32");
  if (scalar && !isF32Scalar(buffer, info))
    return invalidArgument(describe(), " has role ", roleName, " but ",
                           info.elements, " elements (expected one f32)");
  // Buffers the runtime fills must own their storage, or filling one would
  // silently overwrite another.
  // (Optimizer state is restored from checkpoints; loss and gradients are
  // zeroed before the first micro-step when gradients accumulate.)
  // The dropout RNG state is written as two i64 by the runtime.
  if (role == schema::BufferRole_DropoutRng &&
      (buffer.dtype() != schema::DType_I64 || info.elements != 2))
    return invalidArgument(describe(), " has role DropoutRng but is not two "
                           "I64 elements ([seed, offset])");
  bool runtimeFilled = role == schema::BufferRole_Parameter ||
                       role == schema::BufferRole_DropoutRng ||
                       role == schema::BufferRole_Input ||
                       role == schema::BufferRole_LearningRate ||
                       role == schema::BufferRole_StepCount ||
                       role == schema::BufferRole_Constant ||
                       role == schema::BufferRole_Loss ||
                       schema::isPerParameterRole(role);
  if (runtimeFilled && alias != -1)
    return invalidArgument(describe(), " has role ", roleName,
                           " and may not alias another buffer");

  if (role == schema::BufferRole_Constant) {
    size_t have = buffer.constant_data() ? buffer.constant_data()->size() : 0;
    if (static_cast<int64_t>(have) != info.bytes)
      return invalidArgument(describe(), " is a Constant of ", info.bytes,
                             " bytes but has ", have, " bytes of constant_data");
  } else if (buffer.constant_data() && buffer.constant_data()->size() > 0) {
    return invalidArgument(describe(), " has constant_data but role ",
                           roleName);
  }

  if (role == schema::BufferRole_Input) {
    // What some data source writes (token data: tokens and targets [batch,
    // seq] i32; --data tsp: coords [batch, n_max, 2] f32, lengths [batch]
    // i32, targets [batch, n_max] i32). The loader matches the exact shapes
    // against the source it opens (TrainingData.cpp).
    std::string name = bufferName(buffer);
    const auto *shape = buffer.shape();
    const schema::TrainConfig *train = artifact.train();
    auto rankAndBatch = [&](schema::DType dtype, uint32_t rank) {
      return buffer.dtype() == dtype && shape && shape->size() == rank &&
             shape->Get(0) == train->batch();
    };
    if (name == "tokens") {
      if (!rankAndBatch(schema::DType_I32, 2) || shape->Get(1) != train->seq())
        return invalidArgument(describe(), " must be i32 [batch, seq] = [",
                               train->batch(), ", ", train->seq(), "]");
    } else if (name == "targets") {
      if (!rankAndBatch(schema::DType_I32, 2))
        return invalidArgument(describe(), " must be i32 [batch, n] with batch ",
                               train->batch(), " ([batch, seq] for tokens)");
    } else if (name == "coords") {
      if (!rankAndBatch(schema::DType_F32, 3) || shape->Get(2) != 2)
        return invalidArgument(describe(), " must be f32 [batch, n_max, 2] "
                               "with batch ", train->batch());
    } else if (name == "lengths") {
      if (!rankAndBatch(schema::DType_I32, 1))
        return invalidArgument(describe(), " must be i32 [batch] = [",
                               train->batch(), "]");
    } else {
      return invalidArgument(describe(),
                             " is an Input the data loader cannot fill "
                             "(known inputs: 'tokens', 'targets' for token "
                             "data; 'coords', 'lengths', 'targets' for "
                             "--data tsp)");
    }
  }
  return okStatus();
}

Status checkBuffers(const schema::Artifact &artifact,
                    std::vector<BufferInfo> &infos) {
  if (!artifact.buffers() || artifact.buffers()->size() == 0)
    return invalidArgument("has no buffers");
  uint32_t count = artifact.buffers()->size();
  infos.assign(count, BufferInfo{});
  std::map<schema::BufferRole, int> singletons;
  std::set<std::string> inputs, metrics;
  std::map<std::string, uint32_t> params;
  for (uint32_t i = 0; i < count; ++i) {
    KILN_RETURN_IF_ERROR(checkBuffer(artifact, i, infos));
    const schema::Buffer &buffer = *artifact.buffers()->Get(i);
    schema::BufferRole role = buffer.role();
    if (isSingletonRole(role) && ++singletons[role] > 1)
      return invalidArgument("has more than one buffer with role ",
                             schema::EnumNameBufferRole(role));
    std::set<std::string> *names =
        role == schema::BufferRole_Input    ? &inputs
        : role == schema::BufferRole_Metric ? &metrics
                                            : nullptr;
    if (names && !names->insert(bufferName(buffer)).second)
      return invalidArgument(schema::EnumNameBufferRole(role), " '",
                             bufferName(buffer),
                             "' appears in more than one buffer");
    KILN_RETURN_IF_ERROR(checkShard(artifact, i, infos[i]));
    if (role == schema::BufferRole_Parameter &&
        !params.emplace(bufferName(buffer), i).second)
      return invalidArgument("parameter '", bufferName(buffer),
                             "' appears in more than one buffer");
  }
  if (singletons[schema::BufferRole_Loss] != 1)
    return invalidArgument("has no buffer with role Loss");
  // Gradients and optimizer state are reported and checkpointed under their
  // parameter's name; each must match one, element for element.
  for (uint32_t i = 0; i < count; ++i) {
    const schema::Buffer &buffer = *artifact.buffers()->Get(i);
    if (!schema::isPerParameterRole(buffer.role()))
      continue;
    auto param = params.find(bufferName(buffer));
    if (param == params.end())
      return invalidArgument("buffer ", i, " ('", bufferName(buffer), "') is a ",
                             schema::EnumNameBufferRole(buffer.role()),
                             " of no Parameter of that name");
    // Whole tensors compared (a ZeRO shard's slice checked by checkShard).
    const schema::Buffer &paramBuffer = *artifact.buffers()->Get(param->second);
    if (wholeShape(buffer) != wholeShape(paramBuffer))
      return invalidArgument("buffer ", i, " ('", bufferName(buffer), "') is a ",
                             schema::EnumNameBufferRole(buffer.role()), " of shape ",
                             formatShape(wholeShape(buffer)), " for a parameter of ",
                             formatShape(wholeShape(paramBuffer)));
  }
  return okStatus();
}

Status checkKernels(const schema::Artifact &artifact) {
  if (!artifact.kernels())
    return okStatus();
  std::set<std::string> entries;
  for (uint32_t i = 0; i < artifact.kernels()->size(); ++i) {
    const schema::Kernel &kernel = *artifact.kernels()->Get(i);
    std::string where = detail::concat("kernel ", i,
                                       locationSuffix(kernel.location()));
    if (!isIdentifier(kernel.entry()))
      return invalidArgument(where, ": entry '",
                             kernel.entry() ? kernel.entry()->str() : "",
                             "' is not a valid C identifier");
    if (!entries.insert(kernel.entry()->str()).second)
      return invalidArgument(where, ": entry '", kernel.entry()->str(),
                             "' is defined twice");
    if (!kernel.source() || kernel.source()->size() == 0)
      return invalidArgument(where, " ('", kernel.entry()->str(),
                             "') has no source");
  }
  return okStatus();
}

// "sm_" + 2-3 digits + an optional "a"/"f" (arch-specific features).
bool isCudaArchName(std::string_view arch) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_")
    return false;
  size_t digits = 0;
  while (3 + digits < arch.size() && std::isdigit(
             static_cast<unsigned char>(arch[3 + digits])))
    ++digits;
  size_t rest = arch.size() - 3 - digits;
  return digits >= 2 && digits <= 3 &&
         (rest == 0 || (rest == 1 && (arch.back() == 'a' || arch.back() == 'f')));
}

// A CUDA artifact names the architectures its kernels were checked for and
// gives every kernel a launch configuration the hardware accepts (a block
// over 1024 threads or an empty grid would fail only at the first launch).
Status checkCudaFields(const schema::Artifact &artifact) {
  if (!artifact.archs() || artifact.archs()->size() == 0)
    return invalidArgument("is a CUDA artifact without architectures (archs)");
  for (const flatbuffers::String *arch : *artifact.archs())
    if (!arch || !isCudaArchName(arch->string_view()))
      return invalidArgument("archs has '", arch ? arch->str() : "",
                             "', expected a CUDA architecture such as sm_80");
  if (!artifact.kernels())
    return okStatus();
  for (uint32_t i = 0; i < artifact.kernels()->size(); ++i) {
    const schema::Kernel &kernel = *artifact.kernels()->Get(i);
    const schema::KernelLaunch *launch = kernel.launch();
    std::string where = detail::concat("kernel ", i,
                                       locationSuffix(kernel.location()));
    if (!launch)
      return invalidArgument(where, ": a CUDA kernel without a launch "
                             "configuration");
    if (launch->grid() < 1 || launch->block() < 1 || launch->block() > 1024)
      return invalidArgument(where, ": launch grid ", launch->grid(),
                             " x block ", launch->block(),
                             " (need grid >= 1 and 1 <= block <= 1024)");
  }
  return okStatus();
}

// The highest element a GEMM operand touches is
//   (batch - 1) * stride + rows * cols - 1,
// which must lie inside the buffer.
Status checkGemmOperand(const schema::Artifact &artifact,
                        const std::vector<BufferInfo> &infos,
                        const std::string &where, const char *operand,
                        uint32_t index, int64_t rows, int64_t cols,
                        int64_t batch, int64_t stride,
                        schema::DType expected) {
  uint32_t count = artifact.buffers()->size();
  if (index >= count)
    return invalidArgument(where, ": GemmCall operand ", operand, " is buffer ",
                           index, ", but the artifact has ", count, " buffers");
  const schema::Buffer &buffer = *artifact.buffers()->Get(index);
  if (buffer.dtype() != expected)
    return invalidArgument(where, ": GemmCall operand ", operand, " (buffer ",
                           index, " '", bufferName(buffer), "') is ",
                           schema::EnumNameDType(buffer.dtype()), ", expected ",
                           schema::EnumNameDType(expected));
  int64_t elements = infos[index].elements;
  // 128-bit so that a crafted batch/stride cannot overflow the check itself.
  __int128 need = static_cast<__int128>(batch - 1) * stride +
                  static_cast<__int128>(rows) * cols;
  bool fits = need <= elements;
  if (!fits)
    return invalidArgument(
        where, ": GemmCall operand ", operand, " (buffer ", index, " '",
        bufferName(buffer), "') has ", elements, " elements, but ", batch,
        " matrices of ", rows, "x", cols, " with stride ", stride,
        " need more");
  return okStatus();
}

// One epilogue buffer (`field` "bias" or "aux"): present exactly when the
// epilogue uses it (`required`; `optional` allows -1), an F32 buffer of
// `elements` elements, and -- when the call writes it -- in a storage of
// its own, apart from A, B and C.
Status checkEpilogueBuffer(const schema::Artifact &artifact,
                           const std::vector<BufferInfo> &infos,
                           const std::string &where,
                           const schema::GemmCall &gemm, const char *field,
                           int32_t index, bool used, bool optional,
                           int64_t elements, bool written,
                           schema::DType dtype) {
  const char *epilogue = schema::EnumNameGemmEpilogue(gemm.epilogue());
  if (!used) {
    if (index != -1)
      return invalidArgument(where, ": GemmCall with epilogue ", epilogue,
                             " has ", field, " buffer ", index,
                             " (expected -1: the epilogue uses no ", field,
                             ")");
    return okStatus();
  }
  if (index == -1 && optional)
    return okStatus();
  uint32_t count = artifact.buffers()->size();
  if (index < 0 || static_cast<uint32_t>(index) >= count)
    return invalidArgument(where, ": GemmCall epilogue ", epilogue, " ",
                           field, " is buffer ", index,
                           ", but the artifact has ", count, " buffers");
  const schema::Buffer &buffer = *artifact.buffers()->Get(index);
  if (buffer.dtype() != dtype || infos[index].elements != elements)
    return invalidArgument(
        where, ": GemmCall epilogue ", epilogue, " ", field, " (buffer ",
        index, " '", bufferName(buffer), "') has ", infos[index].elements,
        " elements of ", schema::EnumNameDType(buffer.dtype()), ", expected ",
        elements, " of ", schema::EnumNameDType(dtype), " (m=", gemm.m(),
        " n=", gemm.n(), ")");
  // C is written while the epilogue reads or writes this buffer, and a
  // written one must not clobber A or B.
  uint32_t storage = infos[index].storage;
  if (storage == infos[gemm.c()].storage ||
      (written && (storage == infos[gemm.a()].storage ||
                   storage == infos[gemm.b()].storage)))
    return invalidArgument(where, ": GemmCall epilogue ", epilogue, " ",
                           written ? "writes" : "reads", " ", field,
                           " in the storage of ",
                           written ? "A, B or C" : "C");
  return okStatus();
}

// The epilogue's buffers (artifact.fbs, GemmEpilogue): bias [N] (or [M] for
// BgradA), aux [M, N]; epilogues need one matrix (batch 1).
Status checkGemmEpilogue(const schema::Artifact &artifact,
                         const std::vector<BufferInfo> &infos,
                         const std::string &where,
                         const schema::GemmCall &gemm) {
  using E = schema::GemmEpilogue;
  E e = gemm.epilogue();
  if (e < schema::GemmEpilogue_MIN || e > schema::GemmEpilogue_MAX)
    return invalidArgument(where, ": GemmCall has unknown epilogue ",
                           static_cast<int>(e));
  if (e != schema::GemmEpilogue_None && gemm.batch() != 1)
    return invalidArgument(where, ": GemmCall epilogue ",
                           schema::EnumNameGemmEpilogue(e), " with batch ",
                           gemm.batch(), " (epilogues need batch 1)");
  bool readsBias = e == schema::GemmEpilogue_Bias ||
                   e == schema::GemmEpilogue_BiasGelu;
  bool writesBias = e == schema::GemmEpilogue_DgeluBgrad ||
                    e == schema::GemmEpilogue_BgradA ||
                    e == schema::GemmEpilogue_BgradB;
  bool writesAux = e == schema::GemmEpilogue_Gelu ||
                   e == schema::GemmEpilogue_BiasGelu;
  bool readsAux = e == schema::GemmEpilogue_Dgelu ||
                  e == schema::GemmEpilogue_DgeluBgrad;
  int64_t biasElements = e == schema::GemmEpilogue_BgradA ? gemm.m() : gemm.n();
  // A BF16 C (bf16 operands, fp32 accumulation): cuBLASLt takes the bias
  // and the GELU aux in D's type (cublasLt.h, BIAS_DATA_TYPE and
  // EPILOGUE_AUX_DATA_TYPE: other types only for IMMA and fp8), and Kiln
  // emits the forward epilogues and Dgelu (a bf16 aux read) in that form;
  // the bias gradients would be bf16 sums, so they keep an F32 C.
  schema::DType dtype = schema::DType_F32;
  if (gemm.c() < artifact.buffers()->size() &&
      artifact.buffers()->Get(gemm.c())->dtype() == schema::DType_BF16 &&
      e != schema::GemmEpilogue_None) {
    if (e != schema::GemmEpilogue_Bias && e != schema::GemmEpilogue_BiasGelu &&
        e != schema::GemmEpilogue_Dgelu)
      return invalidArgument(where, ": GemmCall epilogue ",
                             schema::EnumNameGemmEpilogue(e),
                             " with a BF16 C (only Bias, BiasGelu and Dgelu "
                             "have a bf16 form)");
    dtype = schema::DType_BF16;
  }
  KILN_RETURN_IF_ERROR(checkEpilogueBuffer(
      artifact, infos, where, gemm, "bias", gemm.bias(),
      readsBias || writesBias, false, biasElements, writesBias, dtype));
  KILN_RETURN_IF_ERROR(checkEpilogueBuffer(
      artifact, infos, where, gemm, "aux", gemm.aux(), readsAux || writesAux,
      writesAux, gemm.m() * gemm.n(), writesAux, dtype));
  return okStatus();
}

Status checkGemm(const schema::Artifact &artifact,
                 const std::vector<BufferInfo> &infos, const std::string &where,
                 const schema::GemmCall &gemm) {
  int64_t m = gemm.m(), n = gemm.n(), k = gemm.k(), batch = gemm.batch();
  if (m < 1 || n < 1 || k < 1 || batch < 1)
    return invalidArgument(where, ": GemmCall has m=", m, " n=", n, " k=", k,
                           " batch=", batch, " (all must be >= 1)");
  if (gemm.stride_a() < 0 || gemm.stride_b() < 0 || gemm.stride_c() < 0)
    return invalidArgument(where, ": GemmCall has a negative stride");
  // cblas takes int dimensions.
  constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
  if (m > kMaxDim || n > kMaxDim || k > kMaxDim)
    return invalidArgument(where, ": GemmCall dimension exceeds 2^31-1");
  // Stored shapes: A is [M,K] or [K,M] transposed, B is [K,N] or [N,K].
  // A and B are both F32 or both BF16 (A decides); C is F32, or BF16 when
  // the operands are (fp32 accumulation, rounded result).
  uint32_t numBuffers = artifact.buffers()->size();
  schema::DType operands =
      gemm.a() < numBuffers &&
              artifact.buffers()->Get(gemm.a())->dtype() == schema::DType_BF16
          ? schema::DType_BF16
          : schema::DType_F32;
  KILN_RETURN_IF_ERROR(checkGemmOperand(artifact, infos, where, "A", gemm.a(),
                                        m, k, batch, gemm.stride_a(),
                                        operands));
  KILN_RETURN_IF_ERROR(checkGemmOperand(artifact, infos, where, "B", gemm.b(),
                                        k, n, batch, gemm.stride_b(),
                                        operands));
  schema::DType result =
      operands == schema::DType_BF16 && gemm.c() < numBuffers &&
              artifact.buffers()->Get(gemm.c())->dtype() == schema::DType_BF16
          ? schema::DType_BF16
          : schema::DType_F32;
  KILN_RETURN_IF_ERROR(checkGemmOperand(artifact, infos, where, "C", gemm.c(),
                                        m, n, batch, gemm.stride_c(), result));
  if (batch > 1 && gemm.stride_c() < m * n)
    return invalidArgument(where, ": GemmCall stride_c ", gemm.stride_c(),
                           " is smaller than one ", m, "x", n,
                           " result, so batch results would overlap");
  uint32_t cStorage = infos[gemm.c()].storage;
  if (infos[gemm.a()].storage == cStorage || infos[gemm.b()].storage == cStorage)
    return invalidArgument(where, ": GemmCall writes C into the storage of "
                                  "one of its inputs");
  if (gemm.accumulate() && (result != schema::DType_F32 ||
                            gemm.epilogue() != schema::GemmEpilogue_None))
    return invalidArgument(where, ": GemmCall accumulates into C, which needs "
                                  "an F32 C and no epilogue");
  return checkGemmEpilogue(artifact, infos, where, gemm);
}

Status checkSchedule(const schema::Artifact &artifact,
                     const std::vector<BufferInfo> &infos,
                     const schema::Program &program) {
  std::string name = program.name()->str();
  if (!program.schedule())
    return invalidArgument("program '", name, "' has no schedule");
  uint32_t numKernels = artifact.kernels() ? artifact.kernels()->size() : 0;
  uint32_t numBuffers = artifact.buffers()->size();
  for (uint32_t i = 0; i < program.schedule()->size(); ++i) {
    const schema::Step &step = *program.schedule()->Get(i);
    std::string where = detail::concat(name, "[", i, "]",
                                       locationSuffix(step.location()));
    switch (step.op_type()) {
    case schema::Operation_KernelCall: {
      // The flatbuffers verifier accepts a union type without its value.
      const schema::KernelCall *call = step.op_as_KernelCall();
      if (!call)
        return invalidArgument(where, ": KernelCall entry has no operation");
      if (call->kernel() >= numKernels)
        return invalidArgument(where, ": KernelCall of kernel ", call->kernel(),
                               ", but the artifact has ", numKernels,
                               " kernels");
      // The kernel's source bakes in each argument's type and size: a call
      // passing anything else would read or write out of bounds.
      const schema::Kernel &kernel = *artifact.kernels()->Get(call->kernel());
      uint32_t numArgs = kernel.args() ? kernel.args()->size() : 0;
      uint32_t numPassed = call->buffers() ? call->buffers()->size() : 0;
      if (numPassed != numArgs)
        return invalidArgument(where, ": KernelCall passes ", numPassed,
                               " buffers to kernel '",
                               kernel.entry() ? kernel.entry()->str() : "",
                               "', which takes ", numArgs);
      for (uint32_t j = 0; j < numPassed; ++j) {
        uint32_t b = call->buffers()->Get(j);
        if (b >= numBuffers)
          return invalidArgument(where, ": KernelCall argument ", j,
                                 " is buffer ", b, ", but the artifact has ",
                                 numBuffers, " buffers");
        const schema::KernelArg &arg = *kernel.args()->Get(j);
        const schema::Buffer &buffer = *artifact.buffers()->Get(b);
        if (buffer.dtype() != arg.dtype() ||
            infos[b].elements != arg.elements())
          return invalidArgument(
              where, ": KernelCall argument ", j, " is buffer ", b, " (",
              infos[b].elements, " elements of dtype ",
              static_cast<int>(buffer.dtype()), "), but kernel '",
              kernel.entry() ? kernel.entry()->str() : "", "' takes ",
              arg.elements(), " elements of dtype ",
              static_cast<int>(arg.dtype()));
      }
      KILN_RETURN_IF_ERROR(checkCudnnAttention(artifact, *call, where));
      break;
    }
    case schema::Operation_GemmCall:
      if (!step.op_as_GemmCall())
        return invalidArgument(where, ": GemmCall entry has no operation");
      KILN_RETURN_IF_ERROR(
          checkGemm(artifact, infos, where, *step.op_as_GemmCall()));
      break;
    case schema::Operation_CollectiveCall:
      if (!step.op_as_CollectiveCall())
        return invalidArgument(where, ": CollectiveCall entry has no operation");
      KILN_RETURN_IF_ERROR(
          checkCollective(artifact, infos, where, *step.op_as_CollectiveCall()));
      if (const schema::CollectiveCall &c = *step.op_as_CollectiveCall(); c.overlap()) {
        // Overlapped: an all-reduce or all-gather, finished before a later
        // entry of this program (or its end).
        if (c.kind() != schema::CollectiveKind_AllReduce &&
            c.kind() != schema::CollectiveKind_AllGather)
          return invalidArgument(where, ": ", schema::EnumNameCollectiveKind(c.kind()),
                                 " CollectiveCall cannot overlap (only AllReduce "
                                 "and AllGather)");
        if (c.overlap_until() != -1 &&
            (c.overlap_until() <= int64_t(i) ||
             c.overlap_until() >= int64_t(program.schedule()->size())))
          return invalidArgument(where, ": CollectiveCall overlaps until entry ",
                                 c.overlap_until(), ", not a later entry of '", name,
                                 "' (", program.schedule()->size(), " entries)");
      }
      break;
    default:
      return invalidArgument(where, ": unknown operation type ",
                             int(step.op_type()));
    }
  }
  return okStatus();
}

Status checkPrograms(const schema::Artifact &artifact,
                     const std::vector<BufferInfo> &infos) {
  std::set<std::string> seen;
  if (artifact.programs())
    for (uint32_t i = 0; i < artifact.programs()->size(); ++i) {
      const schema::Program &program = *artifact.programs()->Get(i);
      std::string name = program.name() ? program.name()->str() : "";
      if (!programKindFromName(name))
        return invalidArgument("program ", i, " is named '", name,
                               "' (known programs: step, update, eval)");
      if (!seen.insert(name).second)
        return invalidArgument("has two programs named '", name, "'");
      KILN_RETURN_IF_ERROR(checkSchedule(artifact, infos, program));
    }
  for (const char *required : {"step", "update"})
    if (!seen.count(required))
      return invalidArgument("has no '", required, "' program");
  return okStatus();
}

} // namespace

std::optional<ProgramKind> programKindFromName(std::string_view name) {
  if (name == "step")
    return ProgramKind::kStep;
  if (name == "update")
    return ProgramKind::kUpdate;
  if (name == "eval")
    return ProgramKind::kEval;
  return std::nullopt;
}

Status verifyArtifactContents(const schema::Artifact &artifact,
                              std::vector<BufferInfo> &infos) {
  std::string target = artifact.target() ? artifact.target()->str() : "";
  if (target != "cpu" && target != "cuda")
    return failedPrecondition("target '", target,
                              "' is not supported by this kiln-run (only 'cpu' "
                              "and 'cuda')");
  if (target == "cuda")
    KILN_RETURN_IF_ERROR(checkCudaFields(artifact));
  const schema::TrainConfig *train = artifact.train();
  if (!train)
    return invalidArgument("has no train config");
  if (train->batch() < 1 || train->seq() < 1)
    return invalidArgument("train config has batch ", train->batch(),
                           " and seq ", train->seq(), " (both must be >= 1)");
  if (train->vocab_size() < 0)
    return invalidArgument("train config has negative vocab_size ",
                           train->vocab_size());
  if (train->grad_accum() < 1)
    return invalidArgument("train config has grad_accum ", train->grad_accum(),
                           " (must be >= 1)");
  if (!std::isfinite(train->clip()) || train->clip() < 0)
    return invalidArgument("train config has invalid clip ", train->clip());
  if (artifact.mesh()) {
    int64_t ranks = 1;
    for (const schema::MeshAxis *axis : *artifact.mesh()) {
      if (!axis->name() || axis->size() < 1 || axis->size() > 65536)
        return invalidArgument("mesh axis '",
                               axis->name() ? axis->name()->str() : "",
                               "' has size ", axis->size(),
                               " (must be named, 1 to 65536 ranks)");
      ranks *= axis->size();
    }
    if (ranks > 65536)
      return invalidArgument("mesh of ", ranks, " ranks (at most 65536)");
  }
  KILN_RETURN_IF_ERROR(checkBuffers(artifact, infos));
  KILN_RETURN_IF_ERROR(checkKernels(artifact));
  KILN_RETURN_IF_ERROR(checkPrograms(artifact, infos));
  KILN_RETURN_IF_ERROR(checkMemoryPlan(artifact, infos));
  return okStatus();
}

} // namespace kiln::rt
