//===- GemmTuning.cpp - kiln-run --gemm-algos=timed: cuBLASLt algorithms timed ===//
//
// Part of the CUDA backend (CudaBackendImpl.h). cuBLASLt's heuristic ranks
// its algorithms for a GEMM from the shapes alone; for shapes it ranks badly
// (a few output tiles and a long K, an fp32 C added into, thin matrices) a
// lower-ranked algorithm can be much faster on the device at hand. Under
// --gemm-algos=timed each GemmPlan keeps up to kGemmCandidates algorithms
// (GemmAlgorithms.h), and at a program's first run (decideCalls) each GEMM:
//  1. takes the algorithm an earlier run on this machine chose for a GEMM
//     with its signature (the cache file, below), when the heuristic still
//     offers it; else
//  2. runs every candidate once (warm-up), then kReps times between two
//     events, on its real operands -- an accumulating GEMM (C += A B) on a
//     scratch C, so its real C is added into once, by the chosen algorithm
//     afterwards; without device memory for that scratch it keeps the
//     heuristic's first;
//  3. keeps the fastest when it takes at most kGemmTimedMargin of the
//     heuristic's first's time, else the first, and records the choice.
// After the run one line on stderr sums the program's choices, and the new
// ones are merged into `gemm-algos.tsv` in the kernel cache directory
// (JitCache::cudaCacheDir: one "device \t signature \t algorithm" line per
// GEMM, written to a temporary file and renamed), so later runs start with
// them and compute bit-identical results (an accumulating GEMM left at the
// heuristic's pick for want of memory for its scratch is not recorded: a
// later run with more free memory times it). A line that does not parse is
// skipped (the GEMM is timed again); a cache that cannot be written is said
// once and does not stop training.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackendImpl.h"

#include "runtime/cuda/JitCache.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kiln::rt::cuda {

namespace {

constexpr int kReps = 5;
constexpr const char *kCacheFile = "gemm-algos.tsv";

// Free device memory kept beside a scratch C (the context's own needs).
constexpr size_t kScratchHeadroom = size_t(256) << 20;

std::string cachePath() { return JitCache::cudaCacheDir() + "/" + kCacheFile; }

// "device \t signature" -> algorithm, from the lines of `path` that parse.
std::map<std::string, std::string> readChoices(const std::string &path) {
  std::map<std::string, std::string> choices;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t second = line.rfind('\t');
    size_t first = second == std::string::npos ? std::string::npos : line.find('\t');
    if (first == std::string::npos || first == second || second + 1 >= line.size())
      continue;
    choices[line.substr(0, second)] = line.substr(second + 1);
  }
  return choices;
}

void note(const std::string &text) { std::fprintf(stderr, "kiln-run: gemm: %s\n", text.c_str()); }

} // namespace

Status CudaBackend::Impl::tuneGemm(DeviceCall &call, GemmTuningTally &tally) {
  call.undecided = false;
  GemmPlan &plan = *call.gemm;
  if (!gemmChoicesLoaded) {
    gemmChoices = readChoices(cachePath());
    gemmChoicesLoaded = true;
  }
  const std::string key = deviceName + "\t" + plan.signature();
  if (auto known = gemmChoices.find(key); known != gemmChoices.end())
    if (std::optional<size_t> index = plan.findAlgorithm(known->second)) {
      plan.choose(*index);
      ++tally.cached;
      return okStatus();
    }
  const CudaDriver &d = *driver;
  CUdeviceptr c = call.c;
  if (plan.accumulates()) {
    // The candidates add into C: time them on a scratch C of its size.
    if (tuningScratchBytes < call.gemmResultBytes) {
      if (tuningScratch)
        KILN_RETURN_IF_ERROR(d.check(d.cuMemFree(tuningScratch), "cuMemFree",
                                     " (GEMM tuning scratch)"));
      tuningScratch = 0;
      tuningScratchBytes = 0;
      size_t free = 0, total = 0;
      KILN_RETURN_IF_ERROR(d.check(d.cuMemGetInfo(&free, &total), "cuMemGetInfo"));
      if (free < call.gemmResultBytes + kScratchHeadroom) {
        ++tally.skipped; // the heuristic's first, untimed
        return okStatus();
      }
      if (d.cuMemAlloc(&tuningScratch, call.gemmResultBytes) != CUDA_SUCCESS) {
        tuningScratch = 0; // free memory went to someone else meanwhile
        ++tally.skipped;
        return okStatus();
      }
      tuningScratchBytes = call.gemmResultBytes;
    }
    c = tuningScratch;
  }
  CUevent start = nullptr, stop = nullptr;
  KILN_RETURN_IF_ERROR(d.check(d.cuEventCreate(&start, 0), "cuEventCreate"));
  Status status = d.check(d.cuEventCreate(&stop, 0), "cuEventCreate");
  // A candidate cuBLASLt refuses at launch is out of the race (infinite
  // time); the heuristic's first must run, as it will in every step.
  std::vector<double> ms(plan.candidates(), std::numeric_limits<double>::infinity());
  for (size_t i = 0; status.ok() && i < plan.candidates(); ++i) {
    auto once = [&] {
      return plan.runCandidate(i, call.a, call.b, c, workspace, kGemmWorkspaceBytes, stream);
    };
    Status launched = once(); // warm-up: the first launch of a kernel loads it
    if (!launched.ok()) {
      if (i == 0)
        status = launched;
      continue;
    }
    status = d.check(d.cuEventRecord(start, stream), "cuEventRecord");
    for (int r = 0; status.ok() && r < kReps; ++r)
      status = once();
    if (status.ok())
      status = d.check(d.cuEventRecord(stop, stream), "cuEventRecord");
    if (status.ok())
      status = d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize",
                       " after timing " + call.where);
    float elapsed = 0;
    if (status.ok())
      status = d.check(d.cuEventElapsedTime(&elapsed, start, stop), "cuEventElapsedTime");
    if (status.ok())
      ms[i] = static_cast<double>(elapsed) / kReps;
  }
  if (stop)
    d.cuEventDestroy(stop);
  d.cuEventDestroy(start);
  KILN_RETURN_IF_ERROR(status);
  size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
  if (!(ms[best] <= kGemmTimedMargin * ms[0]))
    best = 0;
  plan.choose(best);
  ++tally.timed;
  tally.heuristicMs += ms[0];
  tally.chosenMs += ms[best];
  if (best != 0) {
    ++tally.changed;
    tally.gains.push_back({ms[0] - ms[best],
                           detail::concat(call.where, ": ", ms[0], " -> ", ms[best],
                                          " ms (candidate ", best + 1, " of ",
                                          plan.candidates(), ")")});
  }
  gemmChoices[key] = plan.algorithmText(best);
  gemmChoicesMade[key] = plan.algorithmText(best);
  return okStatus();
}

Status CudaBackend::Impl::finishGemmTuning(const DeviceProgram &program,
                                           const GemmTuningTally &tally) {
  if (tuningScratch) {
    KILN_RETURN_IF_ERROR(
        driver->check(driver->cuMemFree(tuningScratch), "cuMemFree", " (GEMM tuning scratch)"));
    tuningScratch = 0;
    tuningScratchBytes = 0;
  }
  if (tally.timed + tally.cached + tally.skipped == 0)
    return okStatus();
  std::string line = program.name + std::string(": ");
  if (tally.timed > 0)
    line += detail::concat(tally.timed, " GEMMs timed (up to ", kGemmCandidates,
                           " algorithms each), ", tally.changed,
                           " faster than the heuristic's pick: ", tally.heuristicMs, " -> ",
                           tally.chosenMs, " ms a run");
  if (tally.cached > 0)
    line += detail::concat(tally.timed > 0 ? "; " : "", tally.cached,
                           " GEMMs took the choice made before for their shape (in this run "
                           "or in ", cachePath(), ")");
  if (tally.skipped > 0)
    line += detail::concat(tally.timed + tally.cached > 0 ? "; " : "", tally.skipped,
                           " accumulating GEMMs kept the heuristic's pick (no device "
                           "memory for a scratch C to time them on)");
  note(line);
  std::vector<std::pair<double, std::string>> gains = tally.gains;
  std::sort(gains.begin(), gains.end(), [](const auto &x, const auto &y) { return x.first > y.first; });
  for (size_t i = 0; i < std::min<size_t>(gains.size(), 3); ++i)
    note("  " + gains[i].second);
  if (gemmChoicesMade.empty())
    return okStatus();
  // This run's choices over what the file holds now (other runs may have
  // written meanwhile), then the file replaced whole.
  const std::string path = cachePath();
  std::map<std::string, std::string> merged = readChoices(path);
  for (const auto &[key, algo] : gemmChoicesMade)
    merged[key] = algo;
  gemmChoicesMade.clear();
  const std::string temp = detail::concat(path, ".tmp.", ::getpid());
  std::ostringstream text;
  for (const auto &[key, algo] : merged)
    text << key << '\t' << algo << '\n';
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  out << text.str();
  out.close();
  if (!out || std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    note("could not write " + path + "; the next run times its GEMMs again");
  }
  return okStatus();
}

} // namespace kiln::rt::cuda
