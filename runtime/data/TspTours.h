//===- TspTours.h - Random TSP instances and their reference tours --------===//
//
// `--data tsp:N_MIN-N_MAX` trains on random Euclidean TSP instances. This file
// holds what one instance is and how its target tour is found; the batching
// lives in TspSampler.h.
//
// An instance is a pure function of (seed, index), so the stream needs no
// state beyond a counter (resume is exact) and any sample can be recomputed
// on its own:
//   key   = splitMix64(splitMix64(seed ^ kTspStreamSalt) + index)
//   n     = N_MIN + draw(key, 0) mod (N_MAX - N_MIN + 1)
//   x_c   = unit(draw(key, 1 + 2c)),  y_c = unit(draw(key, 2 + 2c))
// where draw(key, k) = splitMix64(key + k) and unit() keeps the top 24 bits
// (uniform in [0, 1), exactly representable as f32).
//
// The target tour is the classic construction + local search:
//   1. nearest neighbour from city 0 (ties: the lower index);
//   2. 2-opt, first improvement: scan the pairs of tour edges, reverse the
//      segment as soon as a move shortens the tour by more than
//      kTwoOptMinGain, rescan, until a full pass finds no such move or
//      kMaxTwoOptPasses passes have run (a cap that instances of a few
//      hundred cities never reach in practice; hitting it still leaves a
//      valid, improved tour);
//   3. a canonical direction: the tour starts at city 0 and its second city
//      has a lower index than its last, so the same cycle always yields the
//      same successor targets.
// Distances are computed in double from the f32 coordinates the model sees.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TSPTOURS_H
#define KILN_RUNTIME_DATA_TSPTOURS_H

#include <cstdint>
#include <vector>

namespace kiln::rt::data {

struct TspCity {
  float x = 0, y = 0;
};

// Keeps the TSP stream independent of other users of splitMix64(seed).
constexpr uint64_t kTspStreamSalt = 0x7473702d63697479ull; // "tsp-city"

// A move must shorten the tour by more than this to count: without a
// threshold, rounding could make two equivalent tours "improve" forever.
constexpr double kTwoOptMinGain = 1e-9;

// Full 2-opt passes allowed before the search stops (see the banner).
constexpr int64_t kMaxTwoOptPasses = 1000;

// The cities of sample `index` of the stream keyed by `seed`, with a count
// drawn uniformly from [nMin, nMax]. Requires 1 <= nMin <= nMax.
std::vector<TspCity> generateTspCities(uint64_t seed, uint64_t index,
                                       int64_t nMin, int64_t nMax);

double cityDistance(const TspCity &a, const TspCity &b);

// Length of the closed tour (the last city returns to the first).
double tourLength(const std::vector<int32_t> &tour,
                  const std::vector<TspCity> &cities);

// Nearest-neighbour tour from city 0.
std::vector<int32_t> nearestNeighbourTour(const std::vector<TspCity> &cities);

// The change in tour length of reversing tour[i+1 .. j] (0 <= i < j < n):
// edges (t_i, t_{i+1}) and (t_j, t_{j+1 mod n}) become (t_i, t_j) and
// (t_{i+1}, t_{j+1 mod n}). Negative: the move shortens the tour.
double twoOptDelta(const std::vector<int32_t> &tour,
                   const std::vector<TspCity> &cities, int64_t i, int64_t j);

// Improves `tour` in place by first-improvement 2-opt (see the banner);
// returns the number of passes run.
int64_t improveByTwoOpt(std::vector<int32_t> &tour,
                        const std::vector<TspCity> &cities);

// Rotates and, if needed, reverses `tour` into the canonical direction.
void canonicalizeTour(std::vector<int32_t> &tour);

// Steps 1-3 of the banner.
std::vector<int32_t> solveTsp(const std::vector<TspCity> &cities);

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_TSPTOURS_H
