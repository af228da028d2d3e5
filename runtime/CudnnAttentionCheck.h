//===- CudnnAttentionCheck.h - Verifier of KernelCall.cudnn_attention -----===//
//
// Part of the artifact verifier (ArtifactVerifier.cpp): a CudnnAttention
// (artifact.fbs) must describe exactly the buffers its KernelCall passes, in
// the layout cuDNN will be told (contiguous bf16 [B, H, T, D] etc.), within
// the limits Kiln's codegen marks (codegen/CudnnAttention.h), on a CUDA
// artifact. A backend may then hand these buffers to cuDNN without further
// checks: a wrong shape would make cuDNN read or write out of bounds.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDNNATTENTIONCHECK_H
#define KILN_RUNTIME_CUDNNATTENTIONCHECK_H

#include "runtime/Status.h"
#include "runtime/schema/artifact_generated.h"

#include <string>

namespace kiln::rt {

// `where` ("step[3] at m.kiln:4:5") prefixes every message.
Status checkCudnnAttention(const schema::Artifact &artifact,
                           const schema::KernelCall &call,
                           const std::string &where);

} // namespace kiln::rt

#endif // KILN_RUNTIME_CUDNNATTENTIONCHECK_H
