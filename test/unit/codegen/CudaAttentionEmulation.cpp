//===- CudaAttentionEmulation.cpp - CUDA vs CPU attention test helpers ----===//
//
// See CudaAttentionEmulation.h.
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionEmulation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>

namespace kiln::test {

std::string attentionModule(int d, const std::string &elem, bool backward,
                            const std::string &scoreBody,
                            const std::string &maskBody) {
  std::string text = R"mlir(
func.func @step(%qf: tensor<2x4x37xDxf32>, %kf: tensor<2x2x53xDxf32>, %vf: tensor<2x2x53xDxf32>,
                %slope: tensor<4xf32>, %bias: tensor<53xf32>, %len: tensor<2xi32>EXTRA_ARGS)
    -> (RESULT_TYPES) {
CONVERT_IN
BODY
CONVERT_OUT
  return RESULTS : RESULT_TYPES
})mlir";
  const std::string forward = R"mlir(
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %bias, %len) {scale = 0.11 : f32}
      : (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<4xf32>, tensor<53xf32>, tensor<2xi32>)
      -> (tensor<2x4x37xDxE>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
SCORE
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
MASK
    })mlir";
  const std::string grad = R"mlir(
  %dq, %dk, %dv, %dslope, %dbias = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %bias, %len) {scale = 0.11 : f32}
      : (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<2x4x37xDxE>, tensor<2x4x37xf32>, tensor<2x4x37xDxE>, tensor<4xf32>, tensor<53xf32>, tensor<2xi32>)
      -> (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<4xf32>, tensor<53xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
SCORE
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
MASK
    })mlir";
  // score = s - slope[h] * |i - j| + bias[j]
  const std::string score = R"(      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %bj = tensor.extract %c1[%j] : tensor<53xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %t = arith.subf %s, %pen : f32
      %r = arith.addf %t, %bj : f32
      kiln.yield %r : f32)";
  // keep = j < len[b] and j + 3 <= i
  const std::string mask = R"(      %n = tensor.extract %c2[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %c3 = arith.constant 3 : index
      %j3 = arith.addi %j, %c3 : index
      %band = arith.cmpi ule, %j3, %i : index
      %keep = arith.andi %inlen, %band : i1
      kiln.yield %keep : i1)";
  // (name, shape) of the element-typed values converted in and out.
  using Names = std::vector<std::pair<std::string, std::string>>;
  Names in = {{"q", "2x4x37"}, {"k", "2x2x53"}, {"v", "2x2x53"}};
  Names out;
  std::string results, resultTypes, extraArgs;
  if (backward) {
    in.push_back({"out", "2x4x37"});
    in.push_back({"dout", "2x4x37"});
    extraArgs = ", %outf: tensor<2x4x37xDxf32>, %lse: tensor<2x4x37xf32>, "
                "%doutf: tensor<2x4x37xDxf32>";
    out = {{"dq", "2x4x37"}, {"dk", "2x2x53"}, {"dv", "2x2x53"}};
    results = "%dq_r, %dk_r, %dv_r, %dslope, %dbias";
    resultTypes = "tensor<2x4x37xDxf32>, tensor<2x2x53xDxf32>, "
                  "tensor<2x2x53xDxf32>, tensor<4xf32>, tensor<53xf32>";
  } else {
    out = {{"out", "2x4x37"}};
    results = "%out_r, %lse";
    resultTypes = "tensor<2x4x37xDxf32>, tensor<2x4x37xf32>";
  }
  std::string convertIn, convertOut;
  auto shape = [&](const std::string &dims, const std::string &e) {
    return "tensor<" + dims + "xDx" + e + ">";
  };
  for (const auto &[name, dims] : in)
    convertIn += elem == "bf16"
                     ? "  %" + name + " = kiln.convert %" + name + "f : " +
                           shape(dims, "f32") + " -> " + shape(dims, "bf16") +
                           "\n"
                     : "";
  for (const auto &[name, dims] : out)
    convertOut += elem == "bf16"
                      ? "  %" + name + "_r = kiln.convert %" + name + " : " +
                            shape(dims, "bf16") + " -> " + shape(dims, "f32") +
                            "\n"
                      : "";
  auto replace = [&](const std::string &from, const std::string &to) {
    text = std::regex_replace(text, std::regex(from), to);
  };
  replace("EXTRA_ARGS", extraArgs);
  replace("RESULT_TYPES", resultTypes);
  replace("RESULTS", results);
  replace("CONVERT_IN", convertIn);
  replace("CONVERT_OUT", convertOut);
  replace("BODY", backward ? grad : forward);
  replace("SCORE", scoreBody.empty() ? score : scoreBody);
  replace("MASK", maskBody.empty() ? mask : maskBody);
  if (elem != "bf16") {
    // No conversions: the arguments and results are the op's own values.
    for (const auto &[name, dims] : in)
      replace("%" + name + "f\\b", "%" + name);
    for (const auto &[name, dims] : out)
      replace("%" + name + "_r\\b", "%" + name);
  }
  replace("xD", "x" + std::to_string(d));
  replace("xE>", "x" + elem + ">");
  return text;
}

std::vector<HostTensor> expectSame(const std::string &module,
                                   const std::vector<HostTensor> &args,
                                   double tolerance,
                                   const std::vector<const char *> &names,
                                   int64_t sharedBudget) {
  KernelRunner cpu(module, KernelBackend::Cpu);
  KernelRunner cuda(module, KernelBackend::CudaEmulated, /*fuse=*/false,
                    sharedBudget);
  EXPECT_TRUE(cpu.ok()) << cpu.error();
  EXPECT_TRUE(cuda.ok()) << cuda.error();
  if (!cpu.ok() || !cuda.ok())
    return {};
  std::vector<HostTensor> expected = cpu.run(args);
  std::vector<HostTensor> actual = cuda.run(args);
  EXPECT_EQ(actual.size(), expected.size());
  for (size_t r = 0; r < expected.size() && r < actual.size(); ++r) {
    SCOPED_TRACE(names[r]);
    EXPECT_EQ(actual[r].f.size(), expected[r].f.size());
    int mismatches = 0;
    for (size_t k = 0; k < expected[r].f.size() && mismatches < 10; ++k) {
      float e = expected[r].f[k], a = actual[r].f[k];
      bool same = std::isfinite(e)
                      ? std::fabs(a - e) <= tolerance * std::max(1.0f, std::fabs(e))
                      : (std::isnan(e) ? std::isnan(a) : a == e);
      EXPECT_TRUE(same) << "element " << k << ": " << a << " vs " << e;
      mismatches += !same;
    }
  }
  return actual;
}

void replaceAll(std::string &text, const std::string &from,
                const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

} // namespace kiln::test
