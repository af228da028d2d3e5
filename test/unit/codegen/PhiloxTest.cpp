//===- PhiloxTest.cpp - The dropout generator, compiled from its C text ---===//
//
// codegen/PhiloxRandom.inc is the exact text every dropout kernel carries
// (codegen/Philox.cpp embeds it); here it is compiled directly and checked:
//  - known answers: the three Philox4x32-10 vectors of Random123's
//    tests/kat_vectors (counter, key -> output);
//  - the keep rate over 2^22 elements is 1 - p within 6 binomial standard
//    deviations (sqrt(p (1 - p) / n); a correct generator fails this with
//    probability ~2e-9, a biased threshold by 1% of p fails it surely);
//  - the decision is a pure function of (seed, offset, bh, i, j): the same
//    arguments give the same mask, another offset, seed or index another
//    one (two independent masks agree on ~p^2 + (1-p)^2 of the elements);
//  - the threshold is floor(p 2^32) (the Python oracle recomputes it).
//
//===----------------------------------------------------------------------===//

#include "codegen/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#define KILN_RNG_FN static inline
#include "codegen/PhiloxRandom.inc"

namespace {

struct KnownAnswer {
  unsigned ctr[4], key[2], out[4];
};

TEST(Philox, Random123KnownAnswers) {
  const KnownAnswer vectors[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const KnownAnswer &v : vectors) {
    unsigned out[4];
    kiln_philox4x32_10(v.ctr, v.key, out);
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(out[w], v.out[w]) << "word " << w << " of counter "
                                  << std::hex << v.ctr[0];
  }
}

// Kept fraction of a [16 heads, 512, 512] mask for p.
double keptFraction(double p, unsigned long long seed,
                    unsigned long long offset) {
  unsigned threshold = kiln::dropoutThreshold(p);
  long long kept = 0, n = 0;
  for (long long bh = 0; bh < 16; ++bh)
    for (long long i = 0; i < 512; ++i)
      for (long long j = 0; j < 512; ++j, ++n)
        kept += kiln_dropout_keep(seed, offset, bh, i, j, threshold);
  return static_cast<double>(kept) / static_cast<double>(n);
}

TEST(Philox, KeepRateWithinBinomialBound) {
  const double n = 16.0 * 512 * 512;
  for (double p : {0.1, 0.5, 0.9}) {
    double bound = 6.0 * std::sqrt(p * (1 - p) / n);
    double kept = keptFraction(p, 1234, 7);
    EXPECT_NEAR(kept, 1.0 - p, bound) << "p = " << p;
  }
}

// Fraction of [4, 256, 256] elements on which two masks agree.
double agreement(unsigned long long seedA, unsigned long long offA,
                 unsigned long long seedB, unsigned long long offB,
                 long long shiftJ = 0) {
  unsigned threshold = kiln::dropoutThreshold(0.5);
  long long same = 0, n = 0;
  for (long long bh = 0; bh < 4; ++bh)
    for (long long i = 0; i < 256; ++i)
      for (long long j = 0; j < 256; ++j, ++n)
        same += kiln_dropout_keep(seedA, offA, bh, i, j, threshold) ==
                kiln_dropout_keep(seedB, offB, bh, i, j + shiftJ, threshold);
  return static_cast<double>(same) / static_cast<double>(n);
}

TEST(Philox, MaskIsAPureFunctionOfItsCounter) {
  // The same step twice: the same mask (what the backward relies on).
  EXPECT_EQ(agreement(42, 3, 42, 3), 1.0);
  // Another step, another seed, or shifted keys: independent masks agree on
  // half the elements for p = 0.5 (6 sigma of 2^18 draws: 0.006).
  EXPECT_NEAR(agreement(42, 3, 42, 4), 0.5, 0.006);
  EXPECT_NEAR(agreement(42, 3, 43, 3), 0.5, 0.006);
  EXPECT_NEAR(agreement(42, 3, 42, 3, 1), 0.5, 0.006);
  // The seed's high word is part of the key.
  EXPECT_NEAR(agreement(42, 3, 42 + (1ull << 32), 3), 0.5, 0.006);
}

TEST(Philox, ThresholdIsFloorOfPTimes2To32) {
  EXPECT_EQ(kiln::dropoutThreshold(0.0), 0u);
  EXPECT_EQ(kiln::dropoutThreshold(0.5), 2147483648u);
  // 0.1f as the f32 attribute holds it.
  EXPECT_EQ(kiln::dropoutThreshold(static_cast<double>(0.1f)),
            static_cast<unsigned>(std::floor(static_cast<double>(0.1f) *
                                             4294967296.0)));
  EXPECT_EQ(kiln::dropoutThreshold(0.9999999999), 4294967295u);
}

TEST(Philox, KernelTextIsTheCompiledText) {
  std::string cpu = kiln::philoxKernelSource("cpu");
  std::string cuda = kiln::philoxKernelSource("cuda");
  EXPECT_NE(cpu.find("#define KILN_RNG_FN static inline"), std::string::npos);
  EXPECT_NE(cuda.find("#define KILN_RNG_FN __device__ __forceinline__"),
            std::string::npos);
  for (const std::string *text : {&cpu, &cuda}) {
    EXPECT_NE(text->find("kiln_dropout_keep"), std::string::npos);
    EXPECT_NE(text->find("0xD2511F53u"), std::string::npos);
  }
}

} // namespace
