//===- Philox.cpp - The dropout generator's C text for generated kernels --===//
//
// PhiloxRandom.inc is embedded at configure time (codegen/CMakeLists.txt),
// so the text kernels carry and the text the unit tests compile are one file.
//
//===----------------------------------------------------------------------===//

#include "codegen/Philox.h"

#include "codegen/PhiloxSource.h"

#include <cmath>

namespace kiln {

std::string philoxKernelSource(const std::string &target) {
  std::string text = "#ifndef KILN_RNG_FN\n";
  text += target == "cuda" ? "#define KILN_RNG_FN __device__ __forceinline__\n"
                           : "#define KILN_RNG_FN static inline\n";
  text += "#endif\n";
  text += kPhiloxRandomText;
  return text;
}

uint32_t dropoutThreshold(double p) {
  // floor, not round: the Python oracle computes the same integer from the
  // f32 attribute.
  double t = std::floor(p * 4294967296.0);
  return t >= 4294967295.0 ? 4294967295u : static_cast<uint32_t>(t);
}

} // namespace kiln
