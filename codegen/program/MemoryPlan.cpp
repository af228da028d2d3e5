//===- MemoryPlan.cpp - One arena with an offset per buffer ---------------===//
//
// Algorithm (the runtime's checker, runtime/MemoryPlanCheck.cpp, re-derives
// steps 1-3 on its own and rejects any overlap they do not allow):
//  1. Storage: views (alias_of) share their storage buffer; a touch of a view
//     is a touch of its storage, so views extend their storage's live range.
//  2. Liveness: the programs run one after another, on one timeline (step,
//     then update, then eval: schema::timelineRank), and an Activation lives
//     only inside its program, so an activation's live range is [first
//     schedule entry touching it, last one] of that program. A Workspace
//     buffer (a kernel's scratch) is touched by its one call, so its range
//     is that entry. A gradient that schema::livesStepToUpdate (one
//     micro-batch a step, touched by step and update alone, by no
//     collective) lives from its first entry in step to update's last
//     entry. Every other buffer (parameters, other gradients, optimizer
//     state, inputs, loss, metrics, norms, lr, step, constants, completion
//     counters) is persistent, and so is an activation or workspace touched
//     by no program or by more than one.
//  3. In-place reuse: an output of a kernel that writes in place
//     (Kernel.in_place: element i of each output is written after the last
//     read of element i of each input with as many elements; elementwise
//     kernels, the cross-entropy gradient) takes the storage of an input of
//     the same element count and byte size whose last use is that call.
//     The two become one slot living from the input's first use to the
//     output's last; chains (x -> y -> z) form one slot. Gradients living
//     from step to update take part in none.
//  4. Persistent region first, at offset 0, in buffer order, never reused.
//  5. Activation region after it: slots sorted by size (largest first) are
//     placed by best fit: among the gaps left by already placed slots whose
//     live ranges intersect this one on the timeline, the smallest gap that
//     holds it, else above the highest of them. A call's Workspace buffers
//     (its scratch, live at that one entry) are slots like any other: the
//     attention backward's scratch (cuDNN's workspace, the fp32 dQ sum)
//     takes bytes that are free during its call, and adds nothing to a peak
//     elsewhere (Llama-3 1.2B at [16, 2048]: 516 MiB at the classifier).
//  6. Every size and offset is a multiple of kArenaAlignment (256 bytes);
//     empty buffers still take one unit so every pointer is distinct.
//  7. The report's largest scratch: the call whose Workspace buffers add up
//     to the most bytes.
//  8. Peak = persistent region + activation region (the arena's size). The
//     report names the moment the live slots are largest and the tensors
//     live then; the activation region's bytes count as gradients up to the
//     bytes of those live then, as workspace up to the scratch live then
//     (plus the persistent WorkspaceCounter buffers), the rest as
//     activations.
//
//===----------------------------------------------------------------------===//

#include "codegen/program/MemoryPlan.h"
#include "codegen/program/StepProgram.h"

#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/Liveness.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <numeric>
#include <tuple>

namespace kiln {

namespace {

int64_t alignedSize(int64_t bytes) {
  int64_t unit = schema::kArenaAlignment;
  return std::max<int64_t>(1, (std::max<int64_t>(bytes, 0) + unit - 1) / unit) *
         unit;
}

// A storage buffer or a chain of in-place buffers sharing one offset, live
// over [first, last] of the timeline (Timeline::at).
struct Slot {
  uint32_t root;
  int64_t first, last, size;
  int64_t offset = -1;
};

// Step 2's timeline: each program's entries after those of the programs
// before it (schema::timelineRank).
struct Timeline {
  std::vector<int64_t> base; // per program: the time of its entry 0
  int64_t length = 0;

  explicit Timeline(const std::vector<PlannedProgram> &programs)
      : base(programs.size(), 0) {
    std::vector<size_t> order(programs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return schema::timelineRank(programs[a].name) <
             schema::timelineRank(programs[b].name);
    });
    for (size_t p : order) {
      base[p] = length;
      length += static_cast<int64_t>(programs[p].schedule.size());
    }
  }
  int64_t first(const LiveRange &r) const { return base[r.program] + r.first; }
  int64_t last(const LiveRange &r) const {
    return base[r.spansPrograms() ? r.untilProgram : r.program] + r.last;
  }
  // The program and entry at time `t`.
  std::pair<int32_t, int64_t> at(int64_t t,
                                 const std::vector<PlannedProgram> &programs) const {
    for (size_t p = 0; p < base.size(); ++p)
      if (t >= base[p] && t < base[p] + static_cast<int64_t>(programs[p].schedule.size()))
        return {static_cast<int32_t>(p), t - base[p]};
    return {-1, -1};
  }
};

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

} // namespace

MemoryPlan planArena(const StepProgram &program) {
  const std::vector<PlannedBuffer> &buffers = program.buffers;
  const std::vector<PlannedProgram> &programs = program.programs;
  const uint32_t n = buffers.size();
  // Each buffer's bytes, and what each entry reads and writes
  // (StepProgram::accessOf).
  std::vector<int64_t> bytes(n);
  for (uint32_t i = 0; i < n; ++i)
    bytes[i] = program.bytesOf(i);
  std::vector<std::vector<StepAccess>> access(programs.size());
  for (size_t p = 0; p < programs.size(); ++p)
    for (const PlannedStep &step : programs[p].schedule)
      access[p].push_back(program.accessOf(step));
  MemoryPlan plan;
  plan.offsets.assign(n, -1);
  plan.ranges.assign(n, LiveRange{});
  plan.sharesWith.assign(n, -1);
  plan.locations.assign(n, "");

  // 1. Storage of every buffer (the lowering makes aliases point backwards).
  std::vector<uint32_t> storage(n);
  for (uint32_t i = 0; i < n; ++i) {
    int32_t alias = buffers[i].aliasOf;
    storage[i] = alias >= 0 && static_cast<uint32_t>(alias) < i
                     ? storage[static_cast<uint32_t>(alias)]
                     : i;
  }

  // 2. Live ranges: the programs each storage appears in and, per program,
  //    its first and last entry; whether a collective touches it.
  std::vector<int> programCount(n, 0);
  std::vector<uint32_t> programMask(n, 0);
  std::vector<int64_t> firstInStep(n, -1);
  std::vector<bool> collective(n, false);
  int32_t stepProgram = -1, updateProgram = -1;
  for (size_t p = 0; p < programs.size(); ++p) {
    if (programs[p].name == "step")
      stepProgram = static_cast<int32_t>(p);
    else if (programs[p].name == "update")
      updateProgram = static_cast<int32_t>(p);
    std::vector<bool> seen(n, false);
    for (size_t e = 0; e < programs[p].schedule.size(); ++e)
      for (uint32_t b : access[p][e].buffers) {
        uint32_t s = storage[b];
        if (plan.locations[b].empty())
          plan.locations[b] = programs[p].schedule[e].location;
        if (programs[p].schedule[e].collective)
          collective[s] = true;
        if (!seen[s]) {
          seen[s] = true;
          ++programCount[s];
          programMask[s] |= 1u << p;
          if (static_cast<int32_t>(p) == stepProgram)
            firstInStep[s] = static_cast<int64_t>(e);
          plan.ranges[s] = {static_cast<int32_t>(p), static_cast<int64_t>(e),
                            static_cast<int64_t>(e)};
        }
        plan.ranges[s].last = static_cast<int64_t>(e);
      }
  }
  uint32_t stepAndUpdate = stepProgram >= 0 && updateProgram >= 0
                               ? (1u << stepProgram) | (1u << updateProgram)
                               : 0;
  int64_t gradAccum = stepProgram >= 0 ? programs[stepProgram].runsPerStep : 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (storage[i] != i)
      continue;
    if (schema::livesStepToUpdate(buffers[i].role, gradAccum,
                                  stepAndUpdate && programMask[i] == stepAndUpdate,
                                  collective[i]))
      plan.ranges[i] = {stepProgram, firstInStep[i],
                        static_cast<int64_t>(programs[updateProgram].schedule.size()) - 1,
                        updateProgram};
    else if (!StepProgram::isTransient(buffers[i].role) || programCount[i] != 1)
      plan.ranges[i] = LiveRange{};
  }
  const Timeline timeline(programs);

  // 3. In-place reuse inside kernels that write in place.
  std::vector<uint32_t> slotOf(n);
  std::iota(slotOf.begin(), slotOf.end(), 0);
  std::vector<bool> donated(n, false);
  for (size_t p = 0; p < programs.size(); ++p)
    for (size_t e = 0; e < programs[p].schedule.size(); ++e) {
      const StepAccess &call = access[p][e];
      if (!call.inPlace)
        continue;
      for (size_t j = call.numInputs; j < call.buffers.size(); ++j) {
        uint32_t out = storage[call.buffers[j]];
        const LiveRange &outRange = plan.ranges[out];
        if (outRange.persistent() || outRange.spansPrograms() ||
            outRange.first != static_cast<int64_t>(e) || plan.sharesWith[out] >= 0 ||
            buffers[out].role == schema::BufferRole_Workspace)
          continue;
        for (size_t i = 0; i < call.numInputs && i < call.buffers.size(); ++i) {
          uint32_t in = storage[call.buffers[i]];
          const LiveRange &inRange = plan.ranges[in];
          if (in == out || donated[in] || inRange.persistent() ||
              inRange.spansPrograms() || inRange.last != static_cast<int64_t>(e) ||
              bytes[in] != bytes[out] ||
              program.elementsOf(in) != program.elementsOf(out))
            continue;
          donated[in] = true;
          plan.sharesWith[out] = static_cast<int32_t>(in);
          slotOf[out] = slotOf[in];
          break;
        }
      }
    }

  // 4. The persistent region.
  int64_t offset = 0;
  MemoryBreakdown &bd = plan.breakdown;
  for (uint32_t i = 0; i < n; ++i) {
    if (storage[i] != i || !plan.ranges[i].persistent())
      continue;
    int64_t size = alignedSize(bytes[i]);
    plan.offsets[i] = offset;
    offset += size;
    switch (buffers[i].role) {
    case schema::BufferRole_Parameter:
      bd.parameters += size;
      break;
    case schema::BufferRole_Gradient:
      bd.gradients += size;
      break;
    case schema::BufferRole_AdamM:
    case schema::BufferRole_AdamV:
    case schema::BufferRole_Momentum:
      bd.optimizerState += size;
      break;
    case schema::BufferRole_Activation:
      bd.activations += size;
      break;
    case schema::BufferRole_Workspace:
    case schema::BufferRole_WorkspaceCounter:
      bd.workspace += size;
      break;
    default:
      bd.other += size;
    }
  }
  plan.persistentBytes = offset;

  // 5. The activation region: one slot per chain, placed by best fit.
  std::vector<Slot> slots;
  std::vector<int32_t> slotIndex(n, -1);
  for (uint32_t i = 0; i < n; ++i) {
    if (storage[i] != i || plan.ranges[i].persistent())
      continue;
    const LiveRange &r = plan.ranges[i];
    uint32_t root = slotOf[i];
    if (slotIndex[root] < 0) {
      slotIndex[root] = static_cast<int32_t>(slots.size());
      slots.push_back({root, timeline.first(r), timeline.last(r),
                       alignedSize(bytes[i])});
    }
    Slot &slot = slots[slotIndex[root]];
    slot.first = std::min(slot.first, timeline.first(r));
    slot.last = std::max(slot.last, timeline.last(r));
  }
  std::vector<size_t> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return slots[a].size > slots[b].size;
  });
  // Placed slots by offset, so the ones a slot conflicts with come in
  // offset order without a sort per slot (slots at one offset never
  // conflict with each other, so their order among themselves is moot).
  std::vector<const Slot *> placed;
  int64_t regionBytes = 0;
  for (size_t s : order) {
    Slot &slot = slots[s];
    int64_t end = 0, best = -1, bestGap = INT64_MAX;
    for (const Slot *other : placed) {
      if (other->first > slot.last || slot.first > other->last)
        continue;
      int64_t gap = other->offset - end;
      if (gap >= slot.size && gap < bestGap) {
        best = end;
        bestGap = gap;
      }
      end = std::max(end, other->offset + other->size);
    }
    slot.offset = best >= 0 ? best : end;
    regionBytes = std::max(regionBytes, slot.offset + slot.size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), slot.offset,
                                   [](int64_t offset, const Slot *other) {
                                     return offset < other->offset;
                                   }),
                  &slot);
  }
  for (uint32_t i = 0; i < n; ++i)
    if (storage[i] == i && slotIndex[slotOf[i]] >= 0)
      plan.offsets[i] = plan.persistentBytes + slots[slotIndex[slotOf[i]]].offset;

  // 7. The call with the most scratch, for the report.
  for (size_t p = 0; p < programs.size(); ++p)
    for (size_t e = 0; e < programs[p].schedule.size(); ++e) {
      int64_t scratch = 0;
      for (uint32_t b : access[p][e].buffers) {
        uint32_t s = storage[b];
        if (b == s && !plan.ranges[s].persistent() &&
            buffers[s].role == schema::BufferRole_Workspace)
          scratch += alignedSize(bytes[s]);
      }
      if (scratch > plan.largestScratchBytes) {
        plan.largestScratchBytes = scratch;
        plan.scratchProgram = static_cast<int32_t>(p);
        plan.scratchEntry = static_cast<int64_t>(e);
      }
    }

  // 8. The moment the live slots are largest: a sweep of the timeline.
  std::vector<int64_t> delta(timeline.length + 1, 0);
  for (const Slot &slot : slots) {
    delta[slot.first] += slot.size;
    delta[slot.last + 1] -= slot.size;
  }
  int64_t live = 0, peakTime = -1;
  for (int64_t t = 0; t < timeline.length; ++t) {
    live += delta[t];
    if (live > plan.peakLiveBytes) {
      plan.peakLiveBytes = live;
      peakTime = t;
    }
  }
  int64_t gradientsAtPeak = 0, scratchAtPeak = 0;
  if (peakTime >= 0) {
    std::tie(plan.peakProgram, plan.peakEntry) = timeline.at(peakTime, programs);
    // One tensor per live slot: the member of the chain alive then (the
    // later one at the hand-over entry, the one just written).
    std::vector<int32_t> liveMember(slots.size(), -1);
    for (uint32_t i = 0; i < n; ++i) {
      if (storage[i] != i || plan.ranges[i].persistent())
        continue;
      const LiveRange &r = plan.ranges[i];
      if (slotIndex[slotOf[i]] >= 0 && timeline.first(r) <= peakTime &&
          peakTime <= timeline.last(r))
        liveMember[slotIndex[slotOf[i]]] = static_cast<int32_t>(i);
    }
    for (int32_t member : liveMember)
      if (member >= 0) {
        plan.peakTensors.push_back(static_cast<uint32_t>(member));
        if (plan.ranges[member].spansPrograms())
          gradientsAtPeak += alignedSize(bytes[member]);
        else if (buffers[member].role == schema::BufferRole_Workspace)
          scratchAtPeak += alignedSize(bytes[member]);
      }
    std::stable_sort(plan.peakTensors.begin(), plan.peakTensors.end(),
                     [&](uint32_t a, uint32_t b) {
                       return bytes[a] > bytes[b];
                     });
  }
  bd.gradients += gradientsAtPeak;
  bd.workspace += scratchAtPeak;
  bd.activations += regionBytes - gradientsAtPeak - scratchAtPeak;
  bd.peak = bd.parameters + bd.gradients + bd.optimizerState + bd.activations +
            bd.workspace + bd.other;
  plan.arenaBytes = bd.peak;
  return plan;
}

namespace {

// "kiln.softmax" for an activation named "kiln.softmax@<its location>" (or
// "kiln.constant@" when the op had no location of its own).
std::string shortName(const std::string &name, const std::string &location) {
  std::string suffix = "@" + location;
  if (!location.empty() && name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  if (name.size() > 1 && name.back() == '@')
    return name.substr(0, name.size() - 1);
  return name;
}

std::string rangeText(const LiveRange &r,
                      const std::vector<PlannedProgram> &programs) {
  if (r.persistent())
    return "persistent";
  if (r.spansPrograms())
    return programs[r.program].name + "[" + std::to_string(r.first) + "].." +
           programs[r.untilProgram].name + "[" + std::to_string(r.last) + "]";
  return programs[r.program].name + "[" + std::to_string(r.first) + ".." +
         std::to_string(r.last) + "]";
}

} // namespace

std::string formatMemorySummary(const StepProgram &program,
                                size_t topTensors) {
  const MemoryPlan &plan = program.memory;
  const std::vector<PlannedBuffer> &buffers = program.buffers;
  const std::vector<PlannedProgram> &programs = program.programs;
  const MemoryBreakdown &bd = plan.breakdown;
  std::string out = "memory plan: peak " + mib(bd.peak) + " (" +
                    std::to_string(bd.peak) + " bytes, one arena)\n";
  auto row = [&](const char *what, int64_t bytes) {
    char line[96];
    std::snprintf(line, sizeof(line), "  %-16s %12s\n", what, mib(bytes).c_str());
    out += line;
  };
  row("parameters", bd.parameters);
  row("gradients", bd.gradients);
  row("optimizer state", bd.optimizerState);
  row("activations", bd.activations);
  row("workspace", bd.workspace);
  row("other", bd.other);
  if (plan.scratchProgram >= 0) {
    // The call with the most scratch, and that scratch.
    const PlannedProgram &sizing = programs[plan.scratchProgram];
    const PlannedStep &call = sizing.schedule[plan.scratchEntry];
    out += "largest kernel scratch " + mib(plan.largestScratchBytes) + " (" +
           std::to_string(plan.largestScratchBytes) + " bytes), '" +
           sizing.name + "' entry " + std::to_string(plan.scratchEntry) +
           (call.location.empty() ? "" : ", " + call.location) + ":\n";
    for (uint32_t b : program.accessOf(call).buffers)
      if (buffers[b].role == schema::BufferRole_Workspace &&
          buffers[b].aliasOf < 0) {
        char line[64];
        std::snprintf(line, sizeof(line), "  %12s  ",
                      mib(program.bytesOf(b)).c_str());
        out += line + shortName(buffers[b].name, plan.locations[b]) + " (" +
               std::to_string(program.bytesOf(b)) + " bytes)\n";
      }
  }
  if (plan.peakProgram < 0)
    return out;
  const PlannedProgram &peak = programs[plan.peakProgram];
  out += "tensors live at the peak (" + mib(plan.peakLiveBytes) + " in '" +
         peak.name + "' at entry " + std::to_string(plan.peakEntry);
  const std::string &where = peak.schedule[plan.peakEntry].location;
  if (!where.empty())
    out += ", " + where;
  out += "), largest first:\n";
  for (size_t i = 0; i < plan.peakTensors.size() && i < topTensors; ++i) {
    uint32_t b = plan.peakTensors[i];
    char line[64];
    std::snprintf(line, sizeof(line), "  %12s  ", mib(program.bytesOf(b)).c_str());
    out += line + plan.locations[b] + "  " +
           shortName(buffers[b].name, plan.locations[b]) + "\n";
  }
  if (plan.peakTensors.size() > topTensors)
    out += "  ... and " + std::to_string(plan.peakTensors.size() - topTensors) +
           " more\n";
  return out;
}

std::string formatMemoryPlan(const StepProgram &program) {
  const MemoryPlan &plan = program.memory;
  const std::vector<PlannedBuffer> &buffers = program.buffers;
  std::string out = formatMemorySummary(program, plan.peakTensors.size());
  out += "\narena " + std::to_string(plan.arenaBytes) +
         " bytes; persistent region [0, " +
         std::to_string(plan.persistentBytes) +
         "), activations and kernel scratch after it\n";
  out += "# buffer offset bytes live role name location\n";
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &b = buffers[i];
    std::string line = std::to_string(i) + " ";
    if (b.aliasOf >= 0) {
      line += "view-of-" + std::to_string(b.aliasOf);
    } else {
      line += std::to_string(plan.offsets[i]) + " " +
              std::to_string(program.bytesOf(i)) + " " +
              rangeText(plan.ranges[i], program.programs);
      if (plan.sharesWith[i] >= 0)
        line += " in-place-of-" + std::to_string(plan.sharesWith[i]);
    }
    line += std::string(" ") + schema::EnumNameBufferRole(b.role) + " " +
            shortName(b.name, plan.locations[i]) + " " +
            (plan.locations[i].empty() ? "-" : plan.locations[i]);
    out += line + "\n";
  }
  return out;
}

} // namespace kiln
