//===- SemaSharding.cpp - Sharding annotations ----------------------------===//
//
// `param w [C, 4 * C] = normal(0.02) shard [_, model]`, the same after an
// input, and `shard(x, [_, _, model])` on an intermediate value: for each
// dimension, the mesh axis whose ranks split it (`_`: not split). Sema
// checks what can be checked at the annotation itself -- one entry per
// dimension, axes the mesh declares, no axis twice, a dimension its axis
// divides (for a parameter, after padding: the propagation pass checks
// that) -- so each mistake is reported at the line that asked for it; the
// propagation pass (passes/PropagateSharding.cpp) checks the rest.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include <algorithm>

namespace kiln {

bool Sema::evaluateSharding(const ShardingSpec &spec,
                            const std::vector<int64_t> &shape,
                            const std::string &what,
                            std::vector<std::string> &out) {
  const auto &mesh = graph_.train.mesh;
  if (spec.dims.size() != shape.size())
    return error(spec.loc, "the sharding of " + what + " has " +
                               std::to_string(spec.dims.size()) +
                               " entries but its shape " + formatShape(shape) +
                               " has " + std::to_string(shape.size()) +
                               " dimensions; give one mesh axis or '_' per "
                               "dimension");
  out.assign(shape.size(), "");
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    const std::string &axis = spec.dims[d];
    SourceLoc loc = spec.dimLocs[d];
    if (axis == "_")
      continue;
    if (axis == "data")
      return error(loc, "the data axis splits every batch already (data "
                        "parallelism); shard over another mesh axis, e.g. "
                        "mesh = [data = N, model = M] and shard [_, model]");
    auto it = std::find_if(mesh.begin(), mesh.end(),
                           [&](const auto &a) { return a.first == axis; });
    if (it == mesh.end()) {
      std::string declared;
      for (const auto &[name, size] : mesh)
        declared += (declared.empty() ? "" : ", ") + name;
      return error(loc, "unknown mesh axis '" + axis + "'; " +
                            (declared.empty()
                                 ? "the train section has no mesh: add "
                                   "mesh = [" + axis + " = N]"
                                 : "the mesh declares " + declared));
    }
    for (size_t e = 0; e < d; ++e)
      if (spec.dims[e] == axis)
        return error(loc, "mesh axis '" + axis + "' splits dimension " +
                              std::to_string(e) + " of " + what +
                              " already; an axis splits one dimension");
    int64_t ranks = it->second;
    // A parameter's dimension may still be padded (--kiln-pad-dims: vocab
    // 50257 -> 50304): --kiln-propagate-sharding checks its padded size.
    const bool mayBePadded = what.rfind("parameter", 0) == 0;
    if (!mayBePadded && shape[d] % ranks != 0)
      return error(loc, "dimension " + std::to_string(d) + " of " + what +
                            " (" + std::to_string(shape[d]) +
                            ") does not split over mesh axis '" + axis +
                            "' (" + std::to_string(ranks) + " ranks): " +
                            std::to_string(shape[d]) + " / " +
                            std::to_string(ranks) + " is not whole; pad it "
                            "to " +
                            std::to_string((shape[d] / ranks + 1) * ranks) +
                            ", split another dimension, or give '" + axis +
                            "' a size that divides " +
                            std::to_string(shape[d]));
    // An axis of one rank splits nothing: the annotation stays in the
    // file, the program is the unsplit one.
    if (ranks > 1)
      out[d] = axis;
  }
  // A parameter's block on a rank is a slab of one dimension: that is how
  // initialisation and checkpoints lay it out.
  const auto splitDims = std::count_if(
      out.begin(), out.end(), [](const std::string &a) { return !a.empty(); });
  if (what.rfind("parameter", 0) == 0 && splitDims > 1)
    return error(spec.loc, "the sharding of " + what + " splits " +
                               std::to_string(splitDims) +
                               " dimensions; a parameter may be split along one "
                               "(split the others where it is used, with "
                               "shard(x, [...]))");
  return true;
}

// shard(x, [_, _, model]) -> x, annotated.
std::optional<Value> Sema::evaluateShard(const Expr &e, Scope &scope) {
  std::optional<Value> x = evaluate(*e.operands[0], scope);
  if (!x)
    return std::nullopt;
  std::optional<int> node = requireFloatTensor(*x, e.operands[0]->loc,
                                               "the value shard() annotates");
  if (!node)
    return std::nullopt;
  const Expr &list = *e.operands[1];
  ShardingSpec spec;
  spec.loc = list.loc;
  if (list.kind != Expr::Kind::List) {
    error(list.loc, "shard() takes a list of mesh axes, one per dimension, "
                    "'_' for an unsplit one: shard(x, [_, model])");
    return std::nullopt;
  }
  for (const ExprPtr &item : list.operands) {
    if (item->kind != Expr::Kind::Name) {
      error(item->loc, "expected a mesh axis or '_' in shard()'s list");
      return std::nullopt;
    }
    spec.dims.push_back(item->name);
    spec.dimLocs.push_back(item->loc);
  }
  TensorType type = typeOf(*node);
  std::vector<std::string> sharding;
  if (!evaluateSharding(spec, type.shape, "the value", sharding))
    return std::nullopt;
  int out = addNode(NodeKind::ShardingConstraint, {*node}, type, e.loc);
  graph_.nodes[out].sharding = std::move(sharding);
  return Value::ofTensor(out);
}

} // namespace kiln
