//===- BlockLayout.cpp - A tensor-parallel block of a whole tensor --------===//

#include "runtime/BlockLayout.h"

#include <algorithm>

namespace kiln::rt {

namespace {

// The whole tensor as [outer, shape[dim], inner]: a block is, for each of
// the `outer` rows, one run of `chunk` = shape[dim] / ranks * inner
// elements.
struct BlockGeometry {
  size_t outer = 1, row = 1, chunk = 1;

  BlockGeometry(const std::vector<int64_t> &shape, int dim, size_t ranks) {
    size_t inner = 1;
    for (int d = 0; d < (int)shape.size(); ++d) {
      if (d < dim)
        outer *= static_cast<size_t>(shape[d]);
      else if (d > dim)
        inner *= static_cast<size_t>(shape[d]);
    }
    row = static_cast<size_t>(shape[dim]) * inner;
    chunk = row / ranks;
  }
};

} // namespace

void copyBlock(const float *whole, const std::vector<int64_t> &shape, int dim,
               size_t ranks, size_t rank, float *out) {
  BlockGeometry g(shape, dim, ranks);
  for (size_t o = 0; o < g.outer; ++o)
    std::copy_n(whole + o * g.row + rank * g.chunk, g.chunk, out + o * g.chunk);
}

void placeBlocks(const float *blocks, const std::vector<int64_t> &shape,
                 int dim, size_t ranks, float *whole) {
  BlockGeometry g(shape, dim, ranks);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t o = 0; o < g.outer; ++o)
      std::copy_n(blocks + (r * g.outer + o) * g.chunk, g.chunk,
                  whole + o * g.row + r * g.chunk);
}

} // namespace kiln::rt
