//===- TspSampler.h - Batches of random TSP instances with target tours ---===//
//
// `--data tsp:N_MIN-N_MAX` generates its data instead of reading it: sample k
// of the stream is the instance generateTspCities(seed, k, N_MIN, N_MAX)
// with its reference tour (TspTours.h). A batch is the next `batch` samples;
// the position is {epoch 0, index k} (k samples read), so a checkpoint's
// data position resumes the stream exactly and nothing else is stored.
// Data-parallel rank r of N reads rows [r * batch, (r + 1) * batch) of each
// global batch of N * batch samples (the position counts global samples),
// so N ranks read exactly what one process of batch N * batch reads.
//
// A batch fills three inputs, matched by name against the artifact's Input
// buffers (TrainingData.cpp checks names, shapes and dtypes):
//   coords  [batch, n_max, 2] f32: city c of sample r at [r, c, :]; rows
//           c >= n are zero;
//   lengths [batch] i32: n, the number of cities of each sample;
//   targets [batch, n_max] i32: for the city at tour position t, the city at
//           position t + 1 (cyclic), i.e. targets[r, tour[t]] =
//           tour[(t + 1) % n]; padded rows get n_max, which a pointer loss
//           over n_max classes ignores (kiln.cross_entropy ignores targets
//           >= its class count).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TSPSAMPLER_H
#define KILN_RUNTIME_DATA_TSPSAMPLER_H

#include "runtime/Status.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/data/DataPosition.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt::data {

// The number of cities per sample, drawn uniformly from [minCities,
// maxCities].
struct TspSizeRange {
  int64_t minCities = 0;
  int64_t maxCities = 0;
};

constexpr std::string_view kTspSpecPrefix = "tsp:";
// Fewer than 3 cities have a single cyclic order: nothing to learn.
constexpr int64_t kMinTspCities = 3;
// 2-opt is O(n^2) per pass on the loader thread: larger instances would
// stall training long before they were useful.
constexpr int64_t kMaxTspCities = 4096;

// Whether `spec` selects generated TSP data (starts with "tsp:").
bool isTspSpec(std::string_view spec);

// Parses "tsp:N_MIN-N_MAX" (decimal, kMinTspCities <= N_MIN <= N_MAX <=
// kMaxTspCities). Errors quote the spec and say which part is wrong.
StatusOr<TspSizeRange> parseTspSpec(std::string_view spec);

// One micro-batch of the three inputs (see the banner).
struct TspBatch {
  std::vector<float> coords;    // [batch, nMax, 2]
  std::vector<int32_t> lengths; // [batch]
  std::vector<int32_t> targets; // [batch, nMax]
};

class TspSampler {
public:
  // Errors: batch <= 0, nMax < sizes.maxCities, or a start position with an
  // epoch (token data positions have one; a TSP stream never does).
  static StatusOr<TspSampler> create(TspSizeRange sizes, int64_t batch,
                                     int64_t nMax, uint64_t seed,
                                     DataPosition start = {}, Shard shard = {});

  // Fills the next batch (resizing the vectors) and advances the position.
  void fill(TspBatch &batch);

  // Writes sample `index` of the stream into row `row` of the arrays
  // (coords [.., nMax, 2], lengths [..], targets [.., nMax]).
  void fillSample(uint64_t index, int64_t row, float *coords, int32_t *lengths,
                  int32_t *targets) const;

  DataPosition position() const { return position_; }
  int64_t batch() const { return batch_; }
  int64_t nMax() const { return nMax_; }
  const TspSizeRange &sizes() const { return sizes_; }

  // "TSP instances of 20-50 cities (n_max 64), tours by nearest neighbour
  // + 2-opt".
  std::string describe() const;

private:
  TspSampler(TspSizeRange sizes, int64_t batch, int64_t nMax, uint64_t seed,
             DataPosition start, Shard shard)
      : sizes_(sizes), batch_(batch), nMax_(nMax), seed_(seed),
        position_(start), shard_(shard) {}

  TspSizeRange sizes_;
  int64_t batch_ = 0;
  int64_t nMax_ = 0;
  uint64_t seed_ = 0;
  DataPosition position_;
  Shard shard_;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_TSPSAMPLER_H
