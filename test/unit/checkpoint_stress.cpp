//===- checkpoint_stress.cpp - Test driver for checkpoints under kill -9 --===//
//
// A test-only program, driven by checkpoint_kill_test.sh and
// checkpoint_interop_test.py:
//
//   checkpoint-stress save DIR          resume from the newest checkpoint in
//                                       DIR (verifying it), then save steps
//                                       forever, keeping the last 3
//   checkpoint-stress verify DIR        load every committed checkpoint and
//                                       check its contents against its step;
//                                       prints the newest step (or "none")
//   checkpoint-stress write DIR STEP    save one checkpoint for STEP
//   checkpoint-stress dump FILE         print a safetensors file as JSON
//                                       (metadata; each tensor's dtype,
//                                       shape and bytes in hex)
//
// Every tensor value is a function of (step, tensor, index) — see
// expectedValue, mirrored in checkpoint_interop_test.py — so a checkpoint
// can be verified without remembering what was written.
//
//===----------------------------------------------------------------------===//

#include "runtime/FileIO.h"
#include "runtime/Safetensors.h"
#include "runtime/checkpoint/CheckpointStore.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace kiln::rt;
using nlohmann::json;

namespace {

constexpr int kKeepLast = 3;

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// About 2 MB of parameters; the optimizer holds two moments of each
// (6 MB per checkpoint in all), enough that a random kill often lands
// inside a file write.
const std::vector<TensorSpec> &parameterSpecs() {
  static const std::vector<TensorSpec> specs = {
      {"transformer.wte.weight", {256, 1024}},
      {"transformer.h.0.attn.c_attn.weight", {64, 1536}},
      {"transformer.h.0.attn.c_attn.bias", {1536}},
      {"transformer.ln_f.weight", {1024}},
      {"lm_head.scale", {}},
  };
  return specs;
}

// Exactly representable in F32 (|v| < 2^24), so comparisons are bitwise.
float expectedValue(int64_t step, int64_t tensor, int64_t index) {
  return float((step * 131 + tensor * 7919 + index * 31) % 65521 - 32000);
}

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// Tensor k of a checkpoint: parameters are 0..P-1, adam_m P..2P-1, adam_v
// 2P..3P-1.
std::vector<float> expectedTensor(int64_t step, int64_t k, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[i] = expectedValue(step, k, i);
  return values;
}

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t index; // k in expectedTensor
  bool optimizer;
};

std::vector<NamedTensor> checkpointTensors() {
  std::vector<NamedTensor> tensors;
  const auto &specs = parameterSpecs();
  int64_t p = static_cast<int64_t>(specs.size());
  for (int64_t i = 0; i < p; ++i) {
    tensors.push_back({specs[i].name, specs[i].shape, i, false});
    tensors.push_back({"adam_m." + specs[i].name, specs[i].shape, p + i, true});
    tensors.push_back(
        {"adam_v." + specs[i].name, specs[i].shape, 2 * p + i, true});
  }
  return tensors;
}

Status saveStep(CheckpointStore &store, int64_t step) {
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> tensors = checkpointTensors();
  storage.reserve(tensors.size());
  CheckpointContents contents;
  contents.step = step;
  for (const NamedTensor &t : tensors) {
    storage.push_back(expectedTensor(step, t.index, elementCount(t.shape)));
    TensorView view{t.name, TensorDType::kF32, t.shape, storage.back().data()};
    (t.optimizer ? contents.optimizer : contents.model).push_back(view);
  }
  contents.trainerState = {{"data_position", step * 1000},
                           {"rng", {{"seed", 42}, {"counter", step * 3}}}};
  contents.modelMetadata = {{"kiln_step", std::to_string(step)}};
  StatusOr<CheckpointInfo> saved = store.save(contents);
  return saved.ok() ? okStatus() : saved.status();
}

// Loads `info` and compares every tensor and the trainer state with what
// saveStep wrote for its step.
Status verifyCheckpoint(const CheckpointInfo &info) {
  KILN_ASSIGN_OR_RETURN(LoadedCheckpoint loaded,
                        CheckpointStore::load(info.path));
  if (loaded.step != info.step)
    return dataLoss(info.path, ": loaded step ", loaded.step);
  std::vector<NamedTensor> tensors = checkpointTensors();
  size_t modelCount = 0;
  for (const NamedTensor &t : tensors) {
    const SafetensorsFile &file = t.optimizer ? loaded.optimizer : loaded.model;
    modelCount += t.optimizer ? 0 : 1;
    std::vector<float> expected =
        expectedTensor(info.step, t.index, elementCount(t.shape));
    std::vector<float> actual(expected.size());
    KILN_RETURN_IF_ERROR(
        file.readInto(t.name, TensorDType::kF32, t.shape, actual.data()));
    if (std::memcmp(actual.data(), expected.data(),
                    expected.size() * sizeof(float)) != 0)
      return dataLoss(file.path(), ": tensor '", t.name,
                      "' does not hold the values of step ", info.step);
  }
  if (loaded.model.entries().size() != modelCount ||
      loaded.optimizer.entries().size() != tensors.size() - modelCount)
    return dataLoss(info.path, ": unexpected extra tensors");
  const json &state = loaded.trainerState;
  auto rng = state.find("rng");
  if (state.value("data_position", int64_t(-1)) != info.step * 1000 ||
      rng == state.end() || !rng->is_object() ||
      rng->value("counter", int64_t(-1)) != info.step * 3)
    return dataLoss(info.path, "/trainer_state.json: wrong contents for step ",
                    info.step);
  if (loaded.model.metadata().count("format") == 0 ||
      loaded.model.metadata().at("format") != "pt" ||
      loaded.model.metadata().count("kiln_step") == 0 ||
      loaded.model.metadata().at("kiln_step") != std::to_string(info.step))
    return dataLoss(loaded.model.path(), ": wrong __metadata__");
  return okStatus();
}

Status runSave(const std::string &dir) {
  KILN_ASSIGN_OR_RETURN(CheckpointStore store,
                        CheckpointStore::open(dir, kKeepLast));
  KILN_ASSIGN_OR_RETURN(std::optional<CheckpointInfo> latest, store.latest());
  int64_t step = 1;
  if (latest) {
    // Resume as a trainer would: the checkpoint must load and be right.
    KILN_RETURN_IF_ERROR(verifyCheckpoint(*latest));
    step = latest->step + 1;
  }
  for (;; ++step) {
    KILN_RETURN_IF_ERROR(saveStep(store, step));
    std::printf("saved %lld\n", static_cast<long long>(step));
    std::fflush(stdout);
  }
}

Status runVerify(const std::string &dir) {
  KILN_ASSIGN_OR_RETURN(CheckpointStore store,
                        CheckpointStore::open(dir, kKeepLast));
  KILN_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> committed, store.list());
  // By construction every step-* directory is committed: one without the
  // marker means a rename happened before the files were complete.
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, listDirectory(dir));
  for (const std::string &name : names)
    if (name.rfind("step-", 0) == 0 &&
        !fileExists(dir + "/" + name + "/" + kCheckpointCommitMarker))
      return dataLoss(dir, "/", name, ": a step directory without the ",
                      kCheckpointCommitMarker, " marker");
  // A kill between commit and prune leaves one extra checkpoint.
  if (committed.size() > kKeepLast + 1)
    return dataLoss(dir, ": ", committed.size(),
                    " committed checkpoints, more than keep-last ", kKeepLast,
                    " + 1");
  for (const CheckpointInfo &info : committed)
    KILN_RETURN_IF_ERROR(verifyCheckpoint(info));
  if (committed.empty())
    std::printf("none\n");
  else
    std::printf("%lld\n", static_cast<long long>(committed.back().step));
  return okStatus();
}

Status runWrite(const std::string &dir, int64_t step) {
  KILN_ASSIGN_OR_RETURN(CheckpointStore store, CheckpointStore::open(dir, 0));
  KILN_RETURN_IF_ERROR(saveStep(store, step));
  KILN_ASSIGN_OR_RETURN(std::optional<CheckpointInfo> latest, store.latest());
  if (!latest)
    return internalError(dir, ": no checkpoint after saving one");
  KILN_RETURN_IF_ERROR(verifyCheckpoint(*latest));
  std::printf("%s\n", latest->path.c_str());
  return okStatus();
}

Status runDump(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  json out = {{"metadata", file.metadata()}, {"tensors", json::object()}};
  static const char *kHex = "0123456789abcdef";
  for (const SafetensorsEntry &entry : file.entries()) {
    std::string hex;
    for (unsigned char c : file.bytes(entry)) {
      hex.push_back(kHex[c >> 4]);
      hex.push_back(kHex[c & 15]);
    }
    out["tensors"][entry.name] = {{"dtype", tensorDTypeName(entry.dtype)},
                                  {"shape", entry.shape},
                                  {"hex", hex}};
  }
  std::printf("%s\n", out.dump().c_str());
  return okStatus();
}

int usage() {
  std::fprintf(stderr, "usage: checkpoint-stress save DIR | verify DIR | "
                       "write DIR STEP | dump FILE\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return usage();
  std::string mode = argv[1], target = argv[2];
  Status status;
  if (mode == "save" && argc == 3)
    status = runSave(target);
  else if (mode == "verify" && argc == 3)
    status = runVerify(target);
  else if (mode == "write" && argc == 4)
    status = runWrite(target, std::atoll(argv[3]));
  else if (mode == "dump" && argc == 3)
    status = runDump(target);
  else
    return usage();
  if (!status.ok()) {
    std::fprintf(stderr, "checkpoint-stress %s: error: %s\n", mode.c_str(),
                 status.message().c_str());
    return 1;
  }
  return 0;
}
