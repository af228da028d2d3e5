//===- TrainingSession.h - An artifact made ready to run training steps ---===//
//
// What training (Trainer.cpp) and the gradient check (GradientCheck.cpp)
// share: the buffers found by role, the data opened and checked against the
// model, the kernels compiled or fetched from the cache, the arena allocated
// and the parameters initialised from the seed, and one call that writes a
// step's inputs and scalars and runs the schedule.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGSESSION_H
#define KILN_RUNTIME_TRAININGSESSION_H

#include "runtime/Artifact.h"
#include "runtime/Status.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/KernelCompiler.h"
#include "runtime/data/TokenDataset.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

// Buffer indices the runtime reads or writes, found once by role + name
// (never by position, per the codegen contract).
struct BufferRoles {
  uint32_t loss = 0;
  std::optional<uint32_t> gradNorm, learningRate, stepCount, tokens, targets;
  std::vector<uint32_t> inputs; // every Input buffer
  std::vector<uint32_t> parameters, gradients;
};

BufferRoles findBufferRoles(const Artifact &artifact);

// The training data of `artifact`, checked to fit it (sequence length,
// vocabulary). An artifact with Input buffers needs data: an empty
// `dataPath` is then an error naming the inputs. One without inputs reads
// none: an empty path gives nullopt (a given path is still opened and
// checked, so a broken file is never silently ignored).
StatusOr<std::optional<TokenDataset>>
openTrainingData(const Artifact &artifact, const std::string &dataPath);

// "kernels: 12 compiled in 1.20 s (cold, PATH)": how the kernels were
// loaded, as kiln-run reports it before the first step.
void printKernelLoad(const cpu::KernelLibrary &kernels, FILE *out);

class TrainingSession {
public:
  // Compiles or fetches the kernels of `artifact`, allocates its buffers and
  // initialises every parameter from its Initializer and `seed` (Adam
  // moments start at zero from the zero-filled arena).
  static StatusOr<std::unique_ptr<TrainingSession>>
  create(std::unique_ptr<Artifact> artifact, uint64_t seed);

  const Artifact &artifact() const { return *artifact_; }
  const BufferRoles &roles() const { return roles_; }
  const cpu::KernelLibrary &kernels() const { return *kernels_; }
  cpu::Arena &arena() const { return *arena_; }
  cpu::Executor &executor() { return *executor_; }

  // Writes the [batch, seq] `tokens` and `targets` (ignored by an artifact
  // without inputs; may then be null), the learning rate and the 1-based
  // step count, then runs the schedule once.
  Status runStep(const int32_t *tokens, const int32_t *targets, double lr,
                 int64_t stepCount);

  float loss() const { return *arena_->as<float>(roles_.loss); }
  std::optional<float> gradNorm() const {
    if (!roles_.gradNorm)
      return std::nullopt;
    return *arena_->as<float>(*roles_.gradNorm);
  }

private:
  TrainingSession() = default;

  std::unique_ptr<Artifact> artifact_;
  BufferRoles roles_;
  std::unique_ptr<cpu::KernelLibrary> kernels_;
  std::unique_ptr<cpu::Arena> arena_;
  std::unique_ptr<cpu::Executor> executor_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAININGSESSION_H
