//===- AttentionDispatch.h - kiln-run --attention=auto|kiln|cudnn ---------===//
//
// Who runs an attention KernelCall that carries a cudnn_attention (a plain
// causal / key-length attention cuDNN's fused SDPA computes exactly):
//   auto   time both on the real buffers at the first run of each program
//          and keep the faster per call; the generated kernel when cuDNN is
//          missing or refuses the graph (a one-line note says why);
//   kiln   always the generated kernel;
//   cudnn  always cuDNN: an error, with the reason, when it cannot (a CPU
//          artifact, no GPU, libcudnn missing, the graph refused).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ATTENTIONDISPATCH_H
#define KILN_RUNTIME_ATTENTIONDISPATCH_H

#include "runtime/Status.h"

#include <string>

namespace kiln::rt {

enum class AttentionDispatch { kAuto, kKiln, kCudnn };

inline StatusOr<AttentionDispatch> parseAttentionDispatch(const std::string &text) {
  if (text == "auto")
    return AttentionDispatch::kAuto;
  if (text == "kiln")
    return AttentionDispatch::kKiln;
  if (text == "cudnn")
    return AttentionDispatch::kCudnn;
  return invalidArgument("--attention: unknown value '", text,
                         "' (expected auto, kiln or cudnn)");
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_ATTENTIONDISPATCH_H
