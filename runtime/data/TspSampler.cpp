//===- TspSampler.cpp - Batches of random TSP instances with target tours -===//

#include "runtime/data/TspSampler.h"

#include "runtime/data/TspTours.h"

#include <algorithm>
#include <charconv>

namespace kiln::rt::data {

namespace {

// A whole decimal field: "20" yes; "", "2a", "-3", "+3" no.
bool parseCount(std::string_view text, int64_t &value) {
  if (text.empty() || text.front() < '0' || text.front() > '9')
    return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(),
                                      value);
  return error == std::errc() && end == text.data() + text.size();
}

} // namespace

bool isTspSpec(std::string_view spec) {
  return spec.substr(0, kTspSpecPrefix.size()) == kTspSpecPrefix;
}

StatusOr<TspSizeRange> parseTspSpec(std::string_view spec) {
  if (!isTspSpec(spec))
    return invalidArgument("--data '", spec, "' is not a tsp:N_MIN-N_MAX spec");
  std::string_view range = spec.substr(kTspSpecPrefix.size());
  size_t dash = range.find('-');
  TspSizeRange sizes;
  if (dash == std::string_view::npos ||
      !parseCount(range.substr(0, dash), sizes.minCities) ||
      !parseCount(range.substr(dash + 1), sizes.maxCities))
    return invalidArgument("--data '", spec,
                           "': expected tsp:N_MIN-N_MAX with two decimal "
                           "city counts, e.g. tsp:20-50");
  if (sizes.minCities > sizes.maxCities)
    return invalidArgument("--data '", spec, "': N_MIN ", sizes.minCities,
                           " is greater than N_MAX ", sizes.maxCities);
  if (sizes.minCities < kMinTspCities)
    return invalidArgument("--data '", spec, "': N_MIN ", sizes.minCities,
                           " is below ", kMinTspCities,
                           " (fewer cities have only one tour)");
  if (sizes.maxCities > kMaxTspCities)
    return invalidArgument("--data '", spec, "': N_MAX ", sizes.maxCities,
                           " is above ", kMaxTspCities,
                           " (2-opt per sample would stall training)");
  return sizes;
}

StatusOr<TspSampler> TspSampler::create(TspSizeRange sizes, int64_t batch,
                                        int64_t nMax, uint64_t seed,
                                        DataPosition start, Shard shard) {
  if (batch <= 0)
    return invalidArgument("batch size must be positive, got ", batch);
  if (nMax < sizes.maxCities)
    return invalidArgument("TSP samples of up to ", sizes.maxCities,
                           " cities do not fit n_max = ", nMax);
  if (start.epoch != 0)
    return invalidArgument(
        "data position {epoch ", start.epoch, ", index ", start.index,
        "} has an epoch, which generated TSP data never does: the checkpoint "
        "was saved by a run on other data");
  if (shard.count < 1 || shard.rank < 0 || shard.rank >= shard.count)
    return invalidArgument("rank ", shard.rank, " of ", shard.count,
                           " is not a data-parallel shard");
  return TspSampler(sizes, batch, nMax, seed, start, shard);
}

void TspSampler::fillSample(uint64_t index, int64_t row, float *coords,
                            int32_t *lengths, int32_t *targets) const {
  std::vector<TspCity> cities =
      generateTspCities(seed_, index, sizes_.minCities, sizes_.maxCities);
  std::vector<int32_t> tour = solveTsp(cities);
  const int64_t n = static_cast<int64_t>(cities.size());
  float *rowCoords = coords + row * nMax_ * 2;   // [nMax, 2]
  int32_t *rowTargets = targets + row * nMax_;   // [nMax]
  std::fill(rowCoords, rowCoords + nMax_ * 2, 0.0f);
  std::fill(rowTargets, rowTargets + nMax_, static_cast<int32_t>(nMax_));
  for (int64_t c = 0; c < n; ++c) {
    rowCoords[2 * c] = cities[c].x;
    rowCoords[2 * c + 1] = cities[c].y;
  }
  for (int64_t t = 0; t < n; ++t)
    rowTargets[tour[t]] = tour[(t + 1) % n];
  lengths[row] = static_cast<int32_t>(n);
}

void TspSampler::fill(TspBatch &batch) {
  batch.coords.resize(batch_ * nMax_ * 2);
  batch.lengths.resize(batch_);
  batch.targets.resize(batch_ * nMax_);
  // This rank's rows of the global batch.
  const uint64_t first = position_.index + static_cast<uint64_t>(shard_.rank * batch_);
  for (int64_t row = 0; row < batch_; ++row)
    fillSample(first + row, row, batch.coords.data(), batch.lengths.data(),
               batch.targets.data());
  position_.index += static_cast<uint64_t>(batch_ * shard_.count);
}

std::string TspSampler::describe() const {
  return detail::concat("TSP instances of ", sizes_.minCities, "-",
                        sizes_.maxCities, " cities (n_max ", nMax_,
                        "), tours by nearest neighbour + 2-opt");
}

} // namespace kiln::rt::data
