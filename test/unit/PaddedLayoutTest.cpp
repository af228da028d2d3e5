//===- PaddedLayoutTest.cpp - Logical regions of padded buffers -----------===//
//
// pad-dims stores a user's tensor in the leading corner of a larger buffer.
// The copies between the two layouts must put every element where row-major
// indexing of each layout says, zero the padding, and the padding check must
// see a non-zero anywhere outside the corner (whole padded rows and the tail
// of kept rows).
//
//===----------------------------------------------------------------------===//

#include "runtime/PaddedLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace kiln::rt {
namespace {

// Element (i, j, k) of a row-major [a, b, c] tensor.
int64_t at3(const std::vector<int64_t> &shape, int64_t i, int64_t j, int64_t k) {
  return (i * shape[1] + j) * shape[2] + k;
}

TEST(PaddedLayoutTest, ScatterAndCopyRank3) {
  const std::vector<int64_t> logical = {2, 3, 5}, padded = {3, 4, 8};
  std::vector<float> values(shapeElements(logical));
  std::iota(values.begin(), values.end(), 1.0f); // 1..30, all non-zero
  std::vector<float> buffer(shapeElements(padded), -1.0f);
  scatterLogicalRegion(values.data(), logical, padded, buffer.data());
  for (int64_t i = 0; i < padded[0]; ++i)
    for (int64_t j = 0; j < padded[1]; ++j)
      for (int64_t k = 0; k < padded[2]; ++k) {
        bool inside = i < logical[0] && j < logical[1] && k < logical[2];
        float expected = inside ? values[at3(logical, i, j, k)] : 0.0f;
        ASSERT_EQ(buffer[at3(padded, i, j, k)], expected)
            << "at " << i << ", " << j << ", " << k;
      }
  EXPECT_TRUE(paddingIsZero(buffer.data(), padded, logical));
  std::vector<float> back(values.size(), 0.0f);
  copyLogicalRegion(buffer.data(), padded, logical, back.data());
  EXPECT_EQ(back, values);
}

TEST(PaddedLayoutTest, PaddedRowsOfATable) {
  // wte [200, 4] stored as [256, 4]: the logical rows are a prefix.
  const std::vector<int64_t> logical = {200, 4}, padded = {256, 4};
  std::vector<float> values(shapeElements(logical));
  std::iota(values.begin(), values.end(), 1.0f);
  std::vector<float> buffer(shapeElements(padded), 7.0f);
  scatterLogicalRegion(values.data(), logical, padded, buffer.data());
  EXPECT_TRUE(std::equal(values.begin(), values.end(), buffer.begin()));
  EXPECT_TRUE(std::all_of(buffer.begin() + values.size(), buffer.end(),
                          [](float v) { return v == 0.0f; }));
}

TEST(PaddedLayoutTest, PaddingCheckSeesEveryPaddedElement) {
  const std::vector<int64_t> logical = {2, 3}, padded = {4, 5};
  std::vector<float> values(shapeElements(logical), 1.0f);
  std::vector<float> buffer(shapeElements(padded));
  for (int64_t i = 0; i < padded[0]; ++i)
    for (int64_t j = 0; j < padded[1]; ++j) {
      scatterLogicalRegion(values.data(), logical, padded, buffer.data());
      bool inside = i < logical[0] && j < logical[1];
      buffer[i * padded[1] + j] = 3.0f;
      EXPECT_EQ(paddingIsZero(buffer.data(), padded, logical), inside)
          << "element " << i << ", " << j;
    }
}

TEST(PaddedLayoutTest, PaddedOffsetOfEachLogicalElement) {
  const std::vector<int64_t> logical = {2, 3, 5}, padded = {3, 4, 8};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k)
        EXPECT_EQ(paddedOffset(at3(logical, i, j, k), logical, padded),
                  at3(padded, i, j, k));
  EXPECT_EQ(paddedOffset(0, {}, {}), 0);
}

TEST(PaddedLayoutTest, UnpaddedAndRank1) {
  const std::vector<int64_t> same = {3, 2};
  std::vector<float> values = {1, 2, 3, 4, 5, 6}, buffer(6), back(6);
  scatterLogicalRegion(values.data(), same, same, buffer.data());
  EXPECT_EQ(buffer, values);
  copyLogicalRegion(buffer.data(), same, same, back.data());
  EXPECT_EQ(back, values);

  std::vector<float> bias = {5, 6, 7}, padded(8, 1.0f);
  scatterLogicalRegion(bias.data(), {3}, {8}, padded.data());
  EXPECT_EQ(padded, (std::vector<float>{5, 6, 7, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(paddingIsZero(padded.data(), {8}, {3}));
  padded[7] = -0.5f;
  EXPECT_FALSE(paddingIsZero(padded.data(), {8}, {3}));
}

} // namespace
} // namespace kiln::rt
