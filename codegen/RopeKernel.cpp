//===- RopeKernel.cpp - kiln.rope's kernel on both targets ----------------===//

#include "codegen/RopeKernel.h"

#include "codegen/CpuKernelEmitter.h"
#include "codegen/CudaBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/Sequence.h"

#include "mlir/IR/TypeUtilities.h"

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// `{f0, f1, ...}`: the frequency table as float literals.
std::string frequencyTable(mlir::kiln::RopeOp rope) {
  std::string list;
  for (float f : rope.getInvFreq())
    list += (list.empty() ? "" : ", ") + ScalarExprEmitter::floatLiteral(f);
  return "{" + list + "}";
}

// The offset, in a tensor whose strides are `strides`, of the element at
// rotated-space coordinates c0, c1, ... (all but the last dim; the caller
// adds the feature index f): dim k of the rotated space is dim `dimOf[k]`
// of that tensor.
std::string rowOffset(llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> dimOf) {
  std::string sum;
  for (size_t k = 0; k + 1 < dimOf.size(); ++k)
    sum += "c" + str(k) + " * " + str(strides[dimOf[k]]) + " + ";
  return sum + "f";
}

// Where one pair of `rope` is read and written: statements defining its
// feature index `f` (of D/2) and the offsets of its first element in the
// input and the result, from `p` (a pair index over the rotated space's
// n / 2 pairs: pair p is element i = (p / (D/2)) * D + p % (D/2), its
// partner i + D/2). `index` is the C type of the index arithmetic ("int"
// where every offset fits, else "int64_t").
struct PairPlace {
  std::string in, out, position; // C expressions
};

PairPlace writePairPlace(mlir::kiln::RopeOp rope, KernelSourceWriter &w, llvm::StringRef index) {
  llvm::SmallVector<int64_t> shape = rope.getRotatedShape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = shape.back(), t = shape[rank - 2], half = d / 2;
  mlir::Value x = rope.getInput(), y = rope.getResult();
  const std::string ix = index.str();
  w.line("const " + ix + " f = p % " + str(half) + ";");
  w.line("const " + ix + " i = p / " + str(half) + " * " + str(d) + " + f;");
  std::optional<llvm::ArrayRef<int64_t>> inPerm = rope.getInputPermutation(),
                                         outPerm = rope.getResultPermutation();
  if (!inPerm && !outPerm)
    return {"i", "i", "(i / " + str(d) + ") % " + str(t)};
  // Coordinates in the rotated space; the input and the result are read and
  // written where the permutations put them.
  llvm::SmallVector<int64_t> rotated = rowMajorStrides(shape);
  for (int64_t k = 0; k + 1 < rank; ++k)
    w.line("const " + ix + " c" + str(k) + " = (i / " + str(rotated[k]) + ") % " +
           str(shape[k]) + ";");
  llvm::SmallVector<int64_t> identity = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  // Rotated dim k is input dim inPerm[k]; result dim j is rotated dim
  // outPerm[j], so rotated dim k is result dim j where outPerm[j] = k.
  llvm::SmallVector<int64_t> resultDimOf(rank);
  for (int64_t j = 0; j < rank; ++j)
    resultDimOf[outPerm ? (*outPerm)[j] : j] = j;
  w.line("const " + ix + " in = " +
         rowOffset(rowMajorStrides(shapeOf(x)), inPerm ? *inPerm : llvm::ArrayRef(identity)) +
         ";");
  w.line("const " + ix + " out = " + rowOffset(rowMajorStrides(shapeOf(y)), resultDimOf) +
         ";");
  return {"in", "out", "c" + str(rank - 2)};
}

// `c` and `s`, the cosine and sine of `angle` (a C expression; the sine
// negated for the inverse rotation): on CUDA one sincosf (one range
// reduction for both). A pair (x0, x1) becomes (x0 c - x1 s, x1 c + x0 s).
void writeAngle(mlir::kiln::RopeOp rope, KernelSourceWriter &w, bool cuda,
                llvm::StringRef angle, llvm::StringRef c = "c", llvm::StringRef s = "s") {
  const std::string minus = rope.getInverse() ? "-" : "";
  w.line("const float a = " + angle.str() + ";");
  if (!cuda) {
    w.line("const float " + c.str() + " = cosf(a), " + s.str() + " = " + minus + "sinf(a);");
    return;
  }
  w.line("float " + c.str() + ", " + s.str() + ";");
  w.line("sincosf(a, &" + s.str() + ", &" + c.str() + ");");
  if (!minus.empty())
    w.line(s.str() + " = -" + s.str() + ";");
}

// The statements for pair `p` of `rope`, reading the table `freq`.
void writePair(mlir::kiln::RopeOp rope, KernelSourceWriter &w, bool cuda, llvm::StringRef freq,
               llvm::StringRef index) {
  PairPlace at = writePairPlace(rope, w, index);
  const std::string partner = " + " + str(rope.getRotatedShape().back() / 2);
  mlir::Value x = rope.getInput(), y = rope.getResult();
  writeAngle(rope, w, cuda, "(float)(" + at.position + ") * " + freq.str() + "[f]");
  w.line("const float x0 = " + w.load(x, at.in) + ", x1 = " + w.load(x, at.in + partner) + ";");
  w.line(w.store(y, at.out, "x0 * c - x1 * s"));
  w.line(w.store(y, at.out + partner, "x1 * c + x0 * s"));
}

// Pairs a CUDA thread rotates at once: kRopeRun consecutive features f and
// their partners, loaded and stored as kiln_lanes8 (16-byte vector
// accesses instead of 2-byte ones, and the offsets computed once for 8
// pairs).
constexpr int64_t kRopeRun = 8;

// Whether runs apply: D/2 a multiple of kRopeRun (a run stays in one row,
// and every run starts a multiple of 8 elements into its row, rows being
// multiples of D apart: 16-byte aligned when the buffer is) and both
// element types 2 or 4 bytes.
bool ropeRuns(mlir::kiln::RopeOp rope) {
  auto laneable = [](mlir::Value v) {
    unsigned bits = mlir::getElementTypeOrSelf(v).getIntOrFloatBitWidth();
    return bits == 16 || bits == 32;
  };
  return (rope.getRotatedShape().back() / 2) % kRopeRun == 0 && laneable(rope.getInput()) &&
         laneable(rope.getResult());
}

// Rows a CUDA thread rotates with one set of angles: the angle of a pair
// depends on its position t and feature f only, so the rows of one t (heads
// and batch rows: the dims before T) share it. One sincosf then serves
// ropeRowsPerThread runs instead of one: sincosf's range reduction and polynomials
// are some 40 instructions a pair, which made the kernel as bound by issue
// as by memory. The thread loads its rows' runs before it rotates any (4 x
// 32 bytes in flight, not 32).
int64_t ropeRowsPerThread(mlir::kiln::RopeOp rope) {
  llvm::SmallVector<int64_t> shape = rope.getRotatedShape();
  const int64_t outer = numElements(shape) / (shape.back() * shape[shape.size() - 2]);
  for (int64_t rows : {4, 2})
    if (outer % rows == 0)
      return rows;
  return 1;
}

// The statements for item `r` of `rope`: run `r % R` (pairs 8 (r % R) ..
// 8 (r % R) + 7 of a row, R runs a row) at position t = r / R % T, in rows
// (r / R / T) * G .. + G - 1 of the dims before T, G = `rows`
// (ropeRowsPerThread).
void writeRun(mlir::kiln::RopeOp rope, KernelSourceWriter &w, llvm::StringRef freq,
              llvm::StringRef index, int64_t rows) {
  llvm::SmallVector<int64_t> shape = rope.getRotatedShape();
  const int64_t half = shape.back() / 2, t = shape[shape.size() - 2];
  const int64_t runsPerRow = half / kRopeRun;
  const std::string ix = index.str(), partner = " + " + str(half);
  mlir::Value x = rope.getInput(), y = rope.getResult();
  const std::string xt = w.cType(x), yt = w.cType(y);
  const std::string xp = w.ptr(x), yp = w.ptr(y);
  w.line("const " + ix + " run = r % " + str(runsPerRow) + ", pos = r / " + str(runsPerRow) +
         " % " + str(t) + ", row0 = r / " + str(runsPerRow * t) + " * " + str(rows) + ";");
  w.line("kiln_lanes8<" + xt + "> xa[" + str(rows) + "], xb[" + str(rows) + "];");
  w.line(ix + " at[" + str(rows) + "];");
  w.open("KILN_UNROLL for (int g = 0; g < " + str(rows) + "; ++g)");
  w.line("const " + ix + " p = ((row0 + g) * " + str(t) + " + pos) * " + str(half) +
         " + run * " + str(kRopeRun) + ";");
  PairPlace place = writePairPlace(rope, w, index);
  w.line("xa[g] = kiln_load_lanes8(" + xp + " + " + place.in + ");");
  w.line("xb[g] = kiln_load_lanes8(" + xp + " + " + place.in + partner + ");");
  w.line("at[g] = " + place.out + ";");
  w.close();
  w.line("float c[" + str(kRopeRun) + "], s[" + str(kRopeRun) + "];");
  w.open("KILN_UNROLL for (int j = 0; j < " + str(kRopeRun) + "; ++j)");
  writeAngle(rope, w, /*cuda=*/true,
             "(float)pos * " + freq.str() + "[run * " + str(kRopeRun) + " + j]", "cj", "sj");
  w.line("c[j] = cj;");
  w.line("s[j] = sj;");
  w.close();
  w.open("KILN_UNROLL for (int g = 0; g < " + str(rows) + "; ++g)");
  w.line("kiln_lanes8<" + yt + "> ya, yb;");
  w.open("KILN_UNROLL for (int j = 0; j < " + str(kRopeRun) + "; ++j)");
  w.line("const float x0 = " + loadElement(mlir::getElementTypeOrSelf(x), "xa[g].v[j]") +
         ", x1 = " + loadElement(mlir::getElementTypeOrSelf(x), "xb[g].v[j]") + ";");
  w.line(storeElement(mlir::getElementTypeOrSelf(y), "ya.v[j]", "x0 * c[j] - x1 * s[j]"));
  w.line(storeElement(mlir::getElementTypeOrSelf(y), "yb.v[j]", "x1 * c[j] + x0 * s[j]"));
  w.close();
  w.line("kiln_store_lanes8(" + yp + " + at[g], ya);");
  w.line("kiln_store_lanes8(" + yp + " + at[g]" + partner + ", yb);");
  w.close();
}

std::string describe(mlir::kiln::RopeOp rope) {
  std::string text = std::string("// rope") + (rope.getInverse() ? " (inverse)" : "") +
                     " over " + shapeString(rope.getRotatedShape()) + ", pairs (i, i + D/2)";
  if (std::optional<llvm::ArrayRef<int64_t>> perm = rope.getInputPermutation())
    text += ", input read transposed by " + shapeString(*perm);
  if (std::optional<llvm::ArrayRef<int64_t>> perm = rope.getResultPermutation())
    text += ", result written transposed by " + shapeString(*perm);
  return text;
}

} // namespace

mlir::LogicalResult emitRopeCpu(mlir::Operation *op, KernelSourceWriter &w) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t pairs = numElements(rope.getRotatedShape()) / 2;
  w.line(describe(rope));
  w.line("static const float freq[" + str(rope.getInvFreq().size()) + "] = " +
         frequencyTable(rope) + ";");
  w.parallelFor(2 * pairs);
  w.open("for (int64_t p = 0; p < " + str(pairs) + "; ++p)");
  writePair(rope, w, /*cuda=*/false, "freq", "int64_t");
  w.close();
  return mlir::success();
}

mlir::LogicalResult emitRopeCuda(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t pairs = numElements(rope.getRotatedShape()) / 2;
  std::string freq = std::string(kEntryPlaceholder) + "_freq";
  // In global memory, not __constant__: the lanes of a warp read different
  // entries (consecutive pairs), which the constant cache would serialize.
  w.global("__device__ const float " + freq + "[" + str(rope.getInvFreq().size()) + "] = " +
           frequencyTable(rope) + ";");
  w.line(describe(rope));
  // 32-bit offsets where every buffer allows (openGridStrideLoop's bound).
  const bool index32 = 2 * pairs < (int64_t(1) << 30) && indexFitsInt32(KernelGroup::forOp(op));
  const std::string index = index32 ? "int" : "int64_t";
  const bool runs = ropeRuns(rope);
  const int64_t rows = runs ? ropeRowsPerThread(rope) : 1;
  const int64_t items = runs ? pairs / kRopeRun / rows : pairs;
  launch = {cudaGridFor(items, kCudaBlock), kCudaBlock, 0};
  if (runs) {
    // Runs of 8 pairs where both buffers are 16-byte aligned (a view may
    // start anywhere), one pair per step otherwise.
    w.line("// runs of " + str(kRopeRun) + " pairs per thread where both buffers are 16-byte "
           "aligned, in " + str(rows) + (rows == 1 ? " row" : " rows") +
           " of one position");
    w.open("if (((unsigned long long)" + w.ptr(rope.getInput()) +
           " & 15) == 0 && ((unsigned long long)" + w.ptr(rope.getResult()) + " & 15) == 0)");
    openGridStrideLoop(w, items, "r", index32);
    writeRun(rope, w, freq, index, rows);
    w.close();
    w.close();
    w.open("else");
  }
  openGridStrideLoop(w, pairs, "p", index32);
  writePair(rope, w, /*cuda=*/true, freq, index);
  w.close();
  if (runs)
    w.close();
  return mlir::success();
}

} // namespace kiln
