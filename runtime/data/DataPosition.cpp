//===- DataPosition.cpp - Where in the shuffled data stream a run is ------===//

#include "runtime/data/DataPosition.h"

namespace kiln::rt::data {

namespace {

constexpr const char *kEpochKey = "epoch";
constexpr const char *kIndexKey = "index";

StatusOr<uint64_t> readCounter(const nlohmann::json &json, const char *key,
                               const std::string &where) {
  auto it = json.find(key);
  if (it == json.end())
    return invalidArgument(where, ": data position has no '", key, "'");
  // number_unsigned only: -1, 1.5, "3" and true are all rejected rather than
  // silently converted.
  if (!it->is_number_unsigned())
    return invalidArgument(where, ": data position '", key,
                           "' must be a non-negative integer, got ",
                           it->dump());
  return it->get<uint64_t>();
}

} // namespace

nlohmann::json DataPosition::toJson() const {
  return nlohmann::json{{kEpochKey, epoch}, {kIndexKey, index}};
}

StatusOr<DataPosition> DataPosition::fromJson(const nlohmann::json &json,
                                              const std::string &where) {
  if (!json.is_object())
    return invalidArgument(where,
                           ": data position must be an object "
                           "{\"epoch\": E, \"index\": I}, got ",
                           json.dump());
  for (auto it = json.begin(); it != json.end(); ++it)
    if (it.key() != kEpochKey && it.key() != kIndexKey)
      return invalidArgument(where, ": data position has unknown key '",
                             it.key(), "' (expected epoch and index)");
  DataPosition position;
  KILN_ASSIGN_OR_RETURN(position.epoch, readCounter(json, kEpochKey, where));
  KILN_ASSIGN_OR_RETURN(position.index, readCounter(json, kIndexKey, where));
  return position;
}

} // namespace kiln::rt::data
