//===- MemoryPlanCheck.cpp - Verifying an artifact's static memory plan ---===//
//
// The same liveness rules as the planner (codegen/program/MemoryPlan.cpp), derived
// again from the schedules:
//   1. arena_bytes and the MemoryPlan summary: present, non-negative, the
//      categories adding up to the peak, which is the arena's size; peak
//      tensors naming existing buffers;
//   2. offsets: an alias carries none (-1, it follows alias_of); a storage
//      buffer's offset is a multiple of kArenaAlignment and its bytes lie
//      inside the arena;
//   3. liveness: a touch of a view is a touch of its storage; an Activation
//      or Workspace touched by exactly one program lives from its first to
//      its last entry there; a gradient that schema::livesStepToUpdate
//      (grad_accum 1, touched by step and update alone, by no collective)
//      lives from its first entry in step to update's last entry; every
//      other buffer (WorkspaceCounter included) is persistent (lives
//      always). A Workspace buffer is a kernel's
//      scratch: it must be touched by exactly one schedule entry, a kernel
//      call (its contents are undefined on entry, so nothing else may read
//      it);
//   4. overlaps: any two storage buffers sharing a byte must never be live
//      at once (programs run one after another on one timeline, step, update,
//      then eval: schema::timelineRank; so an activation never conflicts
//      with another program's), except the in-place case: identical byte ranges and element
//      counts, one buffer's last entry is the other's first, and that entry
//      calls a kernel that writes in place (Kernel.in_place) with both. The message names
//      both buffers, their bytes and their live ranges.
//
//===----------------------------------------------------------------------===//

#include "runtime/MemoryPlanCheck.h"

#include "runtime/schema/Liveness.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace kiln::rt {

namespace {

// 16 TiB: far above any plan, low enough that sums of a few never overflow.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 44;

// A storage buffer's live range: entries [first, last] of `program`, or
// from `first` of `program` to `last` of `untilProgram` (a gradient living
// from step to update), or persistent.
struct Range {
  int32_t program = -1;
  int64_t first = -1, last = -1;
  int32_t untilProgram = -1;
  int programs = 0;      // how many programs touch it
  uint32_t mask = 0;     // which
  int64_t firstInStep = -1;
  bool collective = false; // a collective touches it
  bool persistent = true;
  // Where it starts and ends on the timeline (times of the programs' entries
  // 0 in `base`).
  int64_t start(const std::vector<int64_t> &base) const { return base[program] + first; }
  int64_t end(const std::vector<int64_t> &base) const {
    return base[untilProgram >= 0 ? untilProgram : program] + last;
  }
};

// Calls `visit(buffer)` for every buffer one schedule entry touches.
template <typename Visit>
void forEachTouched(const schema::Step &step, Visit visit) {
  if (const schema::KernelCall *call = step.op_as_KernelCall()) {
    if (call->buffers())
      for (uint32_t b : *call->buffers())
        visit(b);
    // The workspace kilnc reserved for cuDNN is live at this entry too.
    if (const schema::CudnnAttention *a = call->cudnn_attention();
        a && a->workspace() >= 0)
      visit(static_cast<uint32_t>(a->workspace()));
  } else if (const schema::GemmCall *gemm = step.op_as_GemmCall()) {
    visit(gemm->a());
    visit(gemm->b());
    visit(gemm->c());
    // Epilogue buffers are read (bias, gelu input) or written (gelu input,
    // bias gradient) by the same call: they are live at this entry too.
    if (gemm->bias() >= 0)
      visit(static_cast<uint32_t>(gemm->bias()));
    if (gemm->aux() >= 0)
      visit(static_cast<uint32_t>(gemm->aux()));
  } else if (const schema::CollectiveCall *collective =
                 step.op_as_CollectiveCall()) {
    if (collective->buffers())
      for (uint32_t b : *collective->buffers())
        visit(b);
  }
}

Status checkSummary(const schema::Artifact &artifact) {
  int64_t arena = artifact.arena_bytes();
  if (arena < 0 || arena > kMaxArenaBytes)
    return invalidArgument("memory plan: arena_bytes ", arena,
                           " is outside [0, 2^44]");
  const schema::MemoryPlan *plan = artifact.memory_plan();
  if (!plan)
    return invalidArgument("has no memory_plan (compile it with a kilnc "
                           "that plans memory)");
  const std::pair<const char *, int64_t> parts[] = {
      {"parameters", plan->parameters()},
      {"gradients", plan->gradients()},
      {"optimizer_state", plan->optimizer_state()},
      {"activations", plan->activations()},
      {"workspace", plan->workspace()},
      {"other", plan->other()}};
  int64_t sum = 0;
  for (const auto &[name, bytes] : parts) {
    if (bytes < 0 || bytes > arena)
      return invalidArgument("memory plan: ", name, " of ", bytes,
                             " bytes is outside the arena of ", arena);
    sum += bytes;
  }
  if (sum != plan->peak() || plan->peak() != arena)
    return invalidArgument("memory plan: the categories add up to ", sum,
                           " bytes and the peak is ", plan->peak(),
                           ", but the arena has ", arena);
  uint32_t count = artifact.buffers()->size();
  if (plan->peak_tensors())
    for (const schema::PeakTensor *tensor : *plan->peak_tensors())
      if (tensor->buffer() >= count)
        return invalidArgument("memory plan: peak tensor buffer ",
                               tensor->buffer(), " is out of range (",
                               count, " buffers)");
  return okStatus();
}

Status checkOffsets(const schema::Artifact &artifact,
                    std::vector<BufferInfo> &infos) {
  int64_t arena = artifact.arena_bytes();
  for (uint32_t i = 0; i < infos.size(); ++i) {
    const schema::Buffer &buffer = *artifact.buffers()->Get(i);
    int64_t offset = buffer.offset();
    auto describe = [&] {
      return detail::concat("memory plan: buffer ", i, " ('",
                            bufferName(buffer), "')");
    };
    if (infos[i].storage != i) {
      if (offset != -1)
        return invalidArgument(describe(), " is a view of buffer ",
                               infos[i].storage, " but has its own offset ",
                               offset, " (views follow alias_of: -1)");
      // Aliases point to earlier buffers, whose offsets are already set.
      infos[i].offset = infos[infos[i].storage].offset;
      continue;
    }
    if (offset < 0 || offset % schema::kArenaAlignment != 0)
      return invalidArgument(describe(), " has offset ", offset,
                             " (must be a non-negative multiple of ",
                             schema::kArenaAlignment, ")");
    if (offset > arena || infos[i].bytes > arena - offset)
      return invalidArgument(describe(), " at offset ", offset, " with ",
                             infos[i].bytes,
                             " bytes ends outside the arena of ", arena,
                             " bytes");
    infos[i].offset = offset;
  }
  return okStatus();
}

std::string rangeText(const Range &r, const schema::Artifact &artifact) {
  if (r.persistent)
    return "persistent";
  if (r.untilProgram >= 0)
    return detail::concat(artifact.programs()->Get(r.program)->name()->str(), "[",
                          r.first, "]..",
                          artifact.programs()->Get(r.untilProgram)->name()->str(),
                          "[", r.last, "]");
  return detail::concat(
      artifact.programs()->Get(r.program)->name()->str(), "[", r.first, "..",
      r.last, "]");
}

} // namespace

Status checkMemoryPlan(const schema::Artifact &artifact,
                       std::vector<BufferInfo> &infos) {
  KILN_RETURN_IF_ERROR(checkSummary(artifact));
  KILN_RETURN_IF_ERROR(checkOffsets(artifact, infos));

  // 3. Liveness from the schedules.
  const uint32_t n = infos.size();
  const auto *programs = artifact.programs();
  std::vector<Range> ranges(n);
  const uint32_t programCount = programs ? programs->size() : 0;
  if (programCount > 32)
    return invalidArgument("memory plan: ", programCount, " programs (at most 32)");
  int32_t stepProgram = -1, updateProgram = -1;
  // The timeline: each program's entry 0, after the programs before it.
  std::vector<int64_t> base(programCount, 0);
  {
    std::vector<uint32_t> order(programCount);
    std::iota(order.begin(), order.end(), 0);
    auto rank = [&](uint32_t p) {
      return schema::timelineRank(programs->Get(p)->name()->string_view());
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return rank(a) < rank(b); });
    int64_t time = 0;
    for (uint32_t p : order) {
      base[p] = time;
      const auto *schedule = programs->Get(p)->schedule();
      time += schedule ? schedule->size() : 0;
    }
  }
  for (uint32_t p = 0; p < programCount; ++p) {
    std::string_view name = programs->Get(p)->name()->string_view();
    if (name == "step")
      stepProgram = static_cast<int32_t>(p);
    else if (name == "update")
      updateProgram = static_cast<int32_t>(p);
    const auto *schedule = programs->Get(p)->schedule();
    for (uint32_t e = 0; schedule && e < schedule->size(); ++e) {
      bool collective = schedule->Get(e)->op_as_CollectiveCall() != nullptr;
      forEachTouched(*schedule->Get(e), [&](uint32_t b) {
        Range &r = ranges[infos[b].storage];
        r.collective |= collective;
        if (r.program != static_cast<int32_t>(p)) {
          ++r.programs;
          r.mask |= 1u << p;
          r.program = static_cast<int32_t>(p);
          r.first = e;
          if (static_cast<int32_t>(p) == stepProgram)
            r.firstInStep = e;
        }
        r.last = e;
      });
    }
  }
  uint32_t stepAndUpdate = stepProgram >= 0 && updateProgram >= 0
                               ? (1u << stepProgram) | (1u << updateProgram)
                               : 0;
  // The schema's default when absent (the verifier requires a train config).
  const int64_t gradAccum = artifact.train() ? artifact.train()->grad_accum() : 1;
  for (uint32_t i = 0; i < n; ++i) {
    schema::BufferRole role = artifact.buffers()->Get(i)->role();
    Range &r = ranges[i];
    if (schema::livesStepToUpdate(role, gradAccum,
                                  stepAndUpdate && r.mask == stepAndUpdate,
                                  r.collective)) {
      r.persistent = false;
      r.program = stepProgram;
      r.first = r.firstInStep;
      r.untilProgram = updateProgram;
      r.last = static_cast<int64_t>(programs->Get(updateProgram)->schedule()->size()) - 1;
      continue;
    }
    ranges[i].persistent = (role != schema::BufferRole_Activation &&
                            role != schema::BufferRole_Workspace) ||
                           ranges[i].programs != 1;
    if (role == schema::BufferRole_Workspace && infos[i].storage == i) {
      const Range &r = ranges[i];
      bool oneCall = r.programs == 1 && r.first == r.last &&
                     programs->Get(r.program)
                         ->schedule()
                         ->Get(static_cast<uint32_t>(r.first))
                         ->op_as_KernelCall();
      if (!oneCall)
        return invalidArgument(
            "memory plan: workspace buffer ", i, " ('",
            bufferName(*artifact.buffers()->Get(i)), "') is touched by ",
            r.programs == 0 ? std::string("no schedule entry")
            : r.programs > 1
                ? detail::concat(r.programs, " programs")
                : detail::concat(
                      "entries ", r.first, "..", r.last, " of '",
                      programs->Get(r.program)->name()->str(), "'"),
            "; a workspace is the scratch of exactly one kernel call");
    }
  }

  // The one legal overlap of two live buffers: the in-place hand-over.
  auto inPlace = [&](uint32_t a, uint32_t b) {
    const Range &ra = ranges[a], &rb = ranges[b];
    if (infos[a].offset != infos[b].offset || infos[a].bytes != infos[b].bytes ||
        infos[a].elements != infos[b].elements ||
        ra.untilProgram >= 0 || rb.untilProgram >= 0 || ra.program != rb.program)
      return false;
    int64_t e;
    if (ra.last == rb.first)
      e = ra.last;
    else if (rb.last == ra.first)
      e = rb.last;
    else
      return false;
    const schema::Step &step =
        *programs->Get(ra.program)->schedule()->Get(static_cast<uint32_t>(e));
    const schema::KernelCall *call = step.op_as_KernelCall();
    if (!call || !artifact.kernels()->Get(call->kernel())->in_place())
      return false;
    bool hasA = false, hasB = false;
    forEachTouched(step, [&](uint32_t x) {
      hasA |= infos[x].storage == a;
      hasB |= infos[x].storage == b;
    });
    return hasA && hasB;
  };

  // 4. Every pair of storage buffers sharing a byte, by a sweep over offsets.
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < n; ++i)
    if (infos[i].storage == i && infos[i].bytes > 0)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return infos[a].offset != infos[b].offset ? infos[a].offset < infos[b].offset
                                              : a < b;
  });
  for (size_t x = 0; x < order.size(); ++x) {
    uint32_t a = order[x];
    int64_t endA = infos[a].offset + infos[a].bytes;
    for (size_t y = x + 1;
         y < order.size() && infos[order[y]].offset < endA; ++y) {
      uint32_t b = order[y];
      const Range &ra = ranges[a], &rb = ranges[b];
      bool bothLive = ra.persistent || rb.persistent ||
                      (ra.start(base) <= rb.end(base) && rb.start(base) <= ra.end(base));
      if (!bothLive || (!ra.persistent && !rb.persistent && inPlace(a, b)))
        continue;
      auto describe = [&](uint32_t i) {
        return detail::concat(
            "buffer ", i, " ('", bufferName(*artifact.buffers()->Get(i)),
            "', bytes [", infos[i].offset, ", ",
            infos[i].offset + infos[i].bytes, "), live ",
            rangeText(ranges[i], artifact), ")");
      };
      return invalidArgument("memory plan: ", describe(a), " and ",
                             describe(b),
                             " share arena bytes while both are live");
    }
  }
  return okStatus();
}

} // namespace kiln::rt
