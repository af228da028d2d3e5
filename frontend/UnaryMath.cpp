//===- UnaryMath.cpp - The unary math builtins of the language ------------===//

#include "frontend/UnaryMath.h"

#include <cmath>

namespace kiln {

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const std::vector<UnaryMath> kUnaryMath = {
    {"exp", "kiln.exp", "exp(x)", [](double x) { return std::exp(x); }},
    {"log", "kiln.log", "log(x)", [](double x) { return std::log(x); }},
    {"tanh", "kiln.tanh", "tanh(x)", [](double x) { return std::tanh(x); }},
    {"sqrt", "kiln.sqrt", "sqrt(x)", [](double x) { return std::sqrt(x); }},
    {"sigmoid", "kiln.sigmoid", "sigmoid(x)", sigmoid},
    {"silu", "kiln.silu", "silu(x)", [](double x) { return x * sigmoid(x); }},
    {"relu", "kiln.relu", "relu(x)", [](double x) { return x < 0 ? 0.0 : x; }},
    {"sin", "kiln.sin", "sin(x)", [](double x) { return std::sin(x); }},
    {"cos", "kiln.cos", "cos(x)", [](double x) { return std::cos(x); }},
    {"square", "kiln.square", "square(x)", [](double x) { return x * x; }},
};

} // namespace

const std::vector<UnaryMath> &unaryMathBuiltins() { return kUnaryMath; }

const UnaryMath *findUnaryMath(std::string_view name) {
  for (const UnaryMath &m : kUnaryMath)
    if (name == m.name)
      return &m;
  return nullptr;
}

} // namespace kiln
