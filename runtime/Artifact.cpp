//===- Artifact.cpp - Structural checks and loading of a .kart file -------===//
//
// The cheap checks come first so a foreign file gets a precise message
// ("not a Kiln artifact") rather than "verification failed":
//   1. empty / too small to hold a flatbuffer root offset and identifier,
//   2. file identifier "KART",
//   3. flatbuffers::Verifier over the whole buffer (every offset in bounds),
//   4. format version,
//   5. content checks (ArtifactVerifier.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"

#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/DTypeBytes.h"

#include "runtime/FileIO.h"

#include <algorithm>
#include <cstdio>

namespace kiln::rt {

namespace {

// 0x-prefixed 16-digit hex, for checksums in messages.
std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(value));
  return buf;
}

// Renders up to four identifier bytes for a message, escaping non-printable
// ones like a C string literal ('PK\x03\x04' for a zip file).
std::string printableIdentifier(const uint8_t *bytes, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    uint8_t c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// A flatbuffer starts with a little-endian offset, so its first bytes are
// almost never all printable; a text file (an MLIR dump passed by mistake,
// a .kiln model) always is. Used only to add a hint to the error.
bool looksLikeText(const std::vector<uint8_t> &bytes) {
  size_t n = std::min<size_t>(bytes.size(), 64);
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = bytes[i];
    if (!(c == '\n' || c == '\t' || c == '\r' || (c >= 0x20 && c < 0x7f)))
      return false;
  }
  return true;
}

} // namespace

size_t dtypeSize(schema::DType dtype) {
  return static_cast<size_t>(schema::dtypeBytes(dtype));
}

std::string bufferName(const schema::Buffer &buffer) {
  if (!buffer.name() || buffer.name()->size() == 0)
    return "<unnamed>";
  return buffer.name()->str();
}

std::vector<int64_t> bufferShape(const schema::Buffer &buffer) {
  if (!buffer.shape())
    return {};
  return {buffer.shape()->begin(), buffer.shape()->end()};
}

int64_t Artifact::axisRanks(std::string_view axis) const {
  if (root_->mesh())
    for (const schema::MeshAxis *a : *root_->mesh())
      if (a->name() && a->name()->string_view() == axis)
        return a->size();
  return 1;
}

std::string Artifact::meshText() const {
  std::string text = "[";
  if (root_->mesh())
    for (const schema::MeshAxis *a : *root_->mesh())
      text += (text.size() > 1 ? ", " : "") +
              (a->name() ? a->name()->str() : std::string("?")) + " = " +
              std::to_string(a->size());
  return text + "]";
}

int64_t Artifact::axisStride(std::string_view axis) const {
  // Row-major: the axes after `axis` vary faster.
  int64_t stride = 1;
  if (root_->mesh())
    for (auto it = root_->mesh()->rbegin(); it != root_->mesh()->rend(); ++it) {
      if ((*it)->name() && (*it)->name()->string_view() == axis)
        return stride;
      stride *= std::max<int64_t>((*it)->size(), 1);
    }
  return stride;
}

int64_t Artifact::axisIndex(int64_t rank, std::string_view axis) const {
  return (rank / axisStride(axis)) % axisRanks(axis);
}

bool isPadded(const schema::Buffer &buffer) {
  return buffer.logical_shape() && buffer.logical_shape()->size() != 0;
}

bool isShard(const schema::Buffer &buffer) {
  return buffer.shard_axis() && buffer.shard_axis()->size() != 0;
}

std::vector<int64_t> wholeShape(const schema::Buffer &buffer) {
  if (!isShard(buffer) || !buffer.whole_shape())
    return bufferShape(buffer);
  return {buffer.whole_shape()->begin(), buffer.whole_shape()->end()};
}

std::vector<int64_t> logicalShape(const schema::Buffer &buffer) {
  if (!isPadded(buffer))
    return wholeShape(buffer);
  return {buffer.logical_shape()->begin(), buffer.logical_shape()->end()};
}

std::string Artifact::describeBuffer(uint32_t index) const {
  return detail::concat("buffer ", index, " ('", bufferName(buffer(index)),
                        "')");
}

StatusOr<std::unique_ptr<Artifact>>
Artifact::loadFile(const std::string &path) {
  auto bytes = readFileBytes(path);
  if (!bytes.ok())
    return bytes.status();
  return loadBytes(std::move(bytes).value(), path);
}

StatusOr<std::unique_ptr<Artifact>>
Artifact::loadBytes(std::vector<uint8_t> bytes, std::string displayName) {
  const std::string prefix = displayName + ": ";
  // A flatbuffer starts with a 4-byte root offset, then the identifier.
  constexpr size_t kHeaderBytes =
      sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;
  if (bytes.empty())
    return dataLoss(prefix, "empty file (0 bytes), not a Kiln artifact");
  if (bytes.size() < kHeaderBytes)
    return dataLoss(prefix, "too small to be a Kiln artifact (", bytes.size(),
                    " bytes)");
  if (!schema::ArtifactBufferHasIdentifier(bytes.data()))
    return invalidArgument(
        prefix, "not a Kiln artifact (file identifier is '",
        printableIdentifier(bytes.data() + sizeof(flatbuffers::uoffset_t),
                            flatbuffers::kFileIdentifierLength),
        "', expected '", schema::ArtifactIdentifier(), "')",
        looksLikeText(bytes) ? "; this is a text file (MLIR or a model "
                               "file?), not the binary artifact kilnc writes"
                             : "");

  // The integrity trailer: any flipped byte is caught here, before the
  // structure and contents are read (runtime/schema/ArtifactChecksum.h).
  uint64_t stored = 0;
  if (!schema::readChecksumTrailer(bytes.data(), bytes.size(), stored)) {
    // A trailer before the end: bytes were appended, not lost.
    const char *magic = schema::kChecksumMagic;
    auto last = std::find_end(bytes.begin(), bytes.end(), magic,
                              magic + sizeof(schema::kChecksumMagic));
    size_t end = static_cast<size_t>(last - bytes.begin()) + schema::kChecksumTrailerBytes;
    if (last != bytes.end() && end < bytes.size())
      return dataLoss(prefix, bytes.size() - end,
                      " stray bytes follow the checksum trailer that ends every "
                      "artifact; something appended to the file after kilnc wrote it");
    return dataLoss(prefix, "truncated (the checksum trailer kilnc writes at "
                            "the end of every artifact is missing)");
  }
  bytes.resize(bytes.size() - schema::kChecksumTrailerBytes);
  uint64_t computed = schema::artifactChecksum(bytes.data(), bytes.size());
  if (computed != stored)
    return dataLoss(prefix, "corrupt: checksum mismatch (stored ", hex(stored),
                    ", computed ", hex(computed),
                    "); the file changed after kilnc wrote it");

  // Depth and table limits well above any real model but low enough that a
  // crafted file cannot make verification itself expensive.
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(),
                                 /*max_depth=*/64, /*max_tables=*/10000000);
  if (!schema::VerifyArtifactBuffer(verifier))
    return dataLoss(prefix,
                    "truncated or corrupt (flatbuffers verification failed)");

  std::unique_ptr<Artifact> artifact(
      new Artifact(std::move(bytes), std::move(displayName)));
  artifact->root_ = schema::GetArtifact(artifact->bytes_.data());

  uint32_t version = artifact->root_->version();
  if (version != kArtifactVersion)
    return failedPrecondition(
        prefix, "artifact format version ", version,
        ", but this kiln-run reads version ", kArtifactVersion,
        " (recompile the model with a matching kilnc)");

  Status contents = verifyArtifactContents(*artifact->root_, artifact->infos_);
  if (!contents.ok())
    return contents.withPrefix(prefix);
  for (const schema::Program *program : *artifact->root_->programs())
    artifact->programs_[static_cast<int>(
        *programKindFromName(program->name()->string_view()))] = program;
  return artifact;
}

} // namespace kiln::rt
