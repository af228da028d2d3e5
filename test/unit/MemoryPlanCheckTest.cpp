//===- MemoryPlanCheckTest.cpp - The verifier's memory-plan checks --------===//
//
// Hand-built plans (explicit Buffer.offset values) against the checker of
// runtime/MemoryPlanCheck.cpp: overlapping live buffers are rejected with
// both names, the in-place hand-over of a kernel that writes in place is accepted
// and nothing looser is, offsets out of bounds or misaligned are rejected,
// and the arena places every buffer at its offset.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/cpu/Arena.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kAlign = schema::kArenaAlignment;

// "step": a = fill(); b = f(a); loss = sum(b), with three activations of
// 64 f32 (256 bytes) and `f` writing in place or not. Every buffer gets an
// explicit offset: loss at 0, activations from 256 on (one each unless a
// test moves them). "update" is empty.
struct ThreeStep {
  ArtifactSpec spec;
  ThreeStep(bool inPlace) {
    spec = minimalArtifact(); // buffer 0: loss, kernel 0 writes it
    spec.buffers[0].offset = 0;
    for (int i = 0; i < 3; ++i) {
      BufferSpec b;
      b.name = std::string(1, static_cast<char>('a' + i));
      b.shape = {64};
      b.offset = kAlign * (i + 1);
      spec.buffers.push_back(b); // 1: a, 2: b, 3: c
    }
    spec.kernels.push_back({"k_fill", "x", "t.kiln:1:1", "kiln.iota"});
    spec.kernels.push_back({"k_f", "x", "t.kiln:2:1", "kiln.exp"});
    spec.kernels.back().inPlace = inPlace;
    spec.kernels.push_back({"k_sum", "x", "t.kiln:3:1", "kiln.sum"});
    StepSpec fill, f, sum;
    fill.kernel = 1;
    fill.buffers = {1}; // a
    f.kernel = 2;
    f.buffers = {1, 2}; // b = f(a)
    sum.kernel = 3;
    sum.buffers = {2, 0}; // loss = sum(b)
    spec.schedule = {fill, f, sum};
    spec.arenaBytes = 4 * kAlign;
  }
};

Status load(const ArtifactSpec &spec) {
  auto artifact = Artifact::loadBytes(serializeArtifact(spec), "plan.kart");
  return artifact.ok() ? okStatus() : artifact.status();
}

TEST(MemoryPlanCheckTest, AcceptsDisjointBuffers) {
  ThreeStep t(/*inPlace=*/false);
  Status status = load(t.spec);
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(MemoryPlanCheckTest, RejectsOverlappingLiveBuffersNamingBoth) {
  // b = f(a) with f not writing in place: a and b are both live at entry 1.
  ThreeStep t(/*inPlace=*/false);
  t.spec.buffers[2].offset = kAlign; // b on top of a
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("plan.kart: memory plan: buffer 1 ('a', bytes "
                              "[256, 512), live step[0..1])"),
                    HasSubstr("buffer 2 ('b', bytes [256, 512), live "
                              "step[1..2])"),
                    HasSubstr("share arena bytes while both are live")));
}

TEST(MemoryPlanCheckTest, RejectsPartialOverlap) {
  // Half of b on top of a: 128 bytes shared.
  ThreeStep t(/*inPlace=*/true);
  t.spec.buffers[2].shape = {96}; // 384 bytes
  t.spec.kernels[2].args = std::vector<schema::KernelArg>{
      {schema::DType_F32, 64}, {schema::DType_F32, 96}};
  t.spec.kernels[3].args = std::vector<schema::KernelArg>{
      {schema::DType_F32, 96}, {schema::DType_F32, 1}};
  t.spec.buffers[1].offset = 2 * kAlign;
  t.spec.buffers[2].offset = kAlign;
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("share arena bytes"));
}

TEST(MemoryPlanCheckTest, AcceptsInPlaceInKernelThatWritesInPlace) {
  // b = f(a), f writing in place, a's last use is that call: b may take a's bytes.
  ThreeStep t(/*inPlace=*/true);
  t.spec.buffers[2].offset = kAlign;
  Status status = load(t.spec);
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(MemoryPlanCheckTest, RejectsInPlaceBetweenDifferentElementCounts) {
  // b as 128 bf16: a's 256 bytes, but element i of b is not where element i
  // of a was, so no kernel's in-place promise covers the sharing.
  ThreeStep t(/*inPlace=*/true);
  t.spec.buffers[2].offset = kAlign;
  t.spec.buffers[2].dtype = schema::DType_BF16;
  t.spec.buffers[2].shape = {128};
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 1 ('a'"), HasSubstr("buffer 2 ('b'"),
                    HasSubstr("share arena bytes while both are live")));
}

TEST(MemoryPlanCheckTest, RejectsInPlaceWhenTheInputIsReadLater) {
  // The same sharing, but a is read again after f: f destroyed it.
  ThreeStep t(/*inPlace=*/true);
  t.spec.buffers[2].offset = kAlign;
  StepSpec reread;
  reread.kernel = 3;
  reread.buffers = {1, 0}; // loss = sum(a)
  t.spec.schedule.push_back(reread);
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 1 ('a'"), HasSubstr("live step[0..3]"),
                    HasSubstr("buffer 2 ('b'")));
}

TEST(MemoryPlanCheckTest, RejectsOverlapWithPersistentBuffer) {
  // c is never touched, so it is persistent: no activation may use its
  // bytes, though nothing reads c while a is live.
  ThreeStep t(/*inPlace=*/false);
  t.spec.buffers[3].offset = kAlign; // c on top of a
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 3 ('c'"), HasSubstr("live persistent")));
  // The loss is persistent too, although its one write comes after a dies.
  ThreeStep u(/*inPlace=*/false);
  u.spec.buffers[0].offset = kAlign; // the loss inside a's bytes
  status = load(u.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("buffer 0 ('loss'"));
}

TEST(MemoryPlanCheckTest, AcceptsReuseAcrossDisjointLiveRanges) {
  // c is written at entry 3 after a died at entry 1: it may reuse a's bytes.
  ThreeStep t(/*inPlace=*/false);
  StepSpec fillC;
  fillC.kernel = 1;
  fillC.buffers = {3};
  StepSpec readC;
  readC.kernel = 3;
  readC.buffers = {3, 0};
  t.spec.schedule.push_back(fillC);
  t.spec.schedule.push_back(readC);
  t.spec.buffers[3].offset = kAlign;
  Status status = load(t.spec);
  ASSERT_TRUE(status.ok()) << status.message();
  auto artifact = Artifact::loadBytes(serializeArtifact(t.spec), "plan.kart");
  ASSERT_TRUE(artifact.ok());
  EXPECT_EQ((*artifact)->bufferInfo(3).offset, kAlign);
  auto arena = cpu::Arena::create(**artifact);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  EXPECT_EQ((*arena)->data(1), (*arena)->data(3));
  EXPECT_EQ(static_cast<char *>((*arena)->data(2)) -
                static_cast<char *>((*arena)->data(0)),
            2 * kAlign);
}

// Two kernel calls' scratch (role Workspace, a [64] f32 each) at the same
// bytes, as the planner may place them: entry 3 uses x, entry
// 4 uses y; `twice` makes entry 4 use x too.
ArtifactSpec withWorkspaces(bool twice) {
  ThreeStep t(/*inPlace=*/false);
  for (const char *name : {"x", "y"}) {
    BufferSpec b;
    b.name = name;
    b.role = schema::BufferRole_Workspace;
    b.shape = {64};
    b.offset = 4 * kAlign;
    t.spec.buffers.push_back(b); // 4: x, 5: y
  }
  t.spec.kernels.push_back({"k_scratch", "x", "t.kiln:4:1", "kiln.attention_grad"});
  StepSpec first, second;
  first.kernel = second.kernel = 4;
  first.buffers = {2, 4};
  second.buffers = {2, twice ? 4u : 5u};
  t.spec.schedule.push_back(first);
  t.spec.schedule.push_back(second);
  t.spec.arenaBytes = 5 * kAlign;
  return t.spec;
}

TEST(MemoryPlanCheckTest, AcceptsWorkspacesOfDifferentCallsSharingBytes) {
  Status status = load(withWorkspaces(/*twice=*/false));
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(MemoryPlanCheckTest, RejectsWorkspaceTouchedByTwoCalls) {
  Status status = load(withWorkspaces(/*twice=*/true));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("workspace buffer 4 ('x') is touched by "
                              "entries 3..4 of 'step'"),
                    HasSubstr("the scratch of exactly one kernel call")));
}

TEST(MemoryPlanCheckTest, RejectsWorkspaceOverlappingALiveActivation) {
  // x is live at entry 3, where b (read there) is live too.
  ArtifactSpec spec = withWorkspaces(/*twice=*/false);
  spec.buffers[4].offset = 2 * kAlign; // x on top of b
  Status status = load(spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 2 ('b'"), HasSubstr("buffer 4 ('x'"),
                    HasSubstr("share arena bytes while both are live")));
}

TEST(MemoryPlanCheckTest, RejectsOffsetOutOfBounds) {
  ThreeStep t(/*inPlace=*/false);
  t.spec.buffers[3].offset = 4 * kAlign; // ends at 5 * 256 > arena
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              HasSubstr("memory plan: buffer 3 ('c') at offset 1024 with 256 "
                        "bytes ends outside the arena of 1024 bytes"));
}

TEST(MemoryPlanCheckTest, RejectsMisalignedAndNegativeOffsets) {
  ThreeStep t(/*inPlace=*/false);
  t.spec.buffers[1].offset = kAlign + 4;
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              HasSubstr("buffer 1 ('a') has offset 260 (must be a "
                        "non-negative multiple of 256)"));
  t.spec.buffers[1].offset = -1;
  status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("has offset -1"));
}

TEST(MemoryPlanCheckTest, RejectsViewWithItsOwnOffset) {
  ThreeStep t(/*inPlace=*/false);
  BufferSpec view;
  view.name = "a_view";
  view.shape = {8, 8};
  view.aliasOf = 1;
  view.offset = 3 * kAlign;
  t.spec.buffers.push_back(view);
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              HasSubstr("buffer 4 ('a_view') is a view of buffer 1 but has "
                        "its own offset 768"));
}

TEST(MemoryPlanCheckTest, ViewsExtendTheirStorageLiveRange) {
  // a is read through a view at entry 2, after b took a's bytes in place at
  // entry 1: a is still live, so the sharing is rejected.
  ThreeStep t(/*inPlace=*/true);
  BufferSpec view;
  view.name = "a_view";
  view.shape = {8, 8};
  view.aliasOf = 1;
  t.spec.buffers.push_back(view); // 4
  t.spec.buffers[2].offset = kAlign;
  t.spec.kernels.push_back({"k_sum2", "x", "t.kiln:4:1", "kiln.sum"});
  StepSpec readView;
  readView.kernel = 4;
  readView.buffers = {4, 0};
  t.spec.schedule.push_back(readView);
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("buffer 1 ('a'"));
  EXPECT_THAT(status.message(), HasSubstr("live step[0..3]"));
}

// ThreeStep with a gradient g ([64] f32, buffer 4) that "step" writes at
// entry 3, after a and b died, and "update" reads: u = f(g), loss = sum(u)
// (u: buffer 5; buffer 6 is the parameter g). With one micro-batch a step g lives from step[3] to the end
// of update (schema::livesStepToUpdate), so it may take a's bytes; the
// offsets are set by each test.
ArtifactSpec withGradient() {
  ThreeStep t(/*inPlace=*/false);
  BufferSpec g;
  g.name = "g";
  g.role = schema::BufferRole_Gradient;
  g.shape = {64};
  t.spec.buffers.push_back(g); // 4
  BufferSpec u;
  u.name = "u";
  u.shape = {64};
  t.spec.buffers.push_back(u); // 5
  StepSpec fillG, f, sum;
  fillG.kernel = 1;
  fillG.buffers = {4};
  t.spec.schedule.push_back(fillG);
  f.kernel = 2;
  f.buffers = {4, 5};
  sum.kernel = 3;
  sum.buffers = {5, 0};
  t.spec.update = {f, sum};
  BufferSpec w;
  w.name = "g"; // the parameter g is the gradient of
  w.role = schema::BufferRole_Parameter;
  w.shape = {64};
  w.init = schema::InitKind_Zeros;
  w.offset = 5 * kAlign;
  t.spec.buffers.push_back(w); // 6
  t.spec.buffers[4].offset = kAlign; // a's bytes
  t.spec.buffers[5].offset = 4 * kAlign;
  t.spec.arenaBytes = 6 * kAlign;
  return t.spec;
}

TEST(MemoryPlanCheckTest, GradientLivesFromItsWriteInStepToTheEndOfUpdate) {
  ArtifactSpec spec = withGradient();
  Status status = load(spec);
  EXPECT_TRUE(status.ok()) << status.message();

  // An eval activation may use g's bytes too: eval runs between steps.
  BufferSpec e;
  e.name = "e";
  e.shape = {64};
  e.offset = kAlign;
  spec.buffers.push_back(e); // 7
  StepSpec fillE, sumE;
  fillE.kernel = 1;
  fillE.buffers = {7};
  sumE.kernel = 3;
  sumE.buffers = {7, 0};
  spec.eval = std::vector<StepSpec>{fillE, sumE};
  status = load(spec);
  EXPECT_TRUE(status.ok()) << status.message();

  // An update activation may not: g is live until update's last entry.
  spec = withGradient();
  spec.buffers[5].offset = kAlign;
  status = load(spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 4 ('g', bytes [256, 512), live "
                              "step[3]..update[1])"),
                    HasSubstr("buffer 5 ('u'")));
}

TEST(MemoryPlanCheckTest, GradientIsPersistentWithSeveralMicroBatches) {
  // With grad_accum 2, "step" runs twice and adds into g: it lives through
  // every program, so a's bytes are not free for it.
  ArtifactSpec spec = withGradient();
  spec.gradAccum = 2;
  Status status = load(spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("buffer 4 ('g'"), HasSubstr("live persistent")));
}

TEST(MemoryPlanCheckTest, RejectsSummaryThatDoesNotAddUp) {
  ThreeStep t(/*inPlace=*/false);
  t.spec.arenaBytes = 8 * kAlign; // the summary says "other" = arena, fine
  EXPECT_TRUE(load(t.spec).ok());
  t.spec.arenaBytes = -1;
  Status status = load(t.spec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("arena_bytes -1"));
}

} // namespace
} // namespace kiln::rt::test
