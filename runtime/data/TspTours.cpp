//===- TspTours.cpp - Random TSP instances and their reference tours ------===//

#include "runtime/data/TspTours.h"

#include "runtime/Hash.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::rt::data {

namespace {

uint64_t draw(uint64_t key, uint64_t k) { return splitMix64(key + k); }

// The top 24 bits as a float in [0, 1): every value is exact in f32, so the
// coordinates the solver sees are the ones the model reads.
float unitFloat(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

} // namespace

std::vector<TspCity> generateTspCities(uint64_t seed, uint64_t index,
                                       int64_t nMin, int64_t nMax) {
  const uint64_t key = splitMix64(splitMix64(seed ^ kTspStreamSalt) + index);
  const uint64_t span = static_cast<uint64_t>(nMax - nMin + 1);
  const int64_t n = nMin + static_cast<int64_t>(draw(key, 0) % span);
  std::vector<TspCity> cities(n);
  for (int64_t c = 0; c < n; ++c) {
    cities[c].x = unitFloat(draw(key, 1 + 2 * c));
    cities[c].y = unitFloat(draw(key, 2 + 2 * c));
  }
  return cities;
}

double cityDistance(const TspCity &a, const TspCity &b) {
  double dx = double(a.x) - double(b.x), dy = double(a.y) - double(b.y);
  return std::sqrt(dx * dx + dy * dy);
}

double tourLength(const std::vector<int32_t> &tour,
                  const std::vector<TspCity> &cities) {
  double length = 0;
  for (size_t t = 0; t < tour.size(); ++t)
    length += cityDistance(cities[tour[t]], cities[tour[(t + 1) % tour.size()]]);
  return length;
}

std::vector<int32_t> nearestNeighbourTour(const std::vector<TspCity> &cities) {
  const int32_t n = static_cast<int32_t>(cities.size());
  std::vector<int32_t> tour;
  if (n == 0)
    return tour;
  std::vector<bool> visited(n, false);
  tour.reserve(n);
  int32_t at = 0;
  visited[0] = true;
  tour.push_back(0);
  for (int32_t step = 1; step < n; ++step) {
    int32_t best = -1;
    double bestDistance = std::numeric_limits<double>::infinity();
    // Strict < keeps the lower index on ties.
    for (int32_t c = 0; c < n; ++c) {
      if (visited[c])
        continue;
      double d = cityDistance(cities[at], cities[c]);
      if (d < bestDistance) {
        bestDistance = d;
        best = c;
      }
    }
    visited[best] = true;
    tour.push_back(best);
    at = best;
  }
  return tour;
}

double twoOptDelta(const std::vector<int32_t> &tour,
                   const std::vector<TspCity> &cities, int64_t i, int64_t j) {
  const int64_t n = static_cast<int64_t>(tour.size());
  const TspCity &a = cities[tour[i]], &b = cities[tour[i + 1]];
  const TspCity &c = cities[tour[j]], &d = cities[tour[(j + 1) % n]];
  return cityDistance(a, c) + cityDistance(b, d) - cityDistance(a, b) -
         cityDistance(c, d);
}

int64_t improveByTwoOpt(std::vector<int32_t> &tour,
                        const std::vector<TspCity> &cities) {
  const int64_t n = static_cast<int64_t>(tour.size());
  int64_t passes = 0;
  bool improved = true;
  while (improved && passes < kMaxTwoOptPasses) {
    improved = false;
    ++passes;
    // j = i + 1 reverses one city and (0, n - 1) the whole cycle: both leave
    // the tour unchanged, so the scan starts at j = i + 2 and skips (0, n-1).
    for (int64_t i = 0; i + 2 < n; ++i) {
      for (int64_t j = i + 2; j < n; ++j) {
        if (i == 0 && j == n - 1)
          continue;
        if (twoOptDelta(tour, cities, i, j) < -kTwoOptMinGain) {
          std::reverse(tour.begin() + i + 1, tour.begin() + j + 1);
          improved = true;
        }
      }
    }
  }
  return passes;
}

void canonicalizeTour(std::vector<int32_t> &tour) {
  if (tour.size() < 3)
    return;
  auto zero = std::find(tour.begin(), tour.end(), 0);
  if (zero != tour.end())
    std::rotate(tour.begin(), zero, tour.end());
  if (tour[1] > tour.back())
    std::reverse(tour.begin() + 1, tour.end());
}

std::vector<int32_t> solveTsp(const std::vector<TspCity> &cities) {
  std::vector<int32_t> tour = nearestNeighbourTour(cities);
  improveByTwoOpt(tour, cities);
  canonicalizeTour(tour);
  return tour;
}

} // namespace kiln::rt::data
