//===- Artifact.h - Loading and verifying a Kiln training artifact --------===//
//
// A `.kart` file is a flatbuffer (runtime/schema/artifact.fbs) written by
// codegen. Nothing in it is trusted: `Artifact::loadFile` checks, in order,
// that the file is non-empty, carries the "KART" identifier, passes the
// flatbuffers verifier (structure), has the runtime's format version, and then
// that every field is consistent (contents: indices in range, sizes that match
// shapes, one loss, ...). Only a fully verified artifact is handed to the
// backend, so the executor can index buffers without further checks.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_H

#include "runtime/Status.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/artifact_generated.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// The format version this runtime reads (defined next to the schema so
// codegen writes the same number).
constexpr uint32_t kArtifactVersion = schema::kArtifactVersion;

// Bytes per element of `dtype`, or 0 for a value outside the enum.
size_t dtypeSize(schema::DType dtype);

// What the verifier derived for each buffer, so later stages need not
// recompute sizes or walk alias chains.
struct BufferInfo {
  int64_t elements = 0; // product of the shape (1 for a scalar)
  int64_t bytes = 0;    // elements * dtypeSize
  uint32_t storage = 0; // index of the buffer owning the storage (itself
                        // unless an alias; alias chains are resolved)
  int64_t offset = 0;   // byte offset of the storage in the arena (the
                        // memory plan's Buffer.offset, aliases resolved):
                        // every backend's arena places the buffer at
                        // base + offset, base aligned to kArenaAlignment
};

// The programs of a training step (see artifact.fbs): "step" (forward +
// backward of one micro-batch, run grad_accum times), "update" (norm, clip,
// guard, optimizer), "eval" (forward loss only; absent without inputs).
enum class ProgramKind { kStep = 0, kUpdate = 1, kEval = 2 };
constexpr int kNumProgramKinds = 3;
std::optional<ProgramKind> programKindFromName(std::string_view name);

class Artifact {
public:
  // Reads and verifies `path`. Every error message starts with "<path>: ".
  static StatusOr<std::unique_ptr<Artifact>> loadFile(const std::string &path);
  // Verifies in-memory bytes; `displayName` stands in for the path in errors.
  static StatusOr<std::unique_ptr<Artifact>>
  loadBytes(std::vector<uint8_t> bytes, std::string displayName);

  const schema::Artifact &root() const { return *root_; }
  // The path (or display name) used to prefix messages.
  const std::string &name() const { return name_; }
  const std::vector<uint8_t> &bytes() const { return bytes_; }

  uint32_t numBuffers() const { return root_->buffers()->size(); }
  const schema::Buffer &buffer(uint32_t index) const {
    return *root_->buffers()->Get(index);
  }
  const BufferInfo &bufferInfo(uint32_t index) const { return infos_[index]; }
  // Bytes of the one arena holding every buffer (the memory plan's peak).
  int64_t arenaBytes() const { return root_->arena_bytes(); }

  int64_t batch() const { return root_->train()->batch(); }
  int64_t seq() const { return root_->train()->seq(); }
  int64_t gradAccum() const { return root_->train()->grad_accum(); }
  // Processes the artifact runs as: the product of its mesh axes (1 without).
  int64_t ranks() const {
    int64_t ranks = 1;
    if (root_->mesh())
      for (const schema::MeshAxis *axis : *root_->mesh())
        ranks *= axis->size();
    return ranks;
  }
  // The ranks that split the batch (the mesh's data axis; 1 without): the
  // global batch is batch() of each of them. Tensor-parallel ranks share
  // their rows.
  int64_t dataRanks() const { return axisRanks("data"); }
  // "[data = 4, model = 2]" ("[]" without a mesh).
  std::string meshText() const;
  // The ranks along mesh axis `axis` (1 for an axis the mesh lacks), and
  // rank `rank`'s index along it: ranks are numbered row-major over
  // Artifact.mesh, its last axis varying fastest.
  int64_t axisRanks(std::string_view axis) const;
  int64_t axisIndex(int64_t rank, std::string_view axis) const;
  // How far apart in rank two neighbours along `axis` are (the product of
  // the sizes of the axes after it).
  int64_t axisStride(std::string_view axis) const;

  // The program of `kind`, or null when the artifact has none ("step" and
  // "update" always exist in a verified artifact).
  const schema::Program *program(ProgramKind kind) const {
    return programs_[static_cast<int>(kind)];
  }

  // "buffer 3 ('h')": how messages refer to a buffer.
  std::string describeBuffer(uint32_t index) const;

private:
  Artifact(std::vector<uint8_t> bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)) {}

  std::vector<uint8_t> bytes_;
  std::string name_;
  const schema::Artifact *root_ = nullptr;
  std::vector<BufferInfo> infos_;
  const schema::Program *programs_[kNumProgramKinds] = {};
};

// The field-by-field content checks, run after the structural verifier.
// Fills `infos` (one per buffer). Messages carry no file prefix. Exposed for
// the unit tests.
Status verifyArtifactContents(const schema::Artifact &artifact,
                              std::vector<BufferInfo> &infos);

// A buffer's name or "<unnamed>", for messages.
std::string bufferName(const schema::Buffer &buffer);

// A buffer's shape (empty for a scalar).
std::vector<int64_t> bufferShape(const schema::Buffer &buffer);

// Whether the buffer is one rank's slice of a tensor (ZeRO: shard_axis).
bool isShard(const schema::Buffer &buffer);

// The shape of the tensor a buffer holds: its whole_shape for a ZeRO shard,
// else its shape.
std::vector<int64_t> wholeShape(const schema::Buffer &buffer);

// The user's shape of a buffer: its logical_shape when the compiler padded it
// (pad-dims), else its whole shape. Checkpoints, --init-from and reports use
// this.
std::vector<int64_t> logicalShape(const schema::Buffer &buffer);

// Whether the compiler padded the buffer (it has a logical_shape).
bool isPadded(const schema::Buffer &buffer);

} // namespace kiln::rt

#endif // KILN_RUNTIME_ARTIFACT_H
