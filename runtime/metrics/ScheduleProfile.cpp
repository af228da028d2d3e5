//===- ScheduleProfile.cpp - Where the step's time goes -------------------===//

#include "runtime/metrics/ScheduleProfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>

namespace kiln::rt {

std::string describeScheduleEntry(const schema::Artifact &artifact,
                                  const schema::Step &step, double *gemmFlops) {
  *gemmFlops = 0;
  if (const schema::GemmCall *g = step.op_as_GemmCall()) {
    *gemmFlops = 2.0 * g->m() * g->n() * g->k() * g->batch();
    std::string text = detail::concat("gemm ", g->m(), "x", g->n(), "x",
                                      g->k());
    if (g->batch() > 1)
      text += detail::concat(" x", g->batch());
    if (g->trans_a() || g->trans_b())
      text += std::string(" (") + (g->trans_a() ? "A^T" : "") +
              (g->trans_a() && g->trans_b() ? "," : "") +
              (g->trans_b() ? "B^T" : "") + ")";
    return text;
  }
  if (const schema::CollectiveCall *c = step.op_as_CollectiveCall())
    return detail::concat("all_reduce ",
                          c->reduction() == schema::Reduction_Mean ? "mean"
                                                                   : "sum",
                          " of ", c->buffers()->size(), " buffers over '",
                          c->axis()->str(), "'");
  const schema::KernelCall *call = step.op_as_KernelCall();
  const schema::Kernel &kernel = *artifact.kernels()->Get(call->kernel());
  std::string text = "kernel " + kernel.entry()->str();
  if (kernel.ops() && kernel.ops()->size() > 0)
    text += " [" + kernel.ops()->str() + "]";
  return text;
}

namespace {

// The GFLOP/s column: `flops` per run over `runs` runs in `seconds`, or
// "-" for an entry without GEMM FLOPs.
std::string gflopsPerSecond(double flops, double runs, double seconds) {
  if (flops <= 0 || seconds <= 0)
    return "       -";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%8.2f", flops * runs / seconds * 1e-9);
  return buf;
}

} // namespace

std::string formatScheduleProfile(const Artifact &artifact,
                                  ProgramKind program,
                                  const ScheduleTiming &timing,
                                  int64_t runsPerStep, size_t top) {
  const std::vector<double> &entrySeconds = timing.seconds;
  // Timed steps: fractional when a step's first run was not timed.
  double steps = double(timing.runs) / double(std::max<int64_t>(1, runsPerStep));
  const auto &schedule = *artifact.program(program)->schedule();
  double total = std::accumulate(entrySeconds.begin(), entrySeconds.end(), 0.0);
  double gemmTotal = 0;
  std::vector<size_t> order(entrySeconds.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entrySeconds[a] > entrySeconds[b];
  });
  // Each entry described once: "gemm MxNxK ..." / "kernel k_... [ops]" and
  // its GEMM FLOPs per run.
  std::vector<std::string> whats(entrySeconds.size());
  std::vector<double> flopsOf(entrySeconds.size(), 0.0);
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    whats[i] = describeScheduleEntry(artifact.root(), *schedule.Get(i), &flopsOf[i]);
    if (schedule.Get(i)->op_as_GemmCall())
      gemmTotal += entrySeconds[i];
  }

  char line[512];
  std::string out;
  std::snprintf(line, sizeof(line),
                "profile of program '%s': %g timed steps, %.2f ms/step (GEMMs "
                "%.1f%%, kernels %.1f%%), %zu entries\n",
                artifact.program(program)->name()->c_str(),
                steps,
                steps > 0 ? total * 1e3 / steps : 0.0,
                total > 0 ? 100 * gemmTotal / total : 0.0,
                total > 0 ? 100 * (total - gemmTotal) / total : 0.0,
                entrySeconds.size());
  out += line;
  out += "   time%  ms/step  GFLOP/s  entry  what (where)\n";
  for (size_t r = 0; r < std::min(top, order.size()); ++r) {
    size_t i = order[r];
    const schema::Step &step = *schedule.Get(i);
    double seconds = entrySeconds[i];
    std::string rate = gflopsPerSecond(flopsOf[i], double(timing.runs), seconds);
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f %s  %5zu  %s (%s)\n",
                  total > 0 ? 100 * seconds / total : 0.0,
                  steps > 0 ? seconds * 1e3 / steps : 0.0, rate.c_str(), i,
                  whats[i].c_str(),
                  step.location() ? step.location()->c_str() : "?");
    out += line;
  }

  // The same kernel often runs at many entries (once per layer); the sum
  // per kernel says which emitter to make faster.
  std::map<std::string, std::pair<double, int>> byWhat;
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    byWhat[whats[i]].first += entrySeconds[i];
    byWhat[whats[i]].second += 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(
      byWhat.begin(), byWhat.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  out += "   time%  ms/step  entries  what (summed over entries)\n";
  for (size_t r = 0; r < std::min(top, sorted.size()); ++r) {
    const auto &[what, stat] = sorted[r];
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f  %7d  %s\n",
                  total > 0 ? 100 * stat.first / total : 0.0,
                  steps > 0 ? stat.first * 1e3 / steps : 0.0, stat.second,
                  what.c_str());
    out += line;
  }

  // Per model-file line: what a person edits. An entry's location is the
  // line of the op it came from (a fused kernel's: its first member's).
  std::map<std::string, std::tuple<double, int, double>> byLine; // s, entries, flops
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    const schema::Step &step = *schedule.Get(i);
    auto &[seconds, entries, lineFlops] =
        byLine[step.location() ? step.location()->str() : "?"];
    seconds += entrySeconds[i];
    entries += 1;
    lineFlops += flopsOf[i];
  }
  std::vector<std::pair<std::string, std::tuple<double, int, double>>> lines(
      byLine.begin(), byLine.end());
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) {
    return std::get<0>(a.second) > std::get<0>(b.second);
  });
  out += "   time%  ms/step  GFLOP/s  entries  model line\n";
  for (size_t r = 0; r < std::min(top, lines.size()); ++r) {
    const auto &[where, stat] = lines[r];
    const auto &[seconds, entries, flops] = stat;
    std::string rate = gflopsPerSecond(flops, double(timing.runs), seconds);
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f %s  %7d  %s\n",
                  total > 0 ? 100 * seconds / total : 0.0,
                  steps > 0 ? seconds * 1e3 / steps : 0.0, rate.c_str(), entries,
                  where.c_str());
    out += line;
  }
  return out;
}

} // namespace kiln::rt
