//===- CollectiveCheck.h - Verifier of collectives and ZeRO shards --------===//
//
// Part of the artifact verifier (ArtifactVerifier.cpp): a CollectiveCall
// runs over a mesh axis spanning every rank of the run, with F32 buffers in
// range, in place (an all-reduce) or from a buffer into another one R times
// smaller or larger (the axis' R ranks), and a ZeRO shard (Buffer.shard_axis)
// holds one rank's slice of its whole_shape. The backends then slice,
// gather and reduce without further checks.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COLLECTIVECHECK_H
#define KILN_RUNTIME_COLLECTIVECHECK_H

#include "runtime/Artifact.h"
#include "runtime/Status.h"
#include "runtime/schema/BufferRoles.h"
#include "runtime/schema/artifact_generated.h"

#include <string>
#include <vector>

namespace kiln::rt {

// Buffer `index` (whose BufferInfo is `info`), when it is a ZeRO shard.
Status checkShard(const schema::Artifact &artifact, uint32_t index,
                  const BufferInfo &info);

// `where` ("step[3] at m.kiln:4:5") prefixes every message.
Status checkCollective(const schema::Artifact &artifact,
                       const std::vector<BufferInfo> &infos,
                       const std::string &where,
                       const schema::CollectiveCall &call);

} // namespace kiln::rt

#endif // KILN_RUNTIME_COLLECTIVECHECK_H
