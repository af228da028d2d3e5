//===- CollectiveCheck.cpp - Verifier of collectives and ZeRO shards ------===//

#include "runtime/CollectiveCheck.h"

#include "runtime/Safetensors.h"

#include <set>

namespace kiln::rt {

namespace {

// The ranks along mesh axis `axis` of Artifact.mesh (the runtime splits a
// communicator for an axis that spans part of the ranks).
StatusOr<int64_t> meshAxisRanks(const schema::Artifact &artifact,
                                const std::string &axis, const std::string &what) {
  if (artifact.mesh())
    for (const schema::MeshAxis *a : *artifact.mesh())
      if (a->name() && a->name()->str() == axis && a->size() >= 1)
        return static_cast<int64_t>(a->size());
  return invalidArgument(what, " over mesh axis '", axis,
                         "', which Artifact.mesh does not have");
}

} // namespace

// A ZeRO shard (shard_axis): a parameter, gradient or optimizer state of
// f32, over an axis of Artifact.mesh, holding one slice per rank of its
// whole_shape.
Status checkShard(const schema::Artifact &artifact, uint32_t index,
                  const BufferInfo &info) {
  const schema::Buffer &buffer = *artifact.buffers()->Get(index);
  if (!isShard(buffer))
    return okStatus();
  std::string describe = detail::concat("buffer ", index, " ('", bufferName(buffer), "')");
  if (!schema::hasParameterLayout(buffer.role()))
    return invalidArgument(describe, " is a ", schema::EnumNameBufferRole(buffer.role()),
                           " with a shard_axis: only parameters, gradients and "
                           "optimizer state are sharded");
  if (buffer.dtype() != schema::DType_F32 || buffer.alias_of() != -1)
    return invalidArgument(describe, " has a shard_axis but is not an f32 buffer "
                           "with storage of its own");
  KILN_ASSIGN_OR_RETURN(int64_t ranks,
                        meshAxisRanks(artifact, buffer.shard_axis()->str(),
                                       describe + " is sharded"));
  if (!buffer.whole_shape())
    return invalidArgument(describe, " has a shard_axis but no whole_shape");
  std::vector<int64_t> whole = wholeShape(buffer);
  int64_t elements = 1;
  for (int64_t d : whole) {
    if (d < 1 || d > (int64_t(1) << 40) / elements)
      return invalidArgument(describe, " has whole_shape ", formatShape(whole),
                             ": not a shape of at most 2^40 elements");
    elements *= d;
  }
  if (elements != info.elements * ranks)
    return invalidArgument(describe, " holds ", info.elements,
                           " elements per rank, but its whole_shape ",
                           formatShape(whole), " over ", ranks,
                           " ranks needs ", elements / ranks);
  // Tensor parallelism: a block of one dimension, the others whole.
  int dim = buffer.shard_dim();
  if (dim == -1)
    return okStatus();
  std::vector<int64_t> shape = bufferShape(buffer);
  if (dim < 0 || dim >= (int)whole.size() || shape.size() != whole.size())
    return invalidArgument(describe, " has shard_dim ", dim, " for shape ",
                           formatShape(shape), " and whole_shape ",
                           formatShape(whole));
  for (size_t d = 0; d < whole.size(); ++d)
    if (shape[d] * ((int)d == dim ? ranks : 1) != whole[d])
      return invalidArgument(describe, " of shape ", formatShape(shape),
                             " is not block ", dim, " of its whole_shape ",
                             formatShape(whole), " over ", ranks, " ranks");
  return okStatus();
}

// A collective: an axis of Artifact.mesh, a known kind and reduction, and
// F32 buffers in range, each once; an all-reduce reduces them in place, the
// other kinds go from buffers[0] to buffers[1], one of them R times (the
// axis' ranks) the other.
Status checkCollective(const schema::Artifact &artifact,
                       const std::vector<BufferInfo> &infos,
                       const std::string &where,
                       const schema::CollectiveCall &call) {
  std::string axis = call.axis() ? call.axis()->str() : "";
  KILN_ASSIGN_OR_RETURN(int64_t ranks,
                        meshAxisRanks(artifact, axis, where + ": CollectiveCall"));
  if (call.kind() < schema::CollectiveKind_MIN ||
      call.kind() > schema::CollectiveKind_MAX)
    return invalidArgument(where, ": CollectiveCall has unknown kind ",
                           int(call.kind()));
  if (call.reduction() != schema::Reduction_Sum &&
      call.reduction() != schema::Reduction_Mean)
    return invalidArgument(where, ": CollectiveCall has unknown reduction ",
                           int(call.reduction()));
  if (!call.buffers() || call.buffers()->size() == 0)
    return invalidArgument(where, ": CollectiveCall has no buffers");
  std::set<uint32_t> seen;
  for (uint32_t b : *call.buffers()) {
    if (b >= infos.size())
      return invalidArgument(where, ": CollectiveCall buffer ", b,
                             " is out of range (", infos.size(), " buffers)");
    // A local shard copies 4-byte elements: f32, or i32 (an integer input
    // a tensor axis splits); the others reduce or gather f32.
    const schema::DType dtype = artifact.buffers()->Get(b)->dtype();
    if (dtype != schema::DType_F32 &&
        !(dtype == schema::DType_I32 && call.kind() == schema::CollectiveKind_LocalShard))
      return invalidArgument(where, ": CollectiveCall buffer ", b, " is not F32",
                             call.kind() == schema::CollectiveKind_LocalShard
                                 ? " or I32"
                                 : "");
    if (!seen.insert(b).second)
      return invalidArgument(where, ": CollectiveCall lists buffer ", b,
                             " twice");
  }
  if (call.kind() == schema::CollectiveKind_AllReduce)
    return okStatus();
  if (call.buffers()->size() != 2)
    return invalidArgument(where, ": ", schema::EnumNameCollectiveKind(call.kind()),
                           " CollectiveCall needs 2 buffers (in, out), has ",
                           call.buffers()->size());
  if (infos[call.buffers()->Get(0)].storage == infos[call.buffers()->Get(1)].storage)
    return invalidArgument(where, ": ", schema::EnumNameCollectiveKind(call.kind()),
                           " CollectiveCall reads and writes the same storage");
  int64_t in = infos[call.buffers()->Get(0)].elements,
          out = infos[call.buffers()->Get(1)].elements;
  bool gathers = call.kind() == schema::CollectiveKind_AllGather;
  if ((gathers ? in * ranks : out * ranks) != (gathers ? out : in))
    return invalidArgument(where, ": ", schema::EnumNameCollectiveKind(call.kind()),
                           " CollectiveCall from ", in, " to ", out,
                           " elements over ", ranks, " ranks: the ",
                           gathers ? "output" : "input",
                           " must hold one slice per rank");
  return okStatus();
}

} // namespace kiln::rt
