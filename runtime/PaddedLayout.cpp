//===- PaddedLayout.cpp - A padded buffer's logical region ----------------===//
//
// Both copies walk the logical tensor row by row (its innermost dimension is
// contiguous in both layouts) and keep a multi-index over the outer
// dimensions to find the row's offset in the padded buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/PaddedLayout.h"

#include <algorithm>
#include <cassert>

namespace kiln::rt {

int64_t shapeElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {

// Calls row(logicalOffset, paddedOffset, length) for every innermost row of
// the logical region, in row-major order.
template <typename RowFn>
void forEachLogicalRow(const std::vector<int64_t> &logicalShape,
                       const std::vector<int64_t> &paddedShape, RowFn row) {
  assert(logicalShape.size() == paddedShape.size());
  const size_t rank = logicalShape.size();
  if (rank == 0) {
    row(0, 0, 1);
    return;
  }
  if (shapeElements(logicalShape) == 0)
    return;
  // Strides of the padded layout.
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d)
    stride[d - 1] = stride[d] * paddedShape[d];
  const int64_t length = logicalShape.back();
  std::vector<int64_t> index(rank, 0); // over the outer rank - 1 dims
  int64_t logicalOffset = 0;
  while (true) {
    int64_t paddedOffset = 0;
    for (size_t d = 0; d + 1 < rank; ++d)
      paddedOffset += index[d] * stride[d];
    row(logicalOffset, paddedOffset, length);
    logicalOffset += length;
    // Next outer index (odometer over dims rank-2 .. 0).
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++index[d] < logicalShape[d])
        break;
      index[d] = 0;
      if (d == 0)
        return;
    }
    if (rank == 1)
      return;
  }
}

} // namespace

void copyLogicalRegion(const float *padded,
                       const std::vector<int64_t> &paddedShape,
                       const std::vector<int64_t> &logicalShape,
                       float *logical) {
  forEachLogicalRow(logicalShape, paddedShape,
                    [&](int64_t l, int64_t p, int64_t n) {
                      std::copy(padded + p, padded + p + n, logical + l);
                    });
}

void scatterLogicalRegion(const float *logical,
                          const std::vector<int64_t> &logicalShape,
                          const std::vector<int64_t> &paddedShape,
                          float *padded) {
  std::fill(padded, padded + shapeElements(paddedShape), 0.0f);
  forEachLogicalRow(logicalShape, paddedShape,
                    [&](int64_t l, int64_t p, int64_t n) {
                      std::copy(logical + l, logical + l + n, padded + p);
                    });
}

int64_t paddedOffset(int64_t logicalFlat,
                     const std::vector<int64_t> &logicalShape,
                     const std::vector<int64_t> &paddedShape) {
  assert(logicalShape.size() == paddedShape.size());
  int64_t offset = 0, stride = 1;
  for (size_t d = logicalShape.size(); d-- > 0;) {
    int64_t index = logicalShape[d] > 0 ? logicalFlat % logicalShape[d] : 0;
    logicalFlat = logicalShape[d] > 0 ? logicalFlat / logicalShape[d] : 0;
    offset += index * stride;
    stride *= paddedShape[d];
  }
  return offset;
}

bool paddingIsZero(const float *padded, const std::vector<int64_t> &paddedShape,
                   const std::vector<int64_t> &logicalShape) {
  assert(logicalShape.size() == paddedShape.size());
  const size_t rank = paddedShape.size();
  if (rank == 0)
    return true;
  const int64_t rowLength = paddedShape.back();
  const int64_t rows = shapeElements(paddedShape) / std::max<int64_t>(rowLength, 1);
  if (rowLength == 0)
    return true;
  // Walk every padded row; its outer multi-index says whether the whole row
  // is padding or only its tail past logicalShape.back().
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    bool outside = false;
    for (size_t d = 0; d + 1 < rank; ++d)
      outside = outside || index[d] >= logicalShape[d];
    const float *row = padded + r * rowLength;
    for (int64_t c = outside ? 0 : logicalShape.back(); c < rowLength; ++c)
      if (row[c] != 0.0f)
        return false;
    for (size_t d = rank - 1; d > 0; --d) {
      if (++index[d - 1] < paddedShape[d - 1])
        break;
      index[d - 1] = 0;
    }
  }
  return true;
}

} // namespace kiln::rt
