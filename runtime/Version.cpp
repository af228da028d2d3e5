//===- Version.cpp - What every Kiln tool's --version prints --------------===//

#include "runtime/Version.h"

#include "runtime/schema/ArtifactVersion.h"

#include <cuda.h>

#ifndef KILN_VERSION
#error "KILN_VERSION is set by runtime/CMakeLists.txt from the project version"
#endif

namespace kiln::rt {

std::string versionText(const std::string &tool) {
  return tool + " (Kiln) " KILN_VERSION "\n  artifact format " +
         std::to_string(schema::kArtifactVersion) + "\n  CUDA " +
         std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) +
         " headers (the driver, NVRTC, cuBLASLt and cuDNN are loaded at run time)\n";
}

} // namespace kiln::rt
