//===- AttentionRegionEmitter.h - C statements of attention regions ------===//
//
// The one place that turns the score and mask regions of kiln.attention /
// kiln.attention_grad into C statements, for the CPU and the CUDA attention
// kernels alike: plain C over `float` and `int64_t` using expf/logf/sqrtf/...
// only, so the same text is valid C++ and CUDA device code.
//
// Forward: the statements compute the region's yielded value. Backward (score
// region): the statements recompute the forward values, then run reverse
// mode over the region's scalar ops from a seed (dL/dscore) and produce
// dL/ds and, for every tensor.extract of a floating-point capture, one
// accumulation statement of dL/dcapture[index] written by the caller's hook
// (so the kernel decides where and in which order gradients are summed).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ATTENTIONREGIONEMITTER_H
#define KILN_CODEGEN_ATTENTIONREGIONEMITTER_H

#include "mlir/IR/Block.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Region.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>
#include <string>

namespace kiln {

// What the statements read: C expressions in scope where they are placed.
struct AttentionRegionInputs {
  std::string s;          // the raw score (float); unused by the mask
  std::string b, h, i, j; // the indices (int64_t)
  // The C expression of element `flatIndex` (an int64_t expression, already
  // clamped into range) of capture `capture`, converted to float for float
  // captures and to int64_t for integer ones.
  std::function<std::string(unsigned capture, const std::string &flatIndex)>
      readCapture;
};

// What the flat index of a capture read depends on among the values that
// vary within one (b, h) slab: the query index i and the key index j (the
// score s varies with both, so an index computed from it uses both).
enum CaptureIndexUses : unsigned {
  kIndexUsesI = 1,
  kIndexUsesJ = 2,
};

// Writes the statement accumulating `adjoint` (a float expression) into the
// gradient of element `flatIndex` of floating capture `capture`; `uses`
// (CaptureIndexUses bits) says which of i and j the element depends on.
using CaptureGradHook = std::function<std::string(
    unsigned capture, const std::string &flatIndex,
    const std::string &adjoint, unsigned uses)>;

class KernelSourceWriter;

// The inputs of the CPU and CUDA attention kernels: the score and indices are
// variables named s, b, h, i, j (float / int64_t); capture c is read from its
// buffer (bf16 widened) as float, or as int64_t for integer captures.
AttentionRegionInputs attentionLoopInputs(KernelSourceWriter &w,
                                          mlir::OperandRange captures);

// Dropout of an attention-like op in its kernel. With dropout p > 0,
// emitAttentionDropout writes the generator at file scope
// (codegen/PhiloxRandom.inc for `target`, "cpu" or "cuda") and declares
// `dropSeed` and `dropOffset` from the RNG-state capture; `factor` then
// gives the float expression z(bh, i, j) = keep ? 1/(1-p) : 0 for variables
// of those names in scope. Without dropout nothing is emitted and `factor`
// is empty (callers multiply by nothing).
struct AttentionDropout {
  bool enabled = false;
  std::string threshold, invKeep; // C literals: floor(p 2^32), 1 / (1 - p)
  std::string factor(llvm::StringRef bh, llvm::StringRef i,
                     llvm::StringRef j) const;
};
AttentionDropout emitAttentionDropout(KernelSourceWriter &w, double p,
                                      mlir::Value rngState,
                                      const std::string &target);

// A mask region that keeps (i, j) when every one of `tests` holds (their
// arith.andi), each test an i1 value of the region that compares two sides
// whose difference is c_i i + c_j j + r, with c_i, c_j and r free of i and j
// (they may read b, h and captures). Over a rectangle of (i, j) such a
// difference takes its least and greatest values at the corners, so the
// four corners decide a whole tile: a test with <, <=, >, >= or == that
// holds at all four holds on the tile, and one with <, <=, >, >= or != that
// fails at all four fails on the tile. Unsigned comparisons count as signed
// ones when both sides are sums and products of indices and non-negative
// constants.
struct LinearMaskTest {
  mlir::Value test;
  bool holdsIfAtCorners;  // holds at the 4 corners => holds on the tile
  bool failsIfAtCorners;  // fails at the 4 corners => fails on the tile
};
// The tests of `mask`, or std::nullopt when it is not such a conjunction.
std::optional<llvm::SmallVector<LinearMaskTest>>
linearMaskTests(mlir::Region &mask);

class AttentionRegionEmitter {
public:
  // `region` is a score or mask region of an attention op; `prefix` makes
  // the emitted variable names unique where several regions share a scope.
  AttentionRegionEmitter(mlir::Region &region, std::string prefix);

  // Statements declaring and setting `result` to the region's yielded value
  // (`float` for a score, `int` 0/1 for a mask). Emits an error on the
  // offending op for an op or type it cannot translate.
  mlir::FailureOr<llvm::SmallVector<std::string>>
  emitForward(const AttentionRegionInputs &inputs, llvm::StringRef result);

  // As emitForward, setting `result` to `value`, a value of the region,
  // from the statements of the ops it depends on only.
  mlir::FailureOr<llvm::SmallVector<std::string>>
  emitValue(const AttentionRegionInputs &inputs, mlir::Value value,
            llvm::StringRef result);

  // As emitForward, with the statements of the values that depend on none
  // of s, i and j (slope[h], exp(-8 (h + 1) / H): the same for every pair
  // of one (b, h)) apart in `invariant`, to be placed once ahead of the
  // pairs, in a scope enclosing the returned per-pair statements. Integer
  // divisions stay per pair (a divisor that only kept pairs reach may be 0).
  mlir::FailureOr<llvm::SmallVector<std::string>>
  emitForwardHoisted(const AttentionRegionInputs &inputs,
                     llvm::StringRef result,
                     llvm::SmallVector<std::string> &invariant);

  // The score's backward in two parts: `forward` (as emitForward, setting
  // `result`), and `reverse`, to be placed after it once the caller has
  // computed `seed` = dL/dscore (a float expression), which declares
  // `float <ds> = dL/ds` and calls `captureGrad` for every read of a
  // floating capture. Emits an error on an op it cannot differentiate.
  struct Backward {
    llvm::SmallVector<std::string> forward, reverse;
  };
  // With `invariant`, the forward's statements free of s, i and j go there
  // (as emitForwardHoisted).
  mlir::FailureOr<Backward>
  emitBackward(const AttentionRegionInputs &inputs, llvm::StringRef result,
               llvm::StringRef seed, llvm::StringRef ds,
               const CaptureGradHook &captureGrad,
               llvm::SmallVector<std::string> *invariant = nullptr);

private:
  mlir::LogicalResult emitOp(mlir::Operation &op,
                             const AttentionRegionInputs &inputs,
                             llvm::SmallVector<std::string> &out);
  std::string name(mlir::Value v);
  void markActive();
  // With `invariant`, the statements of ops free of s, i and j go there.
  mlir::FailureOr<llvm::SmallVector<std::string>>
  emitValueSplit(const AttentionRegionInputs &inputs, mlir::Value value,
                 llvm::StringRef result,
                 llvm::SmallVector<std::string> *invariant);
  // CaptureIndexUses bits of `v` (memoized in `uses`).
  unsigned indexUses(mlir::Value v);

  mlir::Block &block;
  std::string prefix;
  llvm::DenseMap<mlir::Value, std::string> names;
  // The flat index variable of each tensor.extract.
  llvm::DenseMap<mlir::Operation *, std::string> extractIndex;
  // Float values that depend on s or on a floating capture.
  llvm::DenseSet<mlir::Value> active;
  llvm::DenseMap<mlir::Value, unsigned> uses;
  unsigned counter = 0;
};

} // namespace kiln

#endif // KILN_CODEGEN_ATTENTIONREGIONEMITTER_H
