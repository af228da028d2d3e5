//===- CudaAttentionEmulation.h - CUDA vs CPU attention test helpers ------===//
//
// Shared by the attention emulation tests (CudaAttentionEmulationTest.cpp,
// CudaAttentionMaskEmulationTest.cpp): the test module of one attention op
// and the comparison of the CUDA kernels run on the host against the CPU
// kernels. The tolerances' reasoning is in CudaAttentionEmulationTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CODEGEN_CUDAATTENTIONEMULATION_H
#define KILN_TEST_UNIT_CODEGEN_CUDAATTENTIONEMULATION_H

#include "KernelRunner.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

// One attention op, forward (`backward` false: returns out, lse) or
// backward (returns dq, dk, dv, dslope, dbias from out and lse passed in, so
// both backends differentiate the same forward). q [2, 4, 37, D], k/v
// [2, 2, 53, D]; `elem` is f32 or bf16 (bf16: the f32 arguments are
// converted in and the results converted out, identically on both
// backends). The score region defaults to s - slope[h] * |i - j| + bias[j],
// the mask to j < len[b] and j + 3 <= i; `scoreBody` / `maskBody` replace
// them (statements over %s, %b, %h, %i, %j and captures %c0 slope [4],
// %c1 bias [53], %c2 len [2]).
std::string attentionModule(int d, const std::string &elem, bool backward,
                            const std::string &scoreBody = "",
                            const std::string &maskBody = "");

// Runs `module` on both backends; expects every result within `tolerance`
// (relative, at least 1 in magnitude) and non-finite values equal; returns
// the CUDA results. `sharedBudget`: the CUDA tile plans' (-1: kilnc's
// default archs').
std::vector<HostTensor> expectSame(const std::string &module,
                                   const std::vector<HostTensor> &args,
                                   double tolerance,
                                   const std::vector<const char *> &names,
                                   int64_t sharedBudget = -1);

// Replaces every occurrence of `from` in `text`.
void replaceAll(std::string &text, const std::string &from,
                const std::string &to);

} // namespace kiln::test

#endif // KILN_TEST_UNIT_CODEGEN_CUDAATTENTIONEMULATION_H
