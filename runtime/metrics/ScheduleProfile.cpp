//===- ScheduleProfile.cpp - Where the step's time goes -------------------===//

#include "runtime/metrics/ScheduleProfile.h"

#include "runtime/schema/DTypeBytes.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

namespace kiln::rt {

double attentionFlops(const schema::CudnnAttention &a) {
  double pairs = double(a.q_len()) * double(a.kv_len());
  if (a.causal()) // query i keeps keys j <= i + S - T: T (S - T + 1) + T (T - 1) / 2 pairs
    pairs = double(a.q_len()) * double(a.kv_len() - a.q_len() + 1) +
            double(a.q_len()) * double(a.q_len() - 1) / 2;
  double perPair = a.backward() ? 3.0 * a.head_dim() + 2.0 * a.value_dim()
                                : double(a.head_dim()) + double(a.value_dim());
  return 2.0 * double(a.batch()) * double(a.heads()) * pairs * perPair;
}

EntryWork describeScheduleEntry(const Artifact &artifact, const schema::Step &step) {
  EntryWork work;
  auto bytesOf = [&](int64_t buffer) {
    return buffer >= 0 ? double(artifact.bufferInfo(static_cast<uint32_t>(buffer)).bytes) : 0.0;
  };
  if (const schema::GemmCall *g = step.op_as_GemmCall()) {
    work.flops = 2.0 * g->m() * g->n() * g->k() * g->batch();
    work.bytes = bytesOf(g->a()) + bytesOf(g->b()) + bytesOf(g->c()) * (g->accumulate() ? 2 : 1) +
                 bytesOf(g->bias()) + bytesOf(g->aux());
    work.what = detail::concat("gemm ", g->m(), "x", g->n(), "x", g->k());
    if (g->batch() > 1)
      work.what += detail::concat(" x", g->batch());
    if (g->trans_a() || g->trans_b())
      work.what += std::string(" (") + (g->trans_a() ? "A^T" : "") +
                   (g->trans_a() && g->trans_b() ? "," : "") + (g->trans_b() ? "B^T" : "") + ")";
    return work;
  }
  if (const schema::CollectiveCall *c = step.op_as_CollectiveCall()) {
    const char *reduction = c->reduction() == schema::Reduction_Mean ? "mean" : "sum";
    std::string axis = c->axis()->str();
    switch (c->kind()) {
    case schema::CollectiveKind_AllReduce:
      for (uint32_t b : *c->buffers())
        work.bytes += 2 * bytesOf(b); // read, and overwritten with the result
      work.what = detail::concat("all_reduce ", reduction, " of ", c->buffers()->size(),
                                 " buffers over '", axis, "'");
      return work;
    case schema::CollectiveKind_ReduceScatter:
      work.what = detail::concat("reduce_scatter ", reduction, " over '", axis, "'");
      break;
    case schema::CollectiveKind_AllGather:
      work.what = detail::concat("all_gather over '", axis, "'");
      break;
    case schema::CollectiveKind_LocalShard:
      work.what = detail::concat("local_shard over '", axis, "'");
      break;
    }
    for (uint32_t b : *c->buffers())
      work.bytes += bytesOf(b); // in read, out written
    return work;
  }
  const schema::KernelCall *call = step.op_as_KernelCall();
  const schema::Kernel &kernel = *artifact.root().kernels()->Get(call->kernel());
  if (kernel.args())
    for (const schema::KernelArg *arg : *kernel.args())
      work.bytes += double(arg->elements()) * double(schema::dtypeBytes(arg->dtype()));
  if (call->cudnn_attention())
    work.flops = attentionFlops(*call->cudnn_attention());
  work.what = "kernel " + kernel.entry()->str();
  if (kernel.ops() && kernel.ops()->size() > 0)
    work.what += " [" + kernel.ops()->str() + "]";
  return work;
}

namespace {

// The GFLOP/s and GB/s columns: `amount` per run over `runs` runs in
// `seconds`, or "-" when there is none.
std::string perSecond(double amount, double runs, double seconds) {
  if (amount <= 0 || seconds <= 0)
    return "       -";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%8.2f", amount * runs / seconds * 1e-9);
  return buf;
}

// The roofline column: the share of the roof reached at this work's
// arithmetic intensity, and which roof ("mem": bandwidth-bound, "fp":
// compute-bound). Work without FLOPs is placed under the memory roof; "-"
// when the roof it needs is unknown.
std::string roofline(double flops, double bytes, double runs, double seconds,
                     const DevicePeaks &peaks) {
  const std::optional<double> &pf = peaks.flopsPerSecond, &bw = peaks.bytesPerSecond;
  double share = -1;
  const char *roof = "";
  if (seconds > 0 && flops > 0 && pf && (!bw || bytes <= 0 || flops / bytes * *bw >= *pf)) {
    share = flops * runs / seconds / *pf; // compute-bound (or no bandwidth known)
    roof = "fp";
  } else if (seconds > 0 && bytes > 0 && bw) {
    // Bandwidth-bound: bytes/s over the memory roof (the same as achieved
    // FLOP/s over intensity x bandwidth).
    share = bytes * runs / seconds / *bw;
    roof = "mem";
  }
  if (share < 0)
    return "      -";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%3.0f%% %-3s", 100 * share, roof);
  return buf;
}

std::string formatPeaks(const DevicePeaks &peaks) {
  if (!peaks.flopsPerSecond && !peaks.bytesPerSecond)
    return "no peaks known for the roofline (--peak-tflops, --peak-gbps)";
  std::string out = "roofline under";
  char buf[64];
  if (peaks.flopsPerSecond) {
    std::snprintf(buf, sizeof(buf), " %.4g TFLOP/s", *peaks.flopsPerSecond * 1e-12);
    out += buf;
  }
  if (peaks.bytesPerSecond) {
    std::snprintf(buf, sizeof(buf), "%s %.0f GB/s", peaks.flopsPerSecond ? " and" : "",
                  *peaks.bytesPerSecond * 1e-9);
    out += buf;
  }
  return out;
}

} // namespace

std::string formatScheduleProfile(const Artifact &artifact,
                                  ProgramKind program,
                                  const ScheduleTiming &timing,
                                  int64_t runsPerStep, size_t top,
                                  const DevicePeaks &peaks) {
  const std::vector<double> &entrySeconds = timing.seconds;
  const double runs = double(timing.runs);
  // Timed steps: fractional when a step's first run was not timed.
  double steps = runs / double(std::max<int64_t>(1, runsPerStep));
  const auto &schedule = *artifact.program(program)->schedule();
  double total = std::accumulate(entrySeconds.begin(), entrySeconds.end(), 0.0);
  double gemmTotal = 0;
  std::vector<size_t> order(entrySeconds.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entrySeconds[a] > entrySeconds[b];
  });
  // Each entry described once, with its FLOPs and bytes per run.
  std::vector<EntryWork> work(entrySeconds.size());
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    work[i] = describeScheduleEntry(artifact, *schedule.Get(i));
    if (schedule.Get(i)->op_as_GemmCall())
      gemmTotal += entrySeconds[i];
  }
  auto share = [&](double seconds) { return total > 0 ? 100 * seconds / total : 0.0; };
  auto perStep = [&](double seconds) { return steps > 0 ? seconds * 1e3 / steps : 0.0; };

  char line[512];
  std::string out;
  std::snprintf(line, sizeof(line),
                "profile of program '%s': %g timed steps, %.2f ms/step (GEMMs "
                "%.1f%%, kernels %.1f%%), %zu entries; %s\n",
                artifact.program(program)->name()->c_str(), steps, perStep(total),
                share(gemmTotal), share(total - gemmTotal), entrySeconds.size(),
                formatPeaks(peaks).c_str());
  out += line;
  out += "   time%  ms/step  GFLOP/s     GB/s     roof  entry  what (where)\n";
  for (size_t r = 0; r < std::min(top, order.size()); ++r) {
    size_t i = order[r];
    const schema::Step &step = *schedule.Get(i);
    double seconds = entrySeconds[i];
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f %s %s  %s  %5zu  %s (%s)\n",
                  share(seconds), perStep(seconds),
                  perSecond(work[i].flops, runs, seconds).c_str(),
                  perSecond(work[i].bytes, runs, seconds).c_str(),
                  roofline(work[i].flops, work[i].bytes, runs, seconds, peaks).c_str(), i,
                  work[i].what.c_str(), step.location() ? step.location()->c_str() : "?");
    out += line;
  }

  // The same kernel often runs at many entries (once per layer); the sum
  // per kernel says which emitter to make faster.
  std::map<std::string, std::pair<double, int>> byWhat;
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    byWhat[work[i].what].first += entrySeconds[i];
    byWhat[work[i].what].second += 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(
      byWhat.begin(), byWhat.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  out += "   time%  ms/step  entries  what (summed over entries)\n";
  for (size_t r = 0; r < std::min(top, sorted.size()); ++r) {
    const auto &[what, stat] = sorted[r];
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f  %7d  %s\n", share(stat.first),
                  perStep(stat.first), stat.second, what.c_str());
    out += line;
  }

  // Per model-file line: what a person edits. An entry's location is the
  // line of the op it came from (a fused kernel's: its first member's).
  struct LineStat {
    double seconds = 0, flops = 0, bytes = 0;
    int entries = 0;
  };
  std::map<std::string, LineStat> byLine;
  for (size_t i = 0; i < entrySeconds.size(); ++i) {
    const schema::Step &step = *schedule.Get(i);
    LineStat &stat = byLine[step.location() ? step.location()->str() : "?"];
    stat.seconds += entrySeconds[i];
    stat.flops += work[i].flops;
    stat.bytes += work[i].bytes;
    stat.entries += 1;
  }
  std::vector<std::pair<std::string, LineStat>> lines(byLine.begin(), byLine.end());
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  out += "   time%  ms/step  GFLOP/s     GB/s     roof  entries  model line\n";
  for (size_t r = 0; r < std::min(top, lines.size()); ++r) {
    const auto &[where, stat] = lines[r];
    std::snprintf(line, sizeof(line), "  %5.1f%% %8.3f %s %s  %s  %7d  %s\n",
                  share(stat.seconds), perStep(stat.seconds),
                  perSecond(stat.flops, runs, stat.seconds).c_str(),
                  perSecond(stat.bytes, runs, stat.seconds).c_str(),
                  roofline(stat.flops, stat.bytes, runs, stat.seconds, peaks).c_str(),
                  stat.entries, where.c_str());
    out += line;
  }
  return out;
}

} // namespace kiln::rt
