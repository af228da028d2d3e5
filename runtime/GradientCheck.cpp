//===- GradientCheck.cpp - Finite-difference check of an artifact's gradients //
//
// runGradientCheck:
//   1. load + verify the artifact; open the data when the model has inputs
//      and cut the batch of step 0 (the loss is a function of the
//      parameters only once the batch is fixed);
//   2. compile the kernels, initialise the parameters from --seed;
//   3. checkGradients over every parameter (algorithm in GradientCheck.h),
//      each loss evaluation one run of the "step" program (forward +
//      backward; the optimizer is the separate "update" program, which
//      never runs here).
//
//===----------------------------------------------------------------------===//

#include "runtime/GradientCheck.h"

#include "runtime/Artifact.h"
#include "runtime/PaddedLayout.h"
#include "runtime/ParamInit.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainingData.h"
#include "runtime/TrainingSession.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

namespace kiln::rt {

namespace {

// Distinguishes the sampling stream from the initialisation stream of the
// same parameter (both start from parameterSeed).
constexpr uint64_t kSamplingStream = 0x6a09e667f3bcc909ull;

// A uniform draw from [0, bound) without modulo bias worth mentioning
// (Lemire's multiply-shift), portable unlike std::uniform_int_distribution.
int64_t drawBelow(std::mt19937_64 &rng, int64_t bound) {
  return static_cast<int64_t>(
      (static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(bound)) >>
      64);
}

// Flat row-major index -> "[i, j, k]".
std::string formatEntry(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return formatShape(index);
}

} // namespace

int64_t GradientCheckReport::failures() const {
  return std::count_if(parameters.begin(), parameters.end(), [](const ParameterCheck &p) {
    return !p.ok && !p.belowResolution;
  });
}

int64_t GradientCheckReport::belowResolution() const {
  return std::count_if(parameters.begin(), parameters.end(),
                       [](const ParameterCheck &p) { return p.belowResolution; });
}

std::vector<int64_t> sampleEntries(int64_t elements, int64_t count,
                                   uint64_t seed, std::string_view name) {
  std::vector<int64_t> entries;
  if (count >= elements) {
    for (int64_t i = 0; i < elements; ++i)
      entries.push_back(i);
    return entries;
  }
  // Floyd: for j in [n - k, n), draw t in [0, j]; take t unless taken, else j.
  std::mt19937_64 rng(parameterSeed(seed, name) ^ kSamplingStream);
  std::set<int64_t> chosen;
  for (int64_t j = elements - count; j < elements; ++j) {
    int64_t t = drawBelow(rng, j + 1);
    chosen.insert(chosen.count(t) ? j : t);
  }
  entries.assign(chosen.begin(), chosen.end());
  return entries;
}

double gradientRelativeError(const std::vector<double> &finiteDifferences,
                             const std::vector<double> &gradients) {
  double diff = 0, fdNorm = 0, gradNorm = 0;
  for (size_t i = 0; i < gradients.size(); ++i) {
    double d = finiteDifferences[i] - gradients[i];
    diff += d * d;
    fdNorm += finiteDifferences[i] * finiteDifferences[i];
    gradNorm += gradients[i] * gradients[i];
  }
  return std::sqrt(diff) / (std::sqrt(gradNorm) + std::sqrt(fdNorm) + 1e-3);
}

StatusOr<GradientCheckReport>
checkGradients(const std::vector<CheckedParameter> &parameters,
               const LossFunction &loss, const GradientCheckOptions &options) {
  GradientCheckReport report;
  report.step = options.step;
  report.tolerance = options.tolerance;

  // 1. Entries to check.
  std::vector<std::vector<int64_t>> entries; // row-major in p.shape
  std::vector<std::vector<int64_t>> offsets; // the same, in the buffer
  for (const CheckedParameter &p : parameters) {
    entries.push_back(sampleEntries(p.elements, options.entriesPerParameter,
                                    options.seed, p.name));
    offsets.push_back(entries.back());
    if (!p.storageShape.empty())
      for (int64_t &e : offsets.back())
        e = paddedOffset(e, p.shape, p.storageShape);
  }

  // 2. The loss and the analytic gradients at the unperturbed point (later
  //    evaluations overwrite the gradient buffers).
  KILN_ASSIGN_OR_RETURN(report.loss, loss());
  if (!std::isfinite(report.loss))
    return failedPrecondition("the loss is ", report.loss,
                              " before any perturbation; finite differences "
                              "of it mean nothing");
  const float lossF = static_cast<float>(report.loss);
  report.resolution =
      (std::nextafter(lossF, INFINITY) - lossF) / (2 * options.step);
  std::vector<std::vector<double>> gradients(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i)
    for (int64_t e : offsets[i])
      gradients[i].push_back(parameters[i].gradient[e]);

  // 3. + 4. Central differences, compared per parameter.
  for (size_t i = 0; i < parameters.size(); ++i) {
    const CheckedParameter &p = parameters[i];
    std::vector<double> fd;
    for (int64_t e : offsets[i]) {
      const float original = p.values[e];
      const float plus = static_cast<float>(original + options.step);
      const float minus = static_cast<float>(original - options.step);
      p.values[e] = plus;
      StatusOr<double> lossPlus = loss();
      p.values[e] = minus;
      StatusOr<double> lossMinus = lossPlus.ok() ? loss() : lossPlus;
      p.values[e] = original;
      if (!lossMinus.ok())
        return lossMinus.status();
      fd.push_back((*lossPlus - *lossMinus) /
                   (static_cast<double>(plus) - static_cast<double>(minus)));
    }
    ParameterCheck check;
    check.name = p.name;
    check.shape = p.shape;
    check.entries = static_cast<int64_t>(fd.size());
    check.relativeError = gradientRelativeError(fd, gradients[i]);
    // Written so that a NaN error (a non-finite loss nearby) fails.
    check.ok = check.relativeError <= options.tolerance;
    double worst = -1;
    for (size_t k = 0; k < fd.size(); ++k) {
      double d = std::fabs(fd[k] - gradients[i][k]);
      if (!(d <= worst)) { // NaN counts as worst
        worst = std::isnan(d) ? INFINITY : d;
        check.worstEntry = entries[i][k];
        check.worstFiniteDifference = fd[k];
        check.worstGradient = gradients[i][k];
      }
    }
    // `worst` is finite here only if every difference was (NaN counts as
    // infinite above).
    check.belowResolution =
        !check.ok && worst <= GradientCheckReport::kResolutionMargin * report.resolution;
    report.parameters.push_back(std::move(check));
  }
  return report;
}

std::string formatGradientCheckReport(const GradientCheckReport &report) {
  size_t nameWidth = 4, shapeWidth = 5;
  for (const ParameterCheck &p : report.parameters) {
    nameWidth = std::max(nameWidth, p.name.size());
    shapeWidth = std::max(shapeWidth, formatShape(p.shape).size());
  }
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof line,
                "gradient check at loss %.6f: central differences with "
                "h = %g (resolution %.1e), tolerance %g\n",
                report.loss, report.step, report.resolution, report.tolerance);
  os << line;
  for (const ParameterCheck &p : report.parameters) {
    std::snprintf(line, sizeof line, "  %-*s %-*s %6lld entries  rel err %.2e  %s",
                  static_cast<int>(nameWidth), p.name.c_str(),
                  static_cast<int>(shapeWidth), formatShape(p.shape).c_str(),
                  static_cast<long long>(p.entries), p.relativeError,
                  p.ok ? "ok" : p.belowResolution ? "below resolution" : "FAIL");
    os << line;
    if (!p.ok) {
      std::snprintf(line, sizeof line,
                    " (worst entry %s: finite difference %.6g, gradient %.6g",
                    formatEntry(p.worstEntry, p.shape).c_str(),
                    p.worstFiniteDifference, p.worstGradient);
      os << line;
      if (p.belowResolution)
        os << "; every difference within "
           << GradientCheckReport::kResolutionMargin
           << "x the resolution: rounding, not checked at this h";
      os << ')';
    }
    os << '\n';
  }
  const int64_t n = static_cast<int64_t>(report.parameters.size());
  const int64_t below = report.belowResolution();
  char h[32];
  std::snprintf(h, sizeof h, "%g", report.step);
  if (report.failures() > 0)
    os << "gradient check: FAIL (" << report.failures() << " of " << n << " parameters)\n";
  else if (below == n)
    os << "gradient check: NOTHING CHECKED (all " << n << " parameters below the "
       << "resolution at h = " << h << "; try a larger --grad-step)\n";
  else if (below > 0)
    os << "gradient check: PASS (" << n - below << " of " << n << " parameters; " << below
       << " below the resolution at h = " << h << ", not checked: a larger --grad-step "
       << "checks them)\n";
  else
    os << "gradient check: PASS\n";
  return os.str();
}

StatusOr<GradientCheckReport> runGradientCheck(const RunOptions &options,
                                               FILE *out) {
  // 1. The artifact and the batch of step 0 (zeros without inputs: unread).
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> loaded,
                        Artifact::loadFile(options.artifactPath));
  const int64_t batch = loaded->batch(), seq = loaded->seq();
  KILN_ASSIGN_OR_RETURN(TrainingData data, openTrainingData(*loaded, options));
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  if (data.train)
    KILN_RETURN_IF_ERROR(data.train->fill(tokens.data(), targets.data()));
  data::TspBatch tspBatch;
  if (data.tsp)
    data.tsp->fill(tspBatch);

  // 2. Kernels and initial parameters.
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingSession> session,
      TrainingSession::create(std::move(loaded), options.seed));
  if (!options.quiet)
    printKernelLoad(session->backend().kernelLoad(), out);
  const Artifact &artifact = session->artifact();

  // 3. Every parameter with its gradient buffer (matched by name).
  std::vector<CheckedParameter> parameters;
  std::vector<std::pair<uint32_t, uint32_t>> checkedBuffers; // parameter, gradient
  for (uint32_t p : session->roles().parameters) {
    const schema::Buffer &buffer = artifact.buffer(p);
    CheckedParameter checked;
    checked.name = bufferName(buffer);
    checked.shape = logicalShape(buffer);
    // The host view: the storage itself on the CPU, a mirror on a GPU
    // (uploaded before and downloaded after every evaluation below).
    KILN_RETURN_IF_ERROR(session->backend().download(p));
    checked.values = static_cast<float *>(session->hostData(p));
    checked.elements = shapeElements(checked.shape);
    if (isPadded(buffer))
      checked.storageShape = wholeShape(buffer); // a one-rank ZeRO slice is whole
    for (uint32_t g : session->roles().gradients)
      if (bufferName(artifact.buffer(g)) == checked.name) {
        checked.gradient = static_cast<const float *>(session->hostData(g));
        checkedBuffers.push_back({p, g});
      }
    if (!checked.gradient)
      return failedPrecondition(artifact.name(), ": parameter '", checked.name,
                                "' has no Gradient buffer to check");
    parameters.push_back(std::move(checked));
  }
  if (parameters.empty())
    return failedPrecondition(artifact.name(),
                              ": the model has no parameters to check");
  GradientCheckOptions checkOptions;
  checkOptions.entriesPerParameter = options.checkGrads;
  checkOptions.seed = options.seed;
  if (options.gradStep > 0)
    checkOptions.step = options.gradStep;
  // Only "step" (forward + backward) runs: it reads the parameters and
  // writes loss and gradients, never the parameters, so every evaluation
  // sees exactly the perturbed values. (With grad_accum K one run yields
  // loss/K and gradients/K: the relative error is scale-free.)
  LossFunction loss = [&]() -> StatusOr<double> {
    for (auto [p, g] : checkedBuffers)
      KILN_RETURN_IF_ERROR(session->upload(p));
    KILN_RETURN_IF_ERROR(session->beginStep());
    if (data.tsp) {
      KILN_RETURN_IF_ERROR(session->runMicroStep(tspInputs(tspBatch)));
    } else {
      KILN_RETURN_IF_ERROR(session->runMicroStep(tokens.data(), targets.data()));
    }
    for (auto [p, g] : checkedBuffers)
      KILN_RETURN_IF_ERROR(session->backend().download(g));
    return static_cast<double>(session->loss());
  };
  return checkGradients(parameters, loss, checkOptions);
}

} // namespace kiln::rt
