//===- ExecutorTest.cpp - One step of a hand-built artifact, checked ------===//
//
// End to end below the trainer: the bigram artifact of TestArtifact.cpp
// (kernel, batched GEMM with a shared operand, kernel reading an alias,
// transposed GEMM, AdamW kernel reading a Constant) is compiled, executed
// once, and its loss, gradient, grad norm and updated weights are compared
// with a direct double-precision computation here.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/ParamInit.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/KernelCompiler.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

constexpr int64_t kBatch = 2, kSeq = 4, kVocab = 16, kTokens = kBatch * kSeq;

TEST(ExecutorTest, BigramStepMatchesReference) {
  auto loaded = Artifact::loadBytes(
      serializeArtifact(bigramArtifact(kBatch, kSeq, kVocab)), "bigram.kart");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Artifact &artifact = **loaded;

  cpu::KernelCompilerOptions options =
      cpu::KernelCompilerOptions::fromEnvironment();
  options.cacheDir = makeTempDir();
  auto kernels = cpu::KernelCompiler(options).load(artifact);
  ASSERT_TRUE(kernels.ok()) << kernels.status().message();
  auto arena = cpu::Arena::create(artifact);
  ASSERT_TRUE(arena.ok());
  cpu::Arena &mem = **arena;

  // Aliases share storage; the constant was copied in.
  EXPECT_EQ(mem.data(13), mem.data(4));
  EXPECT_EQ(*mem.as<float>(14), 0.01f);
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(mem.data(i)) % 64, 0u);

  float *w = mem.as<float>(2);
  initializeParameter(*artifact.buffer(2).init(), "W", /*seed=*/0, w,
                      kVocab * kVocab);
  std::vector<float> w0(w, w + kVocab * kVocab);
  int32_t tokens[kTokens] = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t targets[kTokens] = {2, 3, 4, 5, 6, 7, 8, 9};
  std::copy(tokens, tokens + kTokens, mem.as<int32_t>(0));
  std::copy(targets, targets + kTokens, mem.as<int32_t>(1));
  const float lr = 0.01f;
  *mem.as<float>(10) = lr;
  *mem.as<float>(11) = 1.0f;

  auto executor = cpu::Executor::create(artifact, **kernels, mem, nullptr);
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  ASSERT_TRUE((*executor)->run(ProgramKind::kStep).ok());
  // Loss and gradient come from "step"; parameters must not move yet.
  ASSERT_EQ(std::memcmp(w, w0.data(), w0.size() * sizeof(float)), 0);
  ASSERT_TRUE((*executor)->run(ProgramKind::kUpdate).ok());

  // Reference: logits[i] = W0[tokens[i]] (one-hot @ W), cross-entropy,
  // dW[v] = sum over i with tokens[i] == v of (softmax - onehot) / N.
  double loss = 0;
  std::vector<double> grad(kVocab * kVocab, 0.0);
  for (int i = 0; i < kTokens; ++i) {
    const float *row = &w0[tokens[i] * kVocab];
    double mx = *std::max_element(row, row + kVocab), sum = 0;
    for (int j = 0; j < kVocab; ++j)
      sum += std::exp(row[j] - mx);
    double lse = mx + std::log(sum);
    loss += lse - row[targets[i]];
    for (int j = 0; j < kVocab; ++j)
      grad[tokens[i] * kVocab + j] +=
          (std::exp(row[j] - lse) - (j == targets[i])) / kTokens;
  }
  loss /= kTokens;
  EXPECT_NEAR(*mem.as<float>(5), loss, 1e-5);
  EXPECT_NEAR(loss, std::log(double(kVocab)), 0.05); // near-uniform at init

  double norm = 0;
  const float *g = mem.as<float>(7);
  for (int i = 0; i < kVocab * kVocab; ++i) {
    ASSERT_NEAR(g[i], grad[i], 1e-6) << "dW[" << i << "]";
    norm += grad[i] * grad[i];
  }
  EXPECT_NEAR(*mem.as<float>(12), std::sqrt(norm), 1e-5);

  // First AdamW step: bias-corrected m/sqrt(v) = g/|g|.
  for (int i = 0; i < kVocab * kVocab; ++i) {
    double p = w0[i] * (1 - lr * 0.01);
    if (grad[i] != 0)
      p -= lr * grad[i] / (std::fabs(grad[i]) + 1e-8);
    ASSERT_NEAR(w[i], p, 1e-6) << "W[" << i << "]";
  }
}

} // namespace
} // namespace kiln::rt::test
