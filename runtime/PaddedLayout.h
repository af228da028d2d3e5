//===- PaddedLayout.h - A padded buffer's logical region ------------------===//
//
// The compiler's pad-dims pass may give a parameter (and its gradient and
// optimizer state) a larger shape than the user wrote, e.g. wte [200, 128]
// stored as [256, 128]. The user's tensor is the leading corner of the
// padded one in every dimension (row-major); the rest is padding that must
// stay zero. These copies move a tensor between its compact logical layout
// (what checkpoints and initialisers see) and the padded buffer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PADDEDLAYOUT_H
#define KILN_RUNTIME_PADDEDLAYOUT_H

#include <cstdint>
#include <vector>

namespace kiln::rt {

// Element count of `shape` (1 for a scalar).
int64_t shapeElements(const std::vector<int64_t> &shape);

// Copies the logical corner of `padded` (shape `paddedShape`) into the
// compact `logical` (shape `logicalShape`). Both shapes have the same rank
// and logicalShape[d] <= paddedShape[d] (the artifact verifier checks it).
void copyLogicalRegion(const float *padded,
                       const std::vector<int64_t> &paddedShape,
                       const std::vector<int64_t> &logicalShape,
                       float *logical);

// Writes the compact `logical` into the corner of `padded` and zeroes every
// padded element.
void scatterLogicalRegion(const float *logical,
                          const std::vector<int64_t> &logicalShape,
                          const std::vector<int64_t> &paddedShape,
                          float *padded);

// The offset in the padded layout of the element at row-major offset
// `logicalFlat` of the logical tensor.
int64_t paddedOffset(int64_t logicalFlat,
                     const std::vector<int64_t> &logicalShape,
                     const std::vector<int64_t> &paddedShape);

// Whether every element of `padded` outside the logical corner is exactly 0
// (pad-dims' invariant: no gradient reaches the padding, so training never
// moves it).
bool paddingIsZero(const float *padded, const std::vector<int64_t> &paddedShape,
                   const std::vector<int64_t> &logicalShape);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PADDEDLAYOUT_H
