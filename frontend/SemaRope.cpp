//===- SemaRope.cpp - rope(x, theta = ..., scaling = ...) -----------------===//
//
// Rotary position embedding, Llama / Hugging Face convention, on x [..., T,
// D]: positions along dim -2, feature i paired with i + D/2. The frequencies
// inv_freq[i] = theta^(-2i/D) are computed here in double (rounded to f32 in
// the op) and, with `scaling = F`, rescaled as Llama 3.1 does
// (rope_type "llama3"): wavelengths beyond original_max_position /
// low_freq_factor are divided by F, those below original_max_position /
// high_freq_factor kept, and the ones between blended smoothly. Defaults are
// Llama 3.1's: low_freq_factor 1, high_freq_factor 4, original_max_position
// 8192.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include <cmath>

namespace kiln {

namespace {

const char *kUsage = "rope(x, theta = <number>, scaling = <factor>, low_freq_factor = "
                     "<number>, high_freq_factor = <number>, original_max_position = "
                     "<number>)";

struct RopeSettings {
  double theta = 10000.0;
  double scaling = 1.0; // 1: none
  double lowFreqFactor = 1.0, highFreqFactor = 4.0, originalMaxPosition = 8192.0;
};

std::vector<float> frequencies(int64_t d, const RopeSettings &r) {
  std::vector<float> out;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < d / 2; ++i) {
    double freq = std::pow(r.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    if (r.scaling != 1.0) {
      const double wavelen = 2 * pi / freq;
      const double lowWavelen = r.originalMaxPosition / r.lowFreqFactor;
      const double highWavelen = r.originalMaxPosition / r.highFreqFactor;
      if (wavelen > lowWavelen) {
        freq /= r.scaling;
      } else if (wavelen >= highWavelen) {
        const double smooth = (r.originalMaxPosition / wavelen - r.lowFreqFactor) /
                              (r.highFreqFactor - r.lowFreqFactor);
        freq = (1 - smooth) * freq / r.scaling + smooth * freq;
      }
    }
    out.push_back(static_cast<float>(freq));
  }
  return out;
}

} // namespace

std::optional<Value> Sema::evaluateRope(const Expr &e, Scope &scope) {
  const Expr *input = nullptr;
  RopeSettings settings;
  struct Setting {
    const char *name;
    double *value; // every setting is a positive number
    bool given = false;
  };
  Setting settingsList[] = {{"theta", &settings.theta},
                            {"scaling", &settings.scaling},
                            {"low_freq_factor", &settings.lowFreqFactor},
                            {"high_freq_factor", &settings.highFreqFactor},
                            {"original_max_position", &settings.originalMaxPosition}};
  for (size_t a = 0; a < e.operands.size(); ++a) {
    const Expr &arg = *e.operands[a];
    std::string key = e.keywords.empty() ? "" : e.keywords[a];
    if (key.empty()) {
      if (input) {
        error(arg.loc, std::string("rope takes x as its only positional argument; usage: ") +
                           kUsage);
        return std::nullopt;
      }
      input = &arg;
      continue;
    }
    Setting *setting = nullptr;
    for (Setting &s : settingsList)
      if (key == s.name)
        setting = &s;
    if (!setting) {
      error(arg.loc, "unknown argument '" + key +
                         "' of rope (expected theta, scaling, low_freq_factor, "
                         "high_freq_factor or original_max_position)");
      return std::nullopt;
    }
    if (setting->given) {
      error(arg.loc, "'" + key + "' is given twice");
      return std::nullopt;
    }
    setting->given = true;
    std::optional<Value> v = evaluate(arg, scope);
    if (!v)
      return std::nullopt;
    if (v->isTensor() || !std::isfinite(v->number.value) || v->number.value <= 0) {
      error(arg.loc, "rope's " + key + " must be a positive compile-time number, got " +
                         (v->isTensor() ? std::string("a tensor") : v->number.str()));
      return std::nullopt;
    }
    *setting->value = v->number.value;
  }
  if (!input) {
    error(e.loc, std::string("rope needs the tensor to rotate; usage: ") + kUsage);
    return std::nullopt;
  }
  if (settings.highFreqFactor <= settings.lowFreqFactor) {
    error(e.loc, "rope's high_freq_factor must be above its low_freq_factor");
    return std::nullopt;
  }
  std::optional<Value> x = evaluate(*input, scope);
  if (!x)
    return std::nullopt;
  std::optional<int> t = requireFloatTensor(*x, input->loc, "the input of rope");
  if (!t)
    return std::nullopt;
  const TensorType type = typeOf(*t);
  if (type.rank() < 2 || type.shape.back() % 2 != 0) {
    error(input->loc, "rope needs [..., positions, features] with an even number of "
                      "features, got " +
                          formatShape(type.shape));
    return std::nullopt;
  }
  int node = addNode(NodeKind::Rope, {*t}, type, e.loc);
  graph_.nodes[node].floats = frequencies(type.shape.back(), settings);
  return Value::ofTensor(node);
}

} // namespace kiln
