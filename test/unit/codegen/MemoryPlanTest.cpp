//===- MemoryPlanTest.cpp - The planner's decisions on small schedules ----===//
//
// codegen/program (MemoryPlan.cpp, StepProgram.cpp) on hand-written step
// programs: the persistent region first and never shared, best fit over
// live ranges, in-place reuse only when the kernel writes in place, the sizes
// match and the input dies at that call, views extending their storage's
// range, the peak and its tensors; what a GEMM entry reads and writes; which
// collectives may overlap the entries after them.
//
//===----------------------------------------------------------------------===//

#include "codegen/program/MemoryPlan.h"
#include "codegen/program/StepProgram.h"

#include "runtime/schema/ArtifactVersion.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

constexpr int64_t kAlign = schema::kArenaAlignment;

// A buffer of `bytes` one-byte elements; a view of `aliasOf` when >= 0.
PlannedBuffer buffer(const std::string &name, schema::BufferRole role,
                     int64_t bytes, int32_t aliasOf = -1) {
  PlannedBuffer b;
  b.name = name;
  b.role = role;
  b.dtype = schema::DType_Bool;
  b.shape = {bytes};
  b.aliasOf = aliasOf;
  return b;
}

PlannedBuffer activation(const std::string &name, int64_t bytes) {
  return buffer(name, schema::BufferRole_Activation, bytes);
}

// A kernel call of a kernel that writes in place (kernels[1]) or not (kernels[0]).
PlannedStep call(std::vector<uint32_t> buffers, size_t numInputs,
                 bool inPlace = false) {
  PlannedStep step;
  step.kernel = inPlace ? 1 : 0;
  step.buffers = std::move(buffers);
  step.numInputs = numInputs;
  step.location = "m.kiln:1:1";
  return step;
}

// The step program of these buffers and schedules, its memory planned.
StepProgram planned(std::vector<PlannedBuffer> buffers,
                    std::vector<PlannedProgram> programs) {
  StepProgram program;
  program.buffers = std::move(buffers);
  program.programs = std::move(programs);
  program.kernels.resize(2);
  program.kernels[1].inPlace = true;
  program.planMemory();
  return program;
}

TEST(MemoryPlanTest, PersistentRegionComesFirstInBufferOrder) {
  std::vector<PlannedBuffer> buffers = {
      buffer("w", schema::BufferRole_Parameter, 1000, -1),
      activation("a", 512),
      buffer("w", schema::BufferRole_Gradient, 1000, -1),
      buffer("loss", schema::BufferRole_Loss, 4, -1)};
  std::vector<PlannedProgram> programs = {
      {"step", {call({0}, 0), call({0, 1}, 1), call({1, 2, 3}, 1)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[2], 4 * kAlign); // 1000 bytes take 4 units
  EXPECT_EQ(plan.offsets[3], 8 * kAlign);
  EXPECT_EQ(plan.persistentBytes, 9 * kAlign);
  EXPECT_EQ(plan.offsets[1], 9 * kAlign);
  EXPECT_EQ(plan.breakdown.parameters, 4 * kAlign);
  EXPECT_EQ(plan.breakdown.gradients, 4 * kAlign);
  EXPECT_EQ(plan.breakdown.other, kAlign);
  EXPECT_EQ(plan.breakdown.activations, 2 * kAlign);
  EXPECT_EQ(plan.arenaBytes, 11 * kAlign);
  EXPECT_EQ(plan.breakdown.peak, plan.arenaBytes);
}

// step: a = f(w); loss = g(a); gw = h(w) (a gradient); update: u = k(gw);
// w = m(u); eval: e = f(w); loss = g(e). Sizes: a, gw and e 4 units, u 1.
StepProgram withGradient(int64_t gradAccum, bool reduced) {
  std::vector<PlannedBuffer> buffers = {
      buffer("w", schema::BufferRole_Parameter, kAlign),
      activation("a", 4 * kAlign),
      buffer("w", schema::BufferRole_Gradient, 4 * kAlign),
      activation("u", kAlign),
      activation("e", 4 * kAlign),
      buffer("loss", schema::BufferRole_Loss, 4)};
  std::vector<PlannedStep> step = {call({0, 1}, 1), call({1, 5}, 1),
                                   call({0, 2}, 1)};
  if (reduced) {
    PlannedStep allReduce;
    allReduce.collective = PlannedCollective{};
    allReduce.buffers = {2};
    allReduce.numInputs = 1;
    step.push_back(allReduce);
  }
  std::vector<PlannedProgram> programs = {
      {"step", step, 0.0, gradAccum},
      {"update", {call({2, 3}, 1), call({3, 0}, 1)}, 0.0, 1},
      {"eval", {call({0, 4}, 1), call({4, 5}, 1)}, 0.0, 0}};
  return planned(buffers, programs);
}

TEST(MemoryPlanTest, GradientLivesFromStepToUpdateWithOneMicroBatch) {
  StepProgram program = withGradient(/*gradAccum=*/1, /*reduced=*/false);
  const MemoryPlan &plan = program.memory;
  // Timeline: step 0-2, update 3-4, eval 5-6. gw [2, 4] shares a's bytes
  // (a [0, 1]) and e's ([5, 6]); u [3, 4] goes above it.
  EXPECT_TRUE(plan.ranges[2].spansPrograms());
  EXPECT_EQ(plan.ranges[2].first, 2);
  EXPECT_EQ(plan.ranges[2].untilProgram, 1);
  EXPECT_EQ(plan.ranges[2].last, 1);
  EXPECT_EQ(plan.persistentBytes, 2 * kAlign); // w and the loss
  EXPECT_EQ(plan.offsets[1], plan.persistentBytes);
  EXPECT_EQ(plan.offsets[2], plan.persistentBytes);
  EXPECT_EQ(plan.offsets[4], plan.persistentBytes);
  EXPECT_EQ(plan.offsets[3], plan.persistentBytes + 4 * kAlign);
  EXPECT_EQ(plan.arenaBytes, 7 * kAlign);
  // The peak: update's first entry, gw and u live; gw counts as gradients.
  EXPECT_EQ(plan.peakProgram, 1);
  EXPECT_EQ(plan.peakEntry, 0);
  EXPECT_EQ(plan.peakTensors, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(plan.breakdown.gradients, 4 * kAlign);
  EXPECT_EQ(plan.breakdown.activations, kAlign);
  EXPECT_EQ(plan.breakdown.peak, plan.arenaBytes);
  EXPECT_NE(formatMemoryPlan(program).find("step[2]..update[1] Gradient"),
            std::string::npos)
      << formatMemoryPlan(program);
}

TEST(MemoryPlanTest, GradientIsPersistentWhenAccumulatedOrReduced) {
  // grad_accum 2 ("step" adds into it twice) or an all-reduce touching it
  // (data parallelism's overlapped collectives): through every program.
  for (auto [gradAccum, reduced] : {std::pair{int64_t(2), false}, {int64_t(1), true}}) {
    StepProgram program = withGradient(gradAccum, reduced);
    const MemoryPlan &plan = program.memory;
    EXPECT_TRUE(plan.ranges[2].persistent()) << gradAccum << " " << reduced;
    EXPECT_LT(plan.offsets[2], plan.persistentBytes);
    EXPECT_EQ(plan.breakdown.gradients, 4 * kAlign);
  }
}

TEST(MemoryPlanTest, DisjointLivesShareAndBestFitTakesTheSmallestGap) {
  // Live ranges: a [0..1] 4 units, b [0..3] 1 unit, c [1..2] 2 units,
  // d [2..3] 1 unit, e [3..3] 2 units. Placed largest first: a, c, e, b, d.
  std::vector<PlannedBuffer> buffers = {
      activation("a", 4 * kAlign), activation("b", kAlign),
      activation("c", 2 * kAlign), activation("d", kAlign),
      activation("e", 2 * kAlign)};
  std::vector<PlannedProgram> programs = {
      {"step",
       {call({0, 1}, 0), call({0, 2}, 1), call({2, 3}, 1),
        call({1, 3, 4}, 2)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  // a at 0; c (live with a at entry 1) above it at 4 units.
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[2], 4 * kAlign);
  // e [3..3] conflicts with b and d only, which are not placed yet when e
  // (2 units) goes: it takes offset 0, a's bytes, after a died.
  EXPECT_EQ(plan.offsets[4], 0);
  // b [0..3] conflicts with a, c, e: the gap above c (end 6 units).
  EXPECT_EQ(plan.offsets[1], 6 * kAlign);
  // d [2..3] conflicts with c, b, e: the smallest gap that holds one unit
  // is [2, 4) between e and c.
  EXPECT_EQ(plan.offsets[3], 2 * kAlign);
  EXPECT_EQ(plan.arenaBytes, 7 * kAlign);
  // The peak: entry 1 holds a, b, c = 7 units.
  EXPECT_EQ(plan.peakLiveBytes, 7 * kAlign);
  EXPECT_EQ(plan.peakEntry, 1);
  EXPECT_EQ(plan.peakTensors, (std::vector<uint32_t>{0, 2, 1}));
}

TEST(MemoryPlanTest, InPlaceOnlyInKernelsThatWriteInPlaceWhenTheInputDies) {
  // x = f(); y = g(x) in place; z = h(y) not in place; w = k(z) with
  // z read again later.
  std::vector<PlannedBuffer> buffers = {
      activation("x", 1024), activation("y", 1024), activation("z", 1024),
      activation("w", 1024), buffer("loss", schema::BufferRole_Loss, 4, -1)};
  std::vector<PlannedProgram> programs = {
      {"step",
       {call({0}, 0), call({0, 1}, 1, true), call({1, 2}, 1, false),
        call({2, 3}, 1, true), call({2, 3, 4}, 2)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.sharesWith[1], 0); // y over x
  EXPECT_EQ(plan.offsets[1], plan.offsets[0]);
  EXPECT_EQ(plan.sharesWith[2], -1); // h does not write in place
  EXPECT_NE(plan.offsets[2], plan.offsets[1]);
  EXPECT_EQ(plan.sharesWith[3], -1); // z is read after k
  EXPECT_NE(plan.offsets[3], plan.offsets[2]);
}

TEST(MemoryPlanTest, InPlaceNeedsTheSameByteSize) {
  std::vector<PlannedBuffer> buffers = {activation("x", 1024),
                                           activation("y", 512),
                                           buffer("loss", schema::BufferRole_Loss, 4, -1)};
  std::vector<PlannedProgram> programs = {
      {"step", {call({0}, 0), call({0, 1}, 1, true), call({1, 2}, 1)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.sharesWith[1], -1);
  EXPECT_NE(plan.offsets[1], plan.offsets[0]);
}

TEST(MemoryPlanTest, InPlaceNeedsTheSameElementCount) {
  // y [256] f32 and x [512] bf16: 1024 bytes each, but element i of y is
  // not where element i of x was (a cross-entropy gradient's targets and its
  // one-class gradient would be such a pair).
  std::vector<PlannedBuffer> buffers = {activation("x", 1024), activation("y", 1024),
                                        buffer("loss", schema::BufferRole_Loss, 4, -1)};
  buffers[0].dtype = schema::DType_BF16;
  buffers[0].shape = {512};
  buffers[1].dtype = schema::DType_F32;
  buffers[1].shape = {256};
  std::vector<PlannedProgram> programs = {
      {"step", {call({0}, 0), call({0, 1}, 1, true), call({1, 2}, 1)}}};
  StepProgram program = planned(buffers, programs);
  EXPECT_EQ(program.memory.sharesWith[1], -1);
  EXPECT_NE(program.memory.offsets[1], program.memory.offsets[0]);
  // With as many elements (bf16 both), y takes x's bytes.
  buffers[1].dtype = schema::DType_BF16;
  buffers[1].shape = {512};
  program = planned(buffers, programs);
  EXPECT_EQ(program.memory.sharesWith[1], 0);
}

TEST(MemoryPlanTest, ViewsExtendTheirStorageAndPersistentIsNeverShared) {
  // v is a view of x read at entry 2, so x lives [0..2] and y (born at 1)
  // cannot take x's bytes in place. The parameter is never shared.
  std::vector<PlannedBuffer> buffers = {
      activation("x", 1024), activation("y", 1024),
      buffer("v", schema::BufferRole_Activation, 1024, 0),
      buffer("p", schema::BufferRole_Parameter, 1024, -1)};
  std::vector<PlannedProgram> programs = {
      {"step", {call({3, 0}, 1), call({0, 1}, 1, true), call({2, 1, 3}, 2)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.offsets[2], -1);
  EXPECT_EQ(plan.ranges[0].last, 2);
  EXPECT_EQ(plan.sharesWith[1], -1);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_TRUE(plan.ranges[3].persistent());
  EXPECT_EQ(plan.offsets[3], 0);
  EXPECT_GE(plan.offsets[0], plan.persistentBytes);
  EXPECT_GE(plan.offsets[1], plan.persistentBytes);
}

TEST(MemoryPlanTest, ProgramsShareTheActivationRegion) {
  // a lives in "step", b in "update": programs run one after another.
  std::vector<PlannedBuffer> buffers = {activation("a", 1024),
                                           activation("b", 1024),
                                           activation("both", 1024)};
  std::vector<PlannedProgram> programs = {
      {"step", {call({0, 2}, 1)}}, {"update", {call({1, 2}, 1)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  // An activation touched by two programs is kept for the whole step.
  EXPECT_TRUE(plan.ranges[2].persistent());
  EXPECT_LT(plan.offsets[2], plan.persistentBytes);
}

TEST(MemoryPlanTest, ScratchTakesBytesFreeDuringItsCall) {
  // a is written at 0 and read at 2; call 1 has scratch w1 (3 units) and w2
  // (1 unit), call 2 has w3 (2 units); c is a completion counter; b (8
  // units) lives at entry 3 alone, the peak.
  std::vector<PlannedBuffer> buffers = {
      activation("a", 2 * kAlign),
      buffer("w1", schema::BufferRole_Workspace, 3 * kAlign - 5, -1),
      buffer("w2", schema::BufferRole_Workspace, 10, -1),
      buffer("w3", schema::BufferRole_Workspace, 2 * kAlign, -1),
      buffer("c", schema::BufferRole_WorkspaceCounter, 4, -1),
      activation("b", 8 * kAlign)};
  std::vector<PlannedProgram> programs = {
      {"step",
       {call({0}, 0), call({0, 1, 2, 4}, 1), call({0, 3}, 1), call({5}, 0)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  // The counter is persistent (its zero must survive between launches).
  EXPECT_TRUE(plan.ranges[4].persistent());
  EXPECT_EQ(plan.offsets[4], 0);
  EXPECT_EQ(plan.persistentBytes, kAlign);
  // Scratch lives at its one call.
  EXPECT_EQ(plan.ranges[1].first, 1);
  EXPECT_EQ(plan.ranges[1].last, 1);
  // Scratch is placed among the activations: never on a (live at its
  // call), w3 on w1's bytes (other calls), all inside b's bytes (b lives
  // later), so the arena is the persistent region and b: no region of its
  // own on top (that was 4 more units).
  auto overlaps = [&](uint32_t x, uint32_t y) {
    return plan.offsets[x] < plan.offsets[y] + program.bytesOf(y) &&
           plan.offsets[y] < plan.offsets[x] + program.bytesOf(x);
  };
  EXPECT_FALSE(overlaps(1, 0));
  EXPECT_FALSE(overlaps(2, 0));
  EXPECT_FALSE(overlaps(1, 2));
  EXPECT_FALSE(overlaps(3, 0));
  EXPECT_EQ(plan.offsets[3], plan.offsets[1]);
  EXPECT_EQ(plan.arenaBytes, kAlign + 8 * kAlign);
  EXPECT_EQ(plan.breakdown.peak, plan.arenaBytes);
  // No scratch is live at the peak: the workspace line is the counter.
  EXPECT_EQ(plan.breakdown.workspace, kAlign);
  EXPECT_EQ(plan.breakdown.activations, 8 * kAlign);
  ASSERT_EQ(plan.peakTensors.size(), 1u);
  EXPECT_EQ(plan.peakTensors[0], 5u);
  // The report names the call with the most scratch.
  EXPECT_EQ(plan.largestScratchBytes, 4 * kAlign);
  EXPECT_EQ(plan.scratchProgram, 0);
  EXPECT_EQ(plan.scratchEntry, 1);
  std::string summary = formatMemorySummary(program);
  EXPECT_NE(summary.find("largest kernel scratch 0.00 MiB (1024 bytes), "
                         "'step' entry 1, m.kiln:1:1:"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("w1 (763 bytes)"), std::string::npos) << summary;
}

TEST(MemoryPlanTest, ScratchLiveAtThePeakCountsAsWorkspace) {
  // a (2 units) lives across call 1, whose scratch w (3 units) makes the
  // peak: 5 units, 3 of them workspace.
  std::vector<PlannedBuffer> buffers = {
      activation("a", 2 * kAlign),
      buffer("w", schema::BufferRole_Workspace, 3 * kAlign, -1)};
  std::vector<PlannedProgram> programs = {
      {"step", {call({0}, 0), call({0, 1}, 1), call({0}, 1)}}};
  StepProgram program = planned(buffers, programs);
  const MemoryPlan &plan = program.memory;
  EXPECT_EQ(plan.arenaBytes, 5 * kAlign);
  EXPECT_EQ(plan.breakdown.workspace, 3 * kAlign);
  EXPECT_EQ(plan.breakdown.activations, 2 * kAlign);
  EXPECT_EQ(plan.peakEntry, 1);
}

TEST(StepProgramTest, GemmEntryReadsItsOperandsAndWritesItsEpilogueOutputs) {
  // c = a @ b + bias with the pre-activation written to aux (BiasGelu's
  // aux output): reads a, b, bias; writes c, aux. Accumulating reads c too.
  StepProgram program;
  PlannedStep gemm;
  gemm.gemm = PlannedGemm{};
  PlannedGemm &g = *gemm.gemm;
  g.a = 0, g.b = 1, g.c = 2, g.bias = 3, g.aux = 4, g.auxWritten = true;
  StepAccess access = program.accessOf(gemm);
  EXPECT_EQ(access.buffers, (std::vector<uint32_t>{0, 1, 3, 2, 4}));
  EXPECT_EQ(access.numInputs, 3u);
  EXPECT_FALSE(access.inPlace);
  g.accumulate = true, g.aux = -1, g.bias = -1;
  access = program.accessOf(gemm);
  EXPECT_EQ(access.buffers, (std::vector<uint32_t>{0, 1, 2, 2}));
  EXPECT_EQ(access.numInputs, 3u);
}

TEST(StepProgramTest, CollectivesOverlapOnlyWhatNothingLaterTouches) {
  // 0: gradient g1, 1: gradient g2, 2: activation x, 3: parameter slice p,
  // 4: gathered parameter (an activation), 5: a view of g2.
  std::vector<PlannedBuffer> buffers = {
      buffer("g1", schema::BufferRole_Gradient, 64),
      buffer("g2", schema::BufferRole_Gradient, 64),
      activation("x", 64),
      buffer("p", schema::BufferRole_Parameter, 64),
      activation("p.whole", 128),
      buffer("g2.view", schema::BufferRole_Gradient, 64, 1)};
  auto collective = [](schema::CollectiveKind kind,
                       std::vector<uint32_t> touched) {
    PlannedStep step;
    step.collective = PlannedCollective{};
    step.collective->kind = kind;
    step.buffers = std::move(touched);
    step.numInputs = step.buffers.size();
    return step;
  };
  std::vector<PlannedProgram> programs = {
      {"step",
       {collective(schema::CollectiveKind_AllGather, {3, 4}), // 0
        call({2}, 0),                                          // 1
        call({4, 2}, 1),                                       // 2
        collective(schema::CollectiveKind_AllReduce, {0}),     // 3
        collective(schema::CollectiveKind_AllReduce, {1}),     // 4
        collective(schema::CollectiveKind_AllReduce, {2}),     // 5
        call({5}, 1)}}};                                       // 6
  StepProgram program = planned(buffers, programs);
  program.planOverlaps();
  const std::vector<PlannedStep> &s = program.programs[0].schedule;
  // The gathered parameter is first read at entry 2: overlap entry 1.
  EXPECT_TRUE(s[0].collective->overlap);
  EXPECT_EQ(s[0].collective->overlapUntil, 2);
  // g1: nothing touches it later.
  EXPECT_TRUE(s[3].collective->overlap);
  // g2 is read at entry 6 through its view (one storage).
  EXPECT_FALSE(s[4].collective->overlap);
  // An activation's bytes may be reused after the call: never overlapped.
  EXPECT_FALSE(s[5].collective->overlap);
}

} // namespace
} // namespace kiln
