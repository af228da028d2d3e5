//===- KilnDialect.cpp - The kiln dialect ---------------------------------===//
//
// Registers the kiln ops and attributes, materializes folded constants as
// `kiln.constant`, and implements `#kiln.init<...>`'s text form.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/bit.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::kiln;

#include "ir/KilnDialect.cpp.inc"

namespace mlir::kiln::detail {
/// Uniquing storage of InitializerAttr: (kind, std), keyed on the bit
/// pattern of `std` so that hashing and equality agree.
struct InitializerAttrStorage : public AttributeStorage {
  using KeyTy = ::std::tuple<StringRef, double>;

  InitializerAttrStorage(StringRef kind, double std) : kind(kind), std(std) {}

  bool operator==(const KeyTy &key) const {
    return kind == ::std::get<0>(key) &&
           llvm::bit_cast<uint64_t>(std) ==
               llvm::bit_cast<uint64_t>(::std::get<1>(key));
  }
  static llvm::hash_code hashKey(const KeyTy &key) {
    return llvm::hash_combine(::std::get<0>(key),
                              llvm::bit_cast<uint64_t>(::std::get<1>(key)));
  }
  static InitializerAttrStorage *
  construct(AttributeStorageAllocator &allocator, KeyTy &&key) {
    return new (allocator.allocate<InitializerAttrStorage>())
        InitializerAttrStorage(allocator.copyInto(::std::get<0>(key)),
                               ::std::get<1>(key));
  }

  StringRef kind;
  double std;
};
} // namespace mlir::kiln::detail

#include "ir/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.cpp.inc"

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == kTrainAttrName &&
      !isa<TrainConfigAttr>(attr.getValue()))
    return op->emitError() << "'" << kTrainAttrName
                           << "' must be a #kiln.train<...>, got "
                           << attr.getValue();
  return success();
}

// A kiln.role on an argument or result must be a #kiln.role.
static LogicalResult verifyRole(Operation *op, NamedAttribute attr,
                                StringRef where, unsigned index) {
  if (attr.getName() == kRoleAttrName && !isa<RoleAttr>(attr.getValue()))
    return op->emitError() << where << " " << index << "'s '" << kRoleAttrName
                           << "' must be a #kiln.role<...>, got "
                           << attr.getValue();
  return success();
}

LogicalResult KilnDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  return verifyRole(op, attr, "argument", argIndex);
}

LogicalResult KilnDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  return verifyRole(op, attr, "result", resultIndex);
}

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/KilnAttrs.cpp.inc"
      >();
  // The sharding rules, one table in ir/ShardingRules.cpp.
  registerShardingRules(getContext());
}

// Folders return DenseElementsAttr; the canonicalizer turns them back into
// ops through this hook.
Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto dense = llvm::dyn_cast<DenseElementsAttr>(value);
  if (!dense || dense.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, dense);
}

std::string mlir::kiln::formatShortestFloat(const llvm::APFloat &value) {
  // Finite values: the fewest significant digits that round-trip in the
  // value's own precision (f32 attributes print as "0.9", not 0.899999976).
  if (!value.isFinite()) {
    SmallString<16> text;
    value.toString(text);
    return std::string(text);
  }
  bool isSingle = &value.getSemantics() == &llvm::APFloat::IEEEsingle();
  double d = value.convertToDouble();
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    snprintf(buf, sizeof(buf), "%.*g", precision, d);
    double back = strtod(buf, nullptr);
    if (isSingle ? static_cast<float>(back) == static_cast<float>(d)
                 : back == d)
      break;
  }
  std::string text(buf);
  // Keep a '.' or an exponent so the text lexes as a float, not an integer.
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return text;
}

//===----------------------------------------------------------------------===//
// InitializerAttr: #kiln.init<normal, std = 0.02>, #kiln.init<zeros>
//===----------------------------------------------------------------------===//

// Accessors are not generated when the storage is hand-written.
StringRef InitializerAttr::getKind() const { return getImpl()->kind; }
double InitializerAttr::getStd() const { return getImpl()->std; }

static bool isKnownInitKind(StringRef kind) {
  return kind == "normal" || kind == "zeros" || kind == "ones";
}

LogicalResult
InitializerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        StringRef kind, double std) {
  if (!isKnownInitKind(kind))
    return emitError() << "unknown initializer kind '" << kind
                       << "' (expected normal, zeros or ones)";
  if (std < 0.0)
    return emitError() << "initializer std must be non-negative, got "
                       << formatShortestFloat(llvm::APFloat(std));
  if (!std::isfinite(std))
    return emitError() << "initializer std must be finite, got "
                       << formatShortestFloat(llvm::APFloat(std));
  return success();
}

Attribute InitializerAttr::parse(AsmParser &parser, Type) {
  std::string kind;
  double std = 0.0;
  if (parser.parseLess() || parser.parseKeywordOrString(&kind))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("std") || parser.parseEqual() ||
        parser.parseFloat(std))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<InitializerAttr>(parser.getContext(), kind, std);
}

void InitializerAttr::print(AsmPrinter &printer) const {
  printer << "<" << getKind();
  // `std` only means something for random initializers; keep `zeros` short.
  if (getStd() != 0.0) {
    // MLIR float literals need a '.' even with an exponent: "1e+06" would
    // not parse back, "1.0e+06" does.
    std::string text = formatShortestFloat(llvm::APFloat(getStd()));
    size_t exponent = text.find('e');
    if (text.find('.') == std::string::npos && exponent != std::string::npos)
      text.insert(exponent, ".0");
    printer << ", std = " << text;
  }
  printer << ">";
}
