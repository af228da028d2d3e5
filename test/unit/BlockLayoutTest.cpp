//===- BlockLayoutTest.cpp - Tensor-parallel blocks of whole tensors ------===//
//
// A tensor-parallel parameter is block r of one dimension of the whole
// tensor on rank r. copyBlock must pick exactly the elements whose index
// along that dimension falls in the rank's block (every other index
// whole), and placeBlocks must put every rank's block back where it came
// from -- for the first, a middle and the last dimension (only the first
// gives contiguous blocks).
//
//===----------------------------------------------------------------------===//

#include "runtime/BlockLayout.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace kiln::rt {
namespace {

TEST(BlockLayoutTest, EachDimensionRoundTrips) {
  const std::vector<int64_t> shape = {4, 6, 2};
  std::vector<float> whole(4 * 6 * 2);
  std::iota(whole.begin(), whole.end(), 0.0f); // element (i, j, k) = (i*6 + j)*2 + k
  for (int dim = 0; dim < 3; ++dim) {
    const size_t ranks = 2, block = whole.size() / ranks;
    std::vector<float> blocks(whole.size());
    for (size_t r = 0; r < ranks; ++r) {
      copyBlock(whole.data(), shape, dim, ranks, r, blocks.data() + r * block);
      // Every element of rank r's block has its index along `dim` in
      // [r * n, (r + 1) * n), n = shape[dim] / ranks, in row-major order.
      const int64_t n = shape[dim] / static_cast<int64_t>(ranks);
      size_t at = r * block;
      for (int64_t i = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j)
          for (int64_t k = 0; k < shape[2]; ++k) {
            const int64_t index[3] = {i, j, k};
            if (index[dim] / n != static_cast<int64_t>(r))
              continue;
            EXPECT_EQ(blocks[at], static_cast<float>((i * 6 + j) * 2 + k))
                << "dim " << dim << " rank " << r << " element (" << i << ", "
                << j << ", " << k << ")";
            ++at;
          }
      EXPECT_EQ(at, (r + 1) * block);
    }
    std::vector<float> back(whole.size(), -1.0f);
    placeBlocks(blocks.data(), shape, dim, ranks, back.data());
    EXPECT_EQ(back, whole) << "dim " << dim;
  }
}

TEST(BlockLayoutTest, ThreeRanksOfAMatrixColumn) {
  // [2, 6] split into 3 blocks of 2 columns: rank 1 holds columns 2 and 3.
  const std::vector<int64_t> shape = {2, 6};
  const std::vector<float> whole = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
  std::vector<float> block(4);
  copyBlock(whole.data(), shape, 1, 3, 1, block.data());
  EXPECT_EQ(block, (std::vector<float>{2, 3, 12, 13}));
}

} // namespace
} // namespace kiln::rt
