//===- DataTspTest.cpp - Generated TSP instances, tours, batches, inputs --===//

#include "TestArtifact.h"

#include "runtime/TrainingData.h"
#include "runtime/data/TspSampler.h"
#include "runtime/data/TspTours.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace kiln::rt::test {
namespace {

using data::DataPosition;
using data::TspBatch;
using data::TspCity;
using data::TspSampler;
using data::TspSizeRange;
using ::testing::HasSubstr;

bool isPermutation(std::vector<int32_t> tour, size_t n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(tour.begin(), tour.end());
  return tour == ids;
}

TEST(TspSpec, ParsesRanges) {
  auto sizes = data::parseTspSpec("tsp:20-50");
  ASSERT_TRUE(sizes.ok()) << sizes.status().message();
  EXPECT_EQ(sizes->minCities, 20);
  EXPECT_EQ(sizes->maxCities, 50);
  auto single = data::parseTspSpec("tsp:7-7");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->minCities, 7);
  EXPECT_TRUE(data::isTspSpec("tsp:1-2"));
  EXPECT_FALSE(data::isTspSpec("data/tsp.txt"));
}

TEST(TspSpec, RejectsBadSpecs) {
  struct Case {
    const char *spec, *message;
  } cases[] = {
      {"tsp:50-20", "N_MIN 50 is greater than N_MAX 20"},
      {"tsp:a-b", "expected tsp:N_MIN-N_MAX"},
      {"tsp:20", "expected tsp:N_MIN-N_MAX"},
      {"tsp:20-", "expected tsp:N_MIN-N_MAX"},
      {"tsp:-3-5", "expected tsp:N_MIN-N_MAX"},
      {"tsp:3-5x", "expected tsp:N_MIN-N_MAX"},
      {"tsp:1-1", "N_MIN 1 is below 3"},
      {"tsp:2-10", "N_MIN 2 is below 3"},
      {"tsp:10-100000", "N_MAX 100000 is above 4096"},
  };
  for (const Case &c : cases) {
    auto sizes = data::parseTspSpec(c.spec);
    ASSERT_FALSE(sizes.ok()) << c.spec;
    EXPECT_THAT(sizes.status().message(), HasSubstr(c.message)) << c.spec;
    EXPECT_THAT(sizes.status().message(), HasSubstr(c.spec));
  }
}

TEST(TspTours, CitiesAreSeededUniformAndInRange) {
  for (uint64_t index = 0; index < 200; ++index) {
    std::vector<TspCity> cities = data::generateTspCities(5, index, 20, 50);
    ASSERT_GE(cities.size(), 20u);
    ASSERT_LE(cities.size(), 50u);
    for (const TspCity &c : cities) {
      EXPECT_GE(c.x, 0.0f);
      EXPECT_LT(c.x, 1.0f);
      EXPECT_GE(c.y, 0.0f);
      EXPECT_LT(c.y, 1.0f);
    }
    std::vector<TspCity> again = data::generateTspCities(5, index, 20, 50);
    ASSERT_EQ(again.size(), cities.size());
    for (size_t c = 0; c < cities.size(); ++c)
      EXPECT_TRUE(again[c].x == cities[c].x && again[c].y == cities[c].y);
  }
  // Another seed, another instance.
  std::vector<TspCity> a = data::generateTspCities(5, 0, 30, 30);
  std::vector<TspCity> b = data::generateTspCities(6, 0, 30, 30);
  EXPECT_NE(a[0].x, b[0].x);
}

TEST(TspTours, SizesCoverTheRange) {
  std::vector<int> seen(6, 0);
  for (uint64_t index = 0; index < 600; ++index)
    ++seen[data::generateTspCities(1, index, 10, 15).size() - 10];
  // 600 draws over 6 sizes: each expected 100 times; below 50 would mean
  // a broken draw (binomial sd ~9).
  for (int count : seen)
    EXPECT_GT(count, 50);
}

TEST(TspTours, TwoOptNeverLengthensAndIsALocalOptimum) {
  for (uint64_t index = 0; index < 100; ++index) {
    std::vector<TspCity> cities = data::generateTspCities(11, index, 4, 40);
    std::vector<int32_t> nn = data::nearestNeighbourTour(cities);
    ASSERT_TRUE(isPermutation(nn, cities.size()));
    std::vector<int32_t> tour = nn;
    int64_t passes = data::improveByTwoOpt(tour, cities);
    EXPECT_LT(passes, data::kMaxTwoOptPasses);
    ASSERT_TRUE(isPermutation(tour, cities.size()));
    EXPECT_LE(data::tourLength(tour, cities), data::tourLength(nn, cities));
    // No improving move is left.
    const int64_t n = static_cast<int64_t>(tour.size());
    for (int64_t i = 0; i + 1 < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        EXPECT_GE(data::twoOptDelta(tour, cities, i, j), -data::kTwoOptMinGain)
            << "instance " << index << " move (" << i << ", " << j << ")";
  }
}

TEST(TspTours, TwoOptUntanglesACrossing) {
  // A unit square visited 0 -> 2 -> 1 -> 3 crosses itself (length 2 + 2√2);
  // the optimum is the perimeter (4).
  std::vector<TspCity> square = {{0, 0}, {1, 0}, {1, 1}, {0, 1}};
  std::vector<int32_t> tour = {0, 2, 1, 3};
  data::improveByTwoOpt(tour, square);
  EXPECT_NEAR(data::tourLength(tour, square), 4.0, 1e-12);
}

TEST(TspTours, SolvedToursAreCanonical) {
  for (uint64_t index = 0; index < 50; ++index) {
    std::vector<TspCity> cities = data::generateTspCities(3, index, 5, 30);
    std::vector<int32_t> tour = data::solveTsp(cities);
    ASSERT_TRUE(isPermutation(tour, cities.size()));
    EXPECT_EQ(tour[0], 0);
    EXPECT_LT(tour[1], tour.back());
  }
}

StatusOr<TspSampler> makeSampler(uint64_t seed, DataPosition start = {}) {
  return TspSampler::create({5, 12}, 4, 16, seed, start);
}

TEST(TspSampler, BatchesHoldToursAsSuccessors) {
  auto sampler = makeSampler(9);
  ASSERT_TRUE(sampler.ok()) << sampler.status().message();
  TspBatch batch;
  sampler->fill(batch);
  ASSERT_EQ(batch.coords.size(), 4u * 16 * 2);
  ASSERT_EQ(batch.lengths.size(), 4u);
  ASSERT_EQ(batch.targets.size(), 4u * 16);
  for (int64_t r = 0; r < 4; ++r) {
    const int32_t n = batch.lengths[r];
    ASSERT_GE(n, 5);
    ASSERT_LE(n, 12);
    const int32_t *next = &batch.targets[r * 16];
    // Following successors from city 0 visits every city once and returns.
    std::vector<int32_t> walk = {0};
    for (int32_t k = 1; k < n; ++k)
      walk.push_back(next[walk.back()]);
    EXPECT_TRUE(isPermutation(walk, n)) << "row " << r;
    EXPECT_EQ(next[walk.back()], 0);
    // The walk is the reference tour of that sample.
    std::vector<TspCity> cities = data::generateTspCities(9, r, 5, 12);
    EXPECT_EQ(walk, data::solveTsp(cities));
    for (int32_t c = 0; c < n; ++c) {
      EXPECT_EQ(batch.coords[(r * 16 + c) * 2], cities[c].x);
      EXPECT_EQ(batch.coords[(r * 16 + c) * 2 + 1], cities[c].y);
    }
    // Padding: zero coordinates, the ignored target n_max.
    for (int32_t c = n; c < 16; ++c) {
      EXPECT_EQ(batch.coords[(r * 16 + c) * 2], 0.0f);
      EXPECT_EQ(batch.coords[(r * 16 + c) * 2 + 1], 0.0f);
      EXPECT_EQ(next[c], 16);
    }
  }
  EXPECT_EQ(sampler->position(), (DataPosition{0, 4}));
}

TEST(TspSampler, DeterministicPerSeedAndResumesExactly) {
  auto a = makeSampler(42), b = makeSampler(42), other = makeSampler(43);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  std::vector<TspBatch> straight(3);
  for (TspBatch &batch : straight)
    a->fill(batch);
  TspBatch first, otherFirst;
  b->fill(first);
  other->fill(otherFirst);
  EXPECT_EQ(first.coords, straight[0].coords);
  EXPECT_EQ(first.targets, straight[0].targets);
  EXPECT_NE(otherFirst.coords, straight[0].coords);
  // A sampler created at the saved position continues the same stream.
  auto resumed = makeSampler(42, b->position());
  ASSERT_TRUE(resumed.ok());
  for (int k = 1; k < 3; ++k) {
    TspBatch batch;
    resumed->fill(batch);
    EXPECT_EQ(batch.coords, straight[k].coords) << "batch " << k;
    EXPECT_EQ(batch.lengths, straight[k].lengths) << "batch " << k;
    EXPECT_EQ(batch.targets, straight[k].targets) << "batch " << k;
  }
  EXPECT_EQ(resumed->position(), a->position());
}

TEST(TspSampler, RejectsBadSetups) {
  auto small = TspSampler::create({5, 20}, 4, 16, 0);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("n_max = 16"));
  auto tokenPosition = makeSampler(0, DataPosition{2, 5});
  ASSERT_FALSE(tokenPosition.ok());
  EXPECT_THAT(tokenPosition.status().message(), HasSubstr("has an epoch"));
}

StatusOr<std::unique_ptr<Artifact>>
loadWithInputs(std::vector<BufferSpec> inputs) {
  ArtifactSpec spec = minimalArtifact();
  spec.batch = 2;
  for (BufferSpec &input : inputs) {
    input.role = schema::BufferRole_Input;
    spec.buffers.push_back(std::move(input));
  }
  return Artifact::loadBytes(serializeArtifact(spec), "tsp.kart");
}

// An artifact whose inputs are `inputs` (batch 2); the rest is minimal.
// Null (and a test failure) when it does not load.
std::unique_ptr<Artifact> artifactWithInputs(std::vector<BufferSpec> inputs) {
  auto artifact = loadWithInputs(std::move(inputs));
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  return artifact.ok() ? std::move(*artifact) : nullptr;
}

std::vector<BufferSpec> tspInputSpecs(int64_t nMax) {
  return {{"coords", {}, schema::DType_F32, {2, nMax, 2}},
          {"lengths", {}, schema::DType_I32, {2}},
          {"targets", {}, schema::DType_I32, {2, nMax}}};
}

StatusOr<TrainingData> openTsp(const Artifact &artifact, std::string spec) {
  RunOptions options;
  options.dataPath = std::move(spec);
  options.seed = 1;
  return openTrainingData(artifact, options);
}

TEST(TspTrainingData, OpensForMatchingInputs) {
  auto artifact = artifactWithInputs(tspInputSpecs(64));
  ASSERT_TRUE(artifact);
  auto data = openTsp(*artifact, "tsp:20-50");
  ASSERT_TRUE(data.ok()) << data.status().message();
  ASSERT_TRUE(data->tsp.has_value());
  EXPECT_FALSE(data->train.has_value());
  EXPECT_EQ(data->tsp->nMax(), 64);
  EXPECT_EQ(data->tsp->batch(), 2);
  EXPECT_THAT(data->description, HasSubstr("20-50 cities (n_max 64)"));
  TspBatch batch;
  data->tsp->fill(batch);
  std::vector<NamedInput> inputs = tspInputs(batch);
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_EQ(inputs[0].bytes, 2u * 64 * 2 * sizeof(float));
  EXPECT_EQ(inputs[1].bytes, 2u * sizeof(int32_t));
}

TEST(TspTrainingData, NamesTheInputThatDoesNotFit) {
  struct Case {
    std::vector<BufferSpec> inputs;
    const char *spec, *message;
  } cases[] = {
      // lengths missing.
      {{{"coords", {}, schema::DType_F32, {2, 64, 2}},
        {"targets", {}, schema::DType_I32, {2, 64}}},
       "tsp:20-50", "needs the model to read input 'lengths' [2] : I32"},
      // n_max below N_MAX.
      {tspInputSpecs(32), "tsp:20-50",
       "input 'coords' holds 32 cities per sample but --data tsp:20-50 draws "
       "up to 50"},
      // targets of another n_max.
      {{{"coords", {}, schema::DType_F32, {2, 64, 2}},
        {"lengths", {}, schema::DType_I32, {2}},
        {"targets", {}, schema::DType_I32, {2, 50}}},
       "tsp:20-50", "input 'targets' is [2, 50] : I32 but --data tsp:20-50 "
                    "produces [2, 64] : I32"},
      // A token model given TSP data.
      {{{"tokens", {}, schema::DType_I32, {2, 1}},
        {"targets", {}, schema::DType_I32, {2, 1}}},
       "tsp:20-50", "input 'tokens' is not produced by --data tsp:20-50"},
      // A TSP model given token data.
      {tspInputSpecs(64), "random",
       "input 'coords' is not produced by token data (--data random)"},
      // A bad spec is reported before the inputs.
      {tspInputSpecs(64), "tsp:50-20", "N_MIN 50 is greater than N_MAX 20"},
  };
  for (Case &c : cases) {
    auto artifact = artifactWithInputs(c.inputs);
    ASSERT_TRUE(artifact) << c.message;
    auto data = openTsp(*artifact, c.spec);
    ASSERT_FALSE(data.ok()) << c.message;
    EXPECT_THAT(data.status().message(), HasSubstr(c.message));
  }
}

TEST(TspTrainingData, VerifierChecksInputRanksAndDtypes) {
  struct Case {
    BufferSpec input;
    const char *message;
  } cases[] = {
      {{"coords", {}, schema::DType_I32, {2, 64, 2}},
       "buffer 1 ('coords') must be f32 [batch, n_max, 2] with batch 2"},
      {{"coords", {}, schema::DType_F32, {2, 64, 3}},
       "buffer 1 ('coords') must be f32 [batch, n_max, 2]"},
      {{"lengths", {}, schema::DType_I32, {3}},
       "buffer 1 ('lengths') must be i32 [batch] = [2]"},
      {{"targets", {}, schema::DType_F32, {2, 64}},
       "buffer 1 ('targets') must be i32 [batch, n] with batch 2"},
      {{"cities", {}, schema::DType_F32, {2, 64, 2}},
       "is an Input the data loader cannot fill"},
  };
  for (Case &c : cases) {
    auto artifact = loadWithInputs({c.input});
    ASSERT_FALSE(artifact.ok()) << c.message;
    EXPECT_THAT(artifact.status().message(), HasSubstr(c.message));
  }
}

TEST(TspTrainingData, RefusesValidationAndFormats) {
  auto artifact = artifactWithInputs(tspInputSpecs(64));
  ASSERT_TRUE(artifact);
  RunOptions options;
  options.dataPath = "tsp:20-50";
  options.valFraction = 0.1;
  auto data = openTrainingData(*artifact, options);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("validation"));
  options.valFraction = 0;
  options.dataFormat = "text";
  data = openTrainingData(*artifact, options);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("no --data-format"));
}

} // namespace
} // namespace kiln::rt::test
