//===- CheckpointStoreTest.cpp - Atomic checkpoint directories ------------===//
//
// save -> latest -> load round trips, keep-last-K pruning, debris of killed
// runs (.tmp-* directories, step directories without the marker) ignored and
// cleaned, and foreign or garbled trainer_state.json refused with the file
// named. The kill -9 behaviour itself is checkpoint_kill_test.sh.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/FileIO.h"
#include "runtime/checkpoint/CheckpointStore.h"

#include <algorithm>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// Parameters and Adam moments whose values depend on the step.
struct FakeTraining {
  std::vector<float> wte = std::vector<float>(12), bias = std::vector<float>(3);
  std::vector<float> m = std::vector<float>(12), v = std::vector<float>(12);

  explicit FakeTraining(int64_t step) {
    for (size_t i = 0; i < wte.size(); ++i) {
      wte[i] = float(step) + 0.25f * float(i);
      m[i] = -float(step) * float(i);
      v[i] = float(step * step) + float(i);
    }
    for (size_t i = 0; i < bias.size(); ++i)
      bias[i] = float(step) * 10 + float(i);
  }

  CheckpointContents contents(int64_t step) const {
    CheckpointContents c;
    c.step = step;
    c.model = {{"wte.weight", TensorDType::kF32, {4, 3}, wte.data()},
               {"ln_f.bias", TensorDType::kF32, {3}, bias.data()}};
    c.optimizer = {{"adam_m.wte.weight", TensorDType::kF32, {4, 3}, m.data()},
                   {"adam_v.wte.weight", TensorDType::kF32, {4, 3}, v.data()}};
    c.trainerState = {{"rng_seed", 1234},
                      {"data_position", step * 8},
                      {"artifact_hash", "0123abcd"}};
    return c;
  }
};

class CheckpointStoreTest : public ::testing::Test {
protected:
  std::string dir = makeTempDir() + "/ckpt";

  CheckpointStore openStore(int keep) {
    auto store = CheckpointStore::open(dir, keep, /*warnings=*/nullptr);
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(store).value();
  }

  void saveStep(CheckpointStore &store, int64_t step) {
    FakeTraining t(step);
    auto saved = store.save(t.contents(step));
    ASSERT_TRUE(saved.ok()) << saved.status().message();
    EXPECT_EQ(saved->path, dir + "/" + checkpointDirName(step));
  }

  std::vector<int64_t> committedSteps(const CheckpointStore &store) {
    auto list = store.list();
    EXPECT_TRUE(list.ok()) << list.status().message();
    std::vector<int64_t> steps;
    for (const CheckpointInfo &c : *list)
      steps.push_back(c.step);
    return steps;
  }

  std::vector<std::string> namesInDir() {
    auto names = listDirectory(dir);
    EXPECT_TRUE(names.ok());
    std::sort(names->begin(), names->end());
    return *names;
  }
};

TEST_F(CheckpointStoreTest, DirectoryName) {
  EXPECT_EQ(checkpointDirName(100), "step-00000100");
  EXPECT_EQ(checkpointDirName(123456789), "step-123456789");
}

TEST_F(CheckpointStoreTest, SaveLatestLoadRoundTrip) {
  CheckpointStore store = openStore(3);
  auto none = store.latest();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  saveStep(store, 100);
  auto latest = store.latest();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->step, 100);
  EXPECT_EQ(namesInDir(), std::vector<std::string>{"step-00000100"});

  auto loaded = CheckpointStore::load((*latest)->path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->step, 100);
  FakeTraining expected(100);
  std::vector<float> wte(12), bias(3), m(12), v(12);
  ASSERT_TRUE(loaded->model.readInto("wte.weight", TensorDType::kF32, {4, 3},
                                     wte.data()).ok());
  ASSERT_TRUE(
      loaded->model.readInto("ln_f.bias", TensorDType::kF32, {3}, bias.data())
          .ok());
  ASSERT_TRUE(loaded->optimizer.readInto("adam_m.wte.weight", TensorDType::kF32,
                                         {4, 3}, m.data()).ok());
  ASSERT_TRUE(loaded->optimizer.readInto("adam_v.wte.weight", TensorDType::kF32,
                                         {4, 3}, v.data()).ok());
  // Bit-exact: a checkpoint is a copy, not an approximation.
  EXPECT_EQ(wte, expected.wte);
  EXPECT_EQ(bias, expected.bias);
  EXPECT_EQ(m, expected.m);
  EXPECT_EQ(v, expected.v);
  EXPECT_EQ(loaded->model.metadata().at("format"), "pt");
  EXPECT_EQ(loaded->model.entries().size(), 2u);

  const json &state = loaded->trainerState;
  EXPECT_EQ(state["format"], "kiln-trainer-state");
  EXPECT_EQ(state["version"], 1);
  EXPECT_EQ(state["step"], 100);
  EXPECT_EQ(state["data_position"], 800);
  EXPECT_EQ(state["artifact_hash"], "0123abcd");
}

TEST_F(CheckpointStoreTest, KeepsLastK) {
  CheckpointStore store = openStore(3);
  for (int64_t step : {10, 20, 30, 40, 50})
    saveStep(store, step);
  EXPECT_EQ(committedSteps(store), (std::vector<int64_t>{30, 40, 50}));
  // No leftovers of the pruning either.
  EXPECT_EQ(namesInDir(), (std::vector<std::string>{
                              "step-00000030", "step-00000040",
                              "step-00000050"}));
}

TEST_F(CheckpointStoreTest, KeepZeroKeepsAll) {
  CheckpointStore store = openStore(0);
  for (int64_t step : {1, 2, 3, 4, 5})
    saveStep(store, step);
  EXPECT_EQ(committedSteps(store), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST_F(CheckpointStoreTest, KeepOneAndJustSavedIsNeverPruned) {
  CheckpointStore store = openStore(2);
  saveStep(store, 300);
  saveStep(store, 400);
  // Resumed from an earlier point: the new step 100 stays, the oldest other
  // goes.
  saveStep(store, 100);
  EXPECT_EQ(committedSteps(store), (std::vector<int64_t>{100, 400}));
  CheckpointStore one = openStore(1);
  saveStep(one, 500);
  EXPECT_EQ(committedSteps(one), (std::vector<int64_t>{500}));
}

TEST_F(CheckpointStoreTest, SavingSameStepTwiceReplacesIt) {
  CheckpointStore store = openStore(3);
  saveStep(store, 7);
  FakeTraining other(99); // different contents under the same step
  ASSERT_TRUE(store.save(other.contents(7)).ok());
  EXPECT_EQ(namesInDir(), std::vector<std::string>{"step-00000007"});
  auto loaded = CheckpointStore::load(dir + "/step-00000007");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  std::vector<float> bias(3);
  ASSERT_TRUE(
      loaded->model.readInto("ln_f.bias", TensorDType::kF32, {3}, bias.data())
          .ok());
  EXPECT_EQ(bias, other.bias);
}

TEST_F(CheckpointStoreTest, StaleTmpDirsIgnoredAndCleaned) {
  CheckpointStore store = openStore(3);
  saveStep(store, 1);
  // Debris of a run killed mid-save and mid-prune; the first even looks
  // complete (it has the marker) but is not named step-*.
  ASSERT_TRUE(createDirectories(dir + "/.tmp-step-00000009-4242").ok());
  writeFile(dir + "/.tmp-step-00000009-4242/COMMITTED", std::string("{}"));
  ASSERT_TRUE(createDirectories(dir + "/.tmp-delete-step-00000000-4242").ok());
  auto latest = store.latest();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->step, 1);
  EXPECT_EQ(committedSteps(store), std::vector<int64_t>{1});

  saveStep(store, 2);
  EXPECT_EQ(namesInDir(), (std::vector<std::string>{"step-00000001",
                                                    "step-00000002"}));
}

TEST_F(CheckpointStoreTest, DirectoryWithoutMarkerIsNotUsed) {
  CheckpointStore store = openStore(3);
  saveStep(store, 5);
  saveStep(store, 6);
  ASSERT_TRUE(removeRecursively(dir + "/step-00000006/COMMITTED").ok());
  ASSERT_TRUE(createDirectories(dir + "/step-00000009").ok());
  ASSERT_TRUE(createDirectories(dir + "/step-banana").ok());

  char *text = nullptr;
  size_t size = 0;
  FILE *warnings = open_memstream(&text, &size);
  auto reporting = CheckpointStore::open(dir, 3, warnings);
  ASSERT_TRUE(reporting.ok());
  auto latest = reporting->latest();
  std::fclose(warnings);
  std::string warned(text, size);
  std::free(text);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->step, 5);
  EXPECT_THAT(warned, HasSubstr(dir + "/step-00000006: incomplete checkpoint "
                                      "(no COMMITTED marker), ignored"));
  EXPECT_THAT(warned, HasSubstr(dir + "/step-00000009: incomplete"));

  auto loaded = CheckpointStore::load(dir + "/step-00000006");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            dir + "/step-00000006: not a committed checkpoint (no COMMITTED "
                  "marker)");
}

// Rewrites the content hashes `ckpt`'s COMMITTED records to what its files
// hold now: a file garbled by a buggy writer rather than by the disk, so that
// the checks behind the hash are what fires.
void resealMarker(const std::string &ckpt) {
  auto marker = readFileBytes(ckpt + "/COMMITTED");
  ASSERT_TRUE(marker.ok());
  json m = json::parse(marker->begin(), marker->end());
  for (auto &[name, hash] : m["checksums"].items()) {
    auto now = fileContentHash(ckpt + "/" + name);
    ASSERT_TRUE(now.ok()) << now.status().message();
    hash = *now;
  }
  writeFile(ckpt + "/COMMITTED", m.dump());
}

TEST_F(CheckpointStoreTest, FlippedBitCaughtByTheContentHash) {
  CheckpointStore store = openStore(3);
  saveStep(store, 3);
  std::string ckpt = dir + "/step-00000003";
  for (const char *name : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    std::string path = ckpt + "/" + name;
    auto bytes = readFileBytes(path);
    ASSERT_TRUE(bytes.ok());
    std::vector<uint8_t> original = *bytes;
    (*bytes)[bytes->size() - 3] ^= 0x10; // same size, near the end
    writeFile(path, *bytes);
    auto loaded = CheckpointStore::load(ckpt);
    ASSERT_FALSE(loaded.ok()) << name;
    EXPECT_THAT(loaded.status().message(),
                ::testing::StartsWith(path + ": its content hash is ch64:"));
    EXPECT_THAT(loaded.status().message(),
                HasSubstr("the file changed after the checkpoint was written"));
    writeFile(path, original);
  }
  EXPECT_TRUE(CheckpointStore::load(ckpt).ok());
}

TEST_F(CheckpointStoreTest, ForeignOrGarbledTrainerStateRefused) {
  CheckpointStore store = openStore(3);
  saveStep(store, 3);
  std::string ckpt = dir + "/step-00000003";
  std::string statePath = ckpt + "/trainer_state.json";
  auto original = readFileBytes(statePath);
  ASSERT_TRUE(original.ok());

  // Same byte size as the original each time, so the marker's size check
  // passes and the JSON checks are what fires.
  auto replaceState = [&](std::string text) {
    text.resize(original->size(), ' ');
    writeFile(statePath, text);
    resealMarker(ckpt);
    auto loaded = CheckpointStore::load(ckpt);
    EXPECT_FALSE(loaded.ok());
    EXPECT_THAT(loaded.status().message(), ::testing::StartsWith(statePath));
    return loaded.status().message();
  };
  EXPECT_THAT(replaceState("{\"step\": 3, \"format\": "), HasSubstr("not valid JSON"));
  EXPECT_THAT(replaceState("[3]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(replaceState("{\"format\":\"hf-trainer\",\"version\":1,\"step\":3}"),
              HasSubstr("not a Kiln trainer state"));
  EXPECT_THAT(
      replaceState("{\"format\":\"kiln-trainer-state\",\"version\":2,\"step\":3}"),
      HasSubstr("trainer state version 2, this runtime reads version 1"));
  EXPECT_THAT(
      replaceState("{\"format\":\"kiln-trainer-state\",\"version\":1,\"step\":4}"),
      HasSubstr("\"step\" is 4 but the checkpoint is for step 3"));

  // A file whose size no longer matches the marker: caught before parsing.
  writeFile(statePath, std::string("{}"));
  auto loaded = CheckpointStore::load(ckpt);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(statePath + ": has 2 bytes, but"));
}

TEST_F(CheckpointStoreTest, CorruptTensorFileNamedOnLoad) {
  CheckpointStore store = openStore(3);
  saveStep(store, 3);
  std::string modelPath = dir + "/step-00000003/model.safetensors";
  auto bytes = readFileBytes(modelPath);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[8] = '#'; // the header's opening brace; same size
  writeFile(modelPath, *bytes);
  resealMarker(dir + "/step-00000003");
  auto loaded = CheckpointStore::load(dir + "/step-00000003");
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              ::testing::StartsWith(modelPath + ": header is not valid JSON"));

  ASSERT_TRUE(removeRecursively(modelPath).ok());
  loaded = CheckpointStore::load(dir + "/step-00000003");
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(modelPath + ": missing from a committed checkpoint"));
}

TEST_F(CheckpointStoreTest, BadArguments) {
  EXPECT_FALSE(CheckpointStore::open(dir, -1, nullptr).ok());
  auto file = makeTempDir() + "/plain";
  writeFile(file, std::string("x"));
  auto notADir = CheckpointStore::open(file, 3, nullptr);
  ASSERT_FALSE(notADir.ok());
  EXPECT_THAT(notADir.status().message(), HasSubstr(file));

  CheckpointStore store = openStore(3);
  FakeTraining t(1);
  CheckpointContents contents = t.contents(1);
  contents.trainerState = json::array({1, 2});
  auto saved = store.save(contents);
  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(saved.status().message(),
              HasSubstr("trainer_state.json: trainer state must be a JSON "
                        "object"));
  // The failed save leaves nothing behind.
  EXPECT_TRUE(namesInDir().empty());
  contents = t.contents(-5);
  EXPECT_FALSE(store.save(contents).ok());
}

} // namespace
} // namespace kiln::rt::test
