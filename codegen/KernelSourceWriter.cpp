//===- KernelSourceWriter.cpp - Building the text of one C++ kernel -------===//

#include "codegen/KernelSourceWriter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>

using namespace mlir;

namespace kiln {

namespace {
// 64-bit FNV-1a: stable across runs and platforms (the entry name is part of
// the JIT cache key, so it must not depend on pointer values or seeds).
uint64_t fnv1a(llvm::StringRef text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return os.str();
}
} // namespace

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

ReductionLayout reductionLayout(Value input, ArrayRef<int64_t> dims,
                                StringRef outIndex, StringRef redIndex) {
  ReductionLayout r;
  r.shape = shapeOf(input);
  r.dims = dims;
  SmallVector<int64_t> inStrides = rowMajorStrides(r.shape);
  SmallVector<int64_t> keptShape, reducedShape;
  for (int64_t d = 0; d < static_cast<int64_t>(r.shape.size()); ++d) {
    bool isReduced = llvm::is_contained(dims, d);
    (isReduced ? r.reduced : r.kept).push_back(d);
    (isReduced ? reducedShape : keptShape).push_back(r.shape[d]);
  }
  r.outputs = numElements(keptShape);
  r.reducedCount = numElements(reducedShape);
  SmallVector<int64_t> keptStrides = rowMajorStrides(keptShape);
  SmallVector<int64_t> redStrides = rowMajorStrides(reducedShape);
  for (size_t j = 0; j < r.kept.size(); ++j)
    addTerm(r.base, coordinate(outIndex, keptStrides[j], keptShape[j], j == 0),
            inStrides[r.kept[j]]);
  for (size_t j = 0; j < r.reduced.size(); ++j)
    addTerm(r.offset,
            coordinate(redIndex, redStrides[j], reducedShape[j], j == 0),
            inStrides[r.reduced[j]]);
  if (r.base.empty())
    r.base = "0";
  if (r.offset.empty())
    r.offset = "0";
  return r;
}

int64_t validClasses(Operation *op, int64_t classes) {
  if (auto valid = op->getAttrOfType<IntegerAttr>("valid_classes"))
    return valid.getInt();
  return classes;
}

std::string cElementType(Type t) {
  if (t.isF32())
    return "float";
  // bf16 is stored as its raw bits; kernels compute in float and convert
  // with the prelude's kiln_bf16_to_f32 / kiln_f32_to_bf16.
  if (t.isBF16())
    return "uint16_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(64))
    return "int64_t";
  // i1 (kiln.cmp results kept across kernels, e.g. a where condition reused
  // by select's VJP) is one byte holding 0 or 1: DType Bool in the artifact.
  if (t.isInteger(1))
    return "uint8_t";
  return "";
}

static Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

std::string loadElement(Type elementType, StringRef element) {
  if (elementType.isBF16())
    return "kiln_bf16_to_f32(" + element.str() + ")";
  return element.str();
}

std::string loadElement(Value v, StringRef element) {
  return loadElement(elementTypeOf(v), element);
}

std::string storeElement(Type elementType, StringRef element,
                         StringRef value) {
  if (elementType.isBF16())
    return element.str() + " = kiln_f32_to_bf16(" + value.str() + ");";
  return element.str() + " = " + value.str() + ";";
}

std::string computeType(Type elementType) {
  return elementType.isBF16() ? "float" : cElementType(elementType);
}

std::string roundToBf16(StringRef value) {
  return "kiln_bf16_to_f32(kiln_f32_to_bf16(" + value.str() + "))";
}

// A name or a number, or one parenthesized expression: safe as an operand.
static bool isAtomic(StringRef text) {
  if (llvm::all_of(text, [](char c) { return std::isalnum((unsigned char)c) || c == '_'; }))
    return true;
  if (!text.starts_with("("))
    return false;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
    if (depth == 0)
      return i == text.size() - 1; // the first '(' closes at the end
  }
  return false;
}

std::string coordinate(StringRef index, int64_t stride, int64_t size,
                       bool outermost) {
  if (size == 1)
    return "0";
  // An index expression (the CPU row kernel's `r * 5 + c`) in parentheses:
  // else `r * 5 + c % 5` takes c's remainder alone (a causal_mask or a
  // broadcast read in a row kernel's epilogue saw other elements).
  std::string s = isAtomic(index) ? index.str() : "(" + index.str() + ")";
  if (stride != 1)
    s = "(" + s + " / " + std::to_string(stride) + ")";
  if (!outermost)
    s = "(" + s + " % " + std::to_string(size) + ")";
  return s;
}

void addTerm(std::string &sum, const std::string &term, int64_t factor) {
  if (term == "0" || factor == 0)
    return;
  std::string t = factor == 1 ? term : term + " * " + std::to_string(factor);
  sum = sum.empty() ? t : sum + " + " + t;
}

LogicalResult KernelSourceWriter::declareBuffers() {
  auto declare = [&](Value v, bool isOutput, size_t slot) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return group.ops.front()->emitError()
             << "codegen needs statically shaped tensors, got " << v.getType();
    std::string c = cElementType(type.getElementType());
    if (c.empty())
      return group.ops.front()->emitError()
             << "the " << (target == KernelTarget::Cuda ? "CUDA" : "CPU")
             << " backend does not support element type "
             << type.getElementType();
    std::string name =
        (isOutput ? "out" : "in") +
        std::to_string(isOutput ? slot - group.inputs.size() : slot);
    pointers[v] = name;
    declarations += "  " + std::string(isOutput ? "" : "const ") + c + "* " +
                    name + " = (" + (isOutput ? "" : "const ") + c +
                    "*)buffers[" + std::to_string(slot) + "]; // " +
                    typeString(type) + "\n";
    return success();
  };
  size_t slot = 0;
  for (Value v : group.inputs)
    if (failed(declare(v, /*isOutput=*/false, slot++)))
      return failure();
  for (Value v : group.outputs)
    if (failed(declare(v, /*isOutput=*/true, slot++)))
      return failure();
  return success();
}

std::string KernelSourceWriter::ptr(Value v) const {
  auto it = pointers.find(v);
  assert(it != pointers.end() && "value is not a buffer of this kernel");
  return it->second;
}

std::string KernelSourceWriter::cType(Value v) const {
  return cElementType(cast<RankedTensorType>(v.getType()).getElementType());
}

std::string KernelSourceWriter::load(Value v, StringRef index) const {
  return loadElement(elementTypeOf(v), ptr(v) + "[" + index.str() + "]");
}

std::string KernelSourceWriter::store(Value v, StringRef index,
                                      StringRef value) const {
  return storeElement(elementTypeOf(v), ptr(v) + "[" + index.str() + "]",
                      value);
}

void KernelSourceWriter::line(const llvm::Twine &text) {
  body += std::string(2 * indent, ' ') + text.str() + "\n";
}

void KernelSourceWriter::open(const llvm::Twine &text) {
  std::string head = text.str();
  line(head.empty() ? std::string("{") : head + " {");
  ++indent;
}

void KernelSourceWriter::close() {
  --indent;
  line("}");
}

void KernelSourceWriter::close(const llvm::Twine &suffix) {
  --indent;
  line("}" + suffix);
}

void KernelSourceWriter::global(const llvm::Twine &text) {
  globals += text.str() + "\n";
}

void KernelSourceWriter::parallelFor(int64_t work) {
  if (target == KernelTarget::Cpu && work >= kParallelWork)
    line("#pragma omp parallel for schedule(static)");
}

std::string KernelSourceWriter::scratch(const std::string &name,
                                       const std::string &cType,
                                       const KernelScratch &buffer) {
  size_t slot =
      group.inputs.size() + group.outputs.size() + scratchBuffers.size();
  declarations += "  " + cType + "* " + name + " = (" + cType + "*)buffers[" +
                  std::to_string(slot) + "]; // scratch: " + buffer.name +
                  " [" + std::to_string(buffer.elements) + "]\n";
  scratchBuffers.push_back(buffer);
  return name;
}

CpuKernel KernelSourceWriter::finish(uint32_t blockThreads) const {
  SmallVector<std::string> names, shortNames;
  for (Operation *op : group.ops) {
    std::string name = op->getName().getStringRef().str();
    if (!llvm::is_contained(names, name))
      names.push_back(name);
  }
  for (const std::string &name : names)
    shortNames.push_back(StringRef(name).starts_with("kiln.")
                             ? name.substr(5)
                             : name);
  std::string ops = llvm::join(names, ",");

  std::string header = "// " + ops + "\n";
  for (Value v : group.inputs)
    header += "//   in:  " + typeString(v.getType()) + "\n";
  for (Value v : group.outputs)
    header += "//   out: " + typeString(v.getType()) + "\n";
  std::string signature =
      target == KernelTarget::Cuda
          ? "extern \"C\" __global__ void " +
                (blockThreads > 256 ? "__launch_bounds__(" +
                                    std::to_string(blockThreads) + ") "
                              : std::string()) +
                kEntryPlaceholder.str() +
                "(void* const* __restrict__ buffers) {\n"
          : "extern \"C\" void " + kEntryPlaceholder.str() +
                "(void* const* buffers) {\n";
  std::string text =
      header + globals + signature + declarations + body + "}\n";

  std::string prefix;
  for (size_t i = 0; i < shortNames.size() && i < 3; ++i)
    prefix += (i ? "_" : "") + shortNames[i];
  CpuKernel kernel = nameKernel(std::move(text), prefix, std::move(ops));
  kernel.scratch = scratchBuffers;
  return kernel;
}

CpuKernel nameKernel(std::string text, StringRef prefix, std::string ops) {
  CpuKernel kernel;
  kernel.ops = std::move(ops);
  kernel.entry = "k_" + prefix.str() + "_" +
                 llvm::utohexstr(fnv1a(text), /*LowerCase=*/true);
  size_t pos = text.find(kEntryPlaceholder);
  assert(pos != std::string::npos && "kernel text without entry placeholder");
  for (; pos != std::string::npos; pos = text.find(kEntryPlaceholder, pos)) {
    text.replace(pos, kEntryPlaceholder.size(), kernel.entry);
    pos += kernel.entry.size();
  }
  kernel.source = std::move(text);
  return kernel;
}

} // namespace kiln
