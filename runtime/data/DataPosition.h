//===- DataPosition.h - Where in the shuffled data stream a run is --------===//
//
// The training stream is a sequence of epochs, each a seeded permutation of
// the training windows (WindowPermutation.h). {epoch, index} names the next
// window to be read: window permutation_epoch(index). A sampler created at a
// saved position produces exactly the batches an uninterrupted one would
// have, which is what makes resume bit-exact. Checkpoints store it in
// trainer_state.json as {"epoch": E, "index": I}.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_DATAPOSITION_H
#define KILN_RUNTIME_DATA_DATAPOSITION_H

#include "runtime/Status.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::rt::data {

struct DataPosition {
  uint64_t epoch = 0;
  uint64_t index = 0; // windows of `epoch` already read

  bool operator==(const DataPosition &other) const {
    return epoch == other.epoch && index == other.index;
  }
  bool operator!=(const DataPosition &other) const { return !(*this == other); }

  nlohmann::json toJson() const;

  // Parses {"epoch": E, "index": I} with non-negative integers and no other
  // keys; errors start with `where` (e.g. "run/step_100/trainer_state.json:
  // data_position").
  static StatusOr<DataPosition> fromJson(const nlohmann::json &json,
                                         const std::string &where);
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_DATAPOSITION_H
