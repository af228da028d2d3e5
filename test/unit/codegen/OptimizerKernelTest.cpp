//===- OptimizerKernelTest.cpp - Numerics of the update kernels -----------===//
//
// Runs the generated CPU kernels of kiln.accumulate, kiln.grad_scale,
// kiln.adam (Adam and AdamW), kiln.sgd and kiln.sgd_momentum and compares
// them with torch.optim's update rules written out in double precision here.
// Tolerances: the kernels compute in f32 (as torch does on f32 tensors), so
// updates match to ~1e-5 relative; the norms the kernels sum in double over
// fixed chunks match the double reference to 1e-6 relative. A skipped step
// (non-finite scale) must leave every parameter and state value bit-identical.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace kiln::test;

namespace {

#define RUNNER(name, text)                                                     \
  KernelRunner name(text);                                                     \
  ASSERT_TRUE(name.ok()) << name.error()

// Deterministic values in [lo, hi) (a different stream from KernelTest's).
std::vector<float> values(size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float &x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = lo + (hi - lo) * static_cast<float>(s >> 40) / 16777216.0f;
  }
  return v;
}

void expectNear(const std::vector<float> &actual,
                const std::vector<double> &expected, double rtol, double atol,
                const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], atol + rtol * std::fabs(expected[i]))
        << what << " element " << i;
}

double sumSq(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x * x;
  return s;
}

// 5000 elements: more than one 4096-element chunk of the partial sums.
constexpr int kN = 5000;

const char *kAdamModule = R"mlir(
  func.func @step(%p: tensor<5000xf32>, %g: tensor<5000xf32>, %m: tensor<5000xf32>,
                  %v: tensor<5000xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>)
      -> (tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>) {
    %p1, %m1, %v1, %du, %pp = kiln.adam %p, %g, %m, %v, %lr, %t, %s
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = DECOUPLED,
         epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<5000xf32>
    return %p1, %m1, %v1, %du, %pp : tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>
  })mlir";

std::string adamModule(bool decoupled) {
  std::string text = kAdamModule;
  text.replace(text.find("DECOUPLED"), 9, decoupled ? "true" : "false");
  return text;
}

// torch.optim.AdamW (decoupled) / torch.optim.Adam (L2), on g * scale.
void checkAdam(bool decoupled) {
  RUNNER(r, adamModule(decoupled));
  auto p = values(kN, 1, -1, 1), g = values(kN, 2, -1, 1),
       m = values(kN, 3, -0.1f, 0.1f), v = values(kN, 4, 0, 0.1f);
  const double lr = 1e-2, t = 3, scale = 0.5;
  auto out = r.run({HostTensor::floats(p), HostTensor::floats(g),
                    HostTensor::floats(m), HostTensor::floats(v),
                    HostTensor::floats({(float)lr}), HostTensor::floats({3.0f}),
                    HostTensor::floats({(float)scale})});
  ASSERT_EQ(out.size(), 5u) << r.error();
  const double b1 = 0.9f, b2 = 0.95f, eps = 1e-8, wd = 0.1f;
  std::vector<double> ep, em, ev, delta;
  for (int i = 0; i < kN; ++i) {
    double gi = (double)g[i] * scale;
    if (!decoupled)
      gi += wd * p[i];
    double mi = b1 * m[i] + (1 - b1) * gi;
    double vi = b2 * v[i] + (1 - b2) * gi * gi;
    double pi = decoupled ? p[i] * (1 - lr * wd) : (double)p[i];
    double denom = std::sqrt(vi / (1 - std::pow(b2, t))) + eps;
    pi -= lr * (mi / (1 - std::pow(b1, t))) / denom;
    ep.push_back(pi);
    em.push_back(mi);
    ev.push_back(vi);
    delta.push_back(pi - p[i]);
  }
  expectNear(out[0].f, ep, 1e-5, 1e-6, "param");
  expectNear(out[1].f, em, 1e-5, 1e-7, "m");
  expectNear(out[2].f, ev, 1e-5, 1e-8, "v");
  // The update's own deltas are ~1e-2; f32 rounding of p makes them ~1e-4
  // relative, so the squared-norm check allows 1e-3.
  EXPECT_NEAR(out[3].f[0], sumSq(delta), 1e-3 * sumSq(delta)) << "update_sq";
  EXPECT_NEAR(out[4].f[0], sumSq(ep), 1e-5 * sumSq(ep)) << "param_sq";
}

TEST(OptimizerKernels, AdamWDecoupledDecay) { checkAdam(true); }

TEST(OptimizerKernels, AdamL2Decay) { checkAdam(false); }

// A NaN scale (the guard) writes nothing to param, m or v: bit-identical.
TEST(OptimizerKernels, AdamSkipsNonFiniteScale) {
  RUNNER(r, adamModule(true));
  auto p = values(kN, 5, -1, 1), g = values(kN, 6, -1, 1),
       m = values(kN, 7, -0.1f, 0.1f), v = values(kN, 8, 0, 0.1f);
  auto out = r.run({HostTensor::floats(p), HostTensor::floats(g),
                    HostTensor::floats(m), HostTensor::floats(v),
                    HostTensor::floats({1e-2f}), HostTensor::floats({1.0f}),
                    HostTensor::floats({NAN})});
  ASSERT_EQ(out.size(), 5u) << r.error();
  EXPECT_EQ(std::memcmp(out[0].f.data(), p.data(), kN * 4), 0) << "param";
  EXPECT_EQ(std::memcmp(out[1].f.data(), m.data(), kN * 4), 0) << "m";
  EXPECT_EQ(std::memcmp(out[2].f.data(), v.data(), kN * 4), 0) << "v";
  EXPECT_EQ(out[3].f[0], 0.0f) << "update_sq of a skipped step";
  std::vector<double> old(p.begin(), p.end());
  EXPECT_NEAR(out[4].f[0], sumSq(old), 1e-6 * sumSq(old));
}

const char *kMomentumModule = R"mlir(
  func.func @step(%p: tensor<5000xf32>, %g: tensor<5000xf32>, %b: tensor<5000xf32>,
                  %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>)
      -> (tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>) {
    %p1, %b1, %du, %pp = kiln.sgd_momentum %p, %g, %b, %lr, %t, %s
        {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = NESTEROV,
         weight_decay = 0.01 : f32} : tensor<5000xf32>
    return %p1, %b1, %du, %pp : tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>
  })mlir";

// torch.optim.SGD with momentum: the buffer is the first gradient at t = 1,
// then momentum * buf + (1 - dampening) * g.
void checkMomentum(bool nesterov, float t) {
  std::string text = kMomentumModule;
  text.replace(text.find("NESTEROV"), 8, nesterov ? "true" : "false");
  RUNNER(r, text);
  auto p = values(kN, 9, -1, 1), g = values(kN, 10, -1, 1),
       b = values(kN, 11, -0.5f, 0.5f);
  const double lr = 0.05, wd = 0.01f, mu = 0.9f, scale = 0.25;
  auto out = r.run({HostTensor::floats(p), HostTensor::floats(g),
                    HostTensor::floats(b), HostTensor::floats({(float)lr}),
                    HostTensor::floats({t}), HostTensor::floats({(float)scale})});
  ASSERT_EQ(out.size(), 4u) << r.error();
  std::vector<double> ep, eb;
  for (int i = 0; i < kN; ++i) {
    double gi = (double)g[i] * scale + wd * p[i];
    double buf = t == 1.0f ? gi : mu * b[i] + gi;
    double d = nesterov ? gi + mu * buf : buf;
    ep.push_back(p[i] - lr * d);
    eb.push_back(buf);
  }
  expectNear(out[0].f, ep, 1e-5, 1e-6, "param");
  expectNear(out[1].f, eb, 1e-5, 1e-6, "momentum");
}

TEST(OptimizerKernels, SgdMomentumFirstStep) { checkMomentum(false, 1.0f); }

TEST(OptimizerKernels, SgdMomentumLaterStep) { checkMomentum(false, 4.0f); }

TEST(OptimizerKernels, SgdNesterov) { checkMomentum(true, 4.0f); }

TEST(OptimizerKernels, PlainSgd) {
  RUNNER(r, R"mlir(
    func.func @step(%p: tensor<3x5xf32>, %g: tensor<3x5xf32>, %lr: tensor<f32>, %s: tensor<f32>)
        -> (tensor<3x5xf32>, tensor<f32>, tensor<f32>) {
      %p1, %du, %pp = kiln.sgd %p, %g, %lr, %s {weight_decay = 0.5 : f32} : tensor<3x5xf32>
      return %p1, %du, %pp : tensor<3x5xf32>, tensor<f32>, tensor<f32>
    })mlir");
  auto p = values(15, 12, -1, 1), g = values(15, 13, -1, 1);
  auto out = r.run({HostTensor::floats(p), HostTensor::floats(g),
                    HostTensor::floats({0.1f}), HostTensor::floats({1.0f})});
  ASSERT_EQ(out.size(), 3u) << r.error();
  std::vector<double> ep, delta;
  for (int i = 0; i < 15; ++i) {
    ep.push_back(p[i] - 0.1f * (g[i] + 0.5 * p[i]));
    delta.push_back(ep.back() - p[i]);
  }
  expectNear(out[0].f, ep, 1e-6, 1e-7, "param");
  EXPECT_NEAR(out[1].f[0], sumSq(delta), 1e-5 * sumSq(delta));
  EXPECT_NEAR(out[2].f[0], sumSq(ep), 1e-5 * sumSq(ep));
}

// clip_grad_norm_'s factor, 1 below the threshold, NaN for a non-finite loss
// or norm (the guard).
TEST(OptimizerKernels, GradScale) {
  RUNNER(r, R"mlir(
    func.func @step(%n: tensor<f32>, %l: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
      %0 = kiln.grad_scale %n, %l {max_norm = 1.0 : f32}
      %1 = kiln.grad_scale %n, %l {max_norm = 0.0 : f32}
      return %0, %1 : tensor<f32>, tensor<f32>
    })mlir");
  auto scales = [&](float norm, float loss) {
    auto out = r.run({HostTensor::floats({norm}), HostTensor::floats({loss})});
    return std::make_pair(out[0].f[0], out[1].f[0]);
  };
  auto [clipped, unclipped] = scales(4.0f, 2.0f);
  EXPECT_NEAR(clipped, 1.0 / (4.0 + 1e-6), 1e-7);
  EXPECT_EQ(unclipped, 1.0f);
  EXPECT_EQ(scales(0.5f, 2.0f).first, 1.0f);
  EXPECT_TRUE(std::isnan(scales(INFINITY, 2.0f).first));
  EXPECT_TRUE(std::isnan(scales(1.0f, NAN).first));
  EXPECT_TRUE(std::isnan(scales(1.0f, NAN).second));
}

TEST(OptimizerKernels, AccumulateInPlace) {
  RUNNER(r, R"mlir(
    func.func @step(%acc: tensor<7xf32>, %x: tensor<7xf32>) -> tensor<7xf32> {
      %0 = kiln.accumulate %acc, %x {scale = 0.25 : f32} : tensor<7xf32>
      return %0 : tensor<7xf32>
    })mlir");
  auto acc = values(7, 14, -1, 1), x = values(7, 15, -1, 1);
  auto out = r.run({HostTensor::floats(acc), HostTensor::floats(x)});
  ASSERT_EQ(out.size(), 1u) << r.error();
  std::vector<double> expected;
  for (int i = 0; i < 7; ++i)
    expected.push_back(acc[i] + 0.25 * x[i]);
  expectNear(out[0].f, expected, 1e-6, 1e-7, "acc");
}

} // namespace
