//===- Version.h - What every Kiln tool's --version prints ----------------===//
//
// Kiln's version (the CMake project's), the artifact format the tools write
// and read (schema/ArtifactVersion.h), and the CUDA toolkit the runtime was
// built against (its headers; the driver, NVRTC, cuBLASLt, cuDNN and NCCL
// are loaded at run time). kilnc and kiln-opt add the LLVM / MLIR they link.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_VERSION_H
#define KILN_RUNTIME_VERSION_H

#include <string>

namespace kiln::rt {

// "kiln-run (Kiln) 0.1.0\n  artifact format 9\n  CUDA 13.0 headers ...\n".
std::string versionText(const std::string &tool);

} // namespace kiln::rt

#endif // KILN_RUNTIME_VERSION_H
