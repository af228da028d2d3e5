//===- Philox.h - The dropout generator's C text for generated kernels ----===//
//
// Dropout in generated kernels (kiln.attention's `dropout`) draws from
// Philox4x32-10 (codegen/PhiloxRandom.inc). The same C text is emitted into
// CPU and CUDA kernels, so a keep decision is a pure function of (seed,
// micro-step offset, b * H + h, i, j) on every target: the backward
// regenerates the forward's mask, and CPU and CUDA agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_PHILOX_H
#define KILN_CODEGEN_PHILOX_H

#include <cstdint>
#include <string>

namespace kiln {

// The generator and kiln_dropout_keep as C source for a kernel of `target`
// ("cpu": static inline; "cuda": __device__ __forceinline__). Guarded, so
// several kernels of one translation unit may each carry it.
std::string philoxKernelSource(const std::string &target);

// The integer the generator's word is compared with: floor(p * 2^32), so a
// kernel keeps an element with probability 1 - threshold / 2^32. `p` is in
// [0, 1) (the op's verifier).
uint32_t dropoutThreshold(double p);

} // namespace kiln

#endif // KILN_CODEGEN_PHILOX_H
