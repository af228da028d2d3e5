//===- TokenFile.cpp - One mapped token file and how its tokens are stored ===//

#include "runtime/data/TokenFile.h"

#include "runtime/data/LlmcShard.h"

#include <sys/stat.h>

#include <algorithm>

namespace kiln::rt::data {

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What `auto` makes of a file: llm.c by its magic; a .bin without a magic is
// an error (see DataFormat.h); anything else is text.
StatusOr<DataFormat> detectFormat(const MappedFile &file,
                                  const std::string &path) {
  if (startsWithLlmcMagic(file.data(), file.size()))
    return DataFormat::kLlmc;
  if (!endsWith(path, ".bin"))
    return DataFormat::kText;
  if (file.size() < sizeof(int32_t))
    return invalidArgument("data file ", path,
                           ": no llm.c magic (the file has only ", file.size(),
                           " bytes); for a headerless nanoGPT uint16 file use "
                           "format nanogpt");
  return invalidArgument("data file ", path, ": no llm.c magic (found ",
                         readInt32LE(file.data()),
                         "); for a headerless nanoGPT uint16 file use format "
                         "nanogpt");
}

} // namespace

const char *describeTokenFileKind(TokenFileKind kind) {
  switch (kind) {
  case TokenFileKind::kText:
    return "byte-level text";
  case TokenFileKind::kLlmcGpt2:
    return "an llm.c GPT-2 shard (uint16 tokens)";
  case TokenFileKind::kLlmcLlama3:
    return "an llm.c Llama-3 shard (uint32 tokens)";
  case TokenFileKind::kNanoGpt:
    return "a headerless nanoGPT file (uint16 tokens)";
  }
  return "unknown";
}

StatusOr<TokenFile> TokenFile::open(const std::string &path,
                                    DataFormat format) {
  if (format == DataFormat::kRandom)
    return internalError("TokenFile::open(", path,
                         "): random tokens have no file");
  KILN_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  if (format == DataFormat::kAuto) {
    KILN_ASSIGN_OR_RETURN(format, detectFormat(mapping, path));
  }

  TokenFile file;
  file.path_ = path;
  switch (format) {
  case DataFormat::kText:
    file.kind_ = TokenFileKind::kText;
    file.tokenBytes_ = 1;
    file.tokenCount_ = static_cast<int64_t>(mapping.size());
    break;
  case DataFormat::kNanoGpt:
    if (mapping.size() % 2 != 0)
      return dataLoss("data file ", path,
                      ": a nanoGPT uint16 file must have "
                      "an even number of bytes, but it has ",
                      mapping.size());
    file.kind_ = TokenFileKind::kNanoGpt;
    file.tokenBytes_ = 2;
    file.tokenCount_ = static_cast<int64_t>(mapping.size() / 2);
    break;
  case DataFormat::kLlmc: {
    if (mapping.size() >= sizeof(int32_t) &&
        !startsWithLlmcMagic(mapping.data(), mapping.size()))
      return invalidArgument("data file ", path, ": no llm.c magic (found ",
                             readInt32LE(mapping.data()), ", expected ",
                             kLlmcGpt2Magic, " or ", kLlmcLlama3Magic, ")");
    KILN_ASSIGN_OR_RETURN(
        LlmcShardLayout layout,
        parseLlmcShardHeader(mapping.data(), mapping.size(), path));
    file.kind_ = layout.magic == kLlmcGpt2Magic ? TokenFileKind::kLlmcGpt2
                                                : TokenFileKind::kLlmcLlama3;
    file.tokenBytes_ = layout.tokenBytes;
    file.headerBytes_ = kLlmcHeaderBytes;
    file.tokenCount_ = layout.tokenCount;
    break;
  }
  case DataFormat::kAuto:
  case DataFormat::kRandom:
    return internalError("TokenFile::open(", path, "): unresolved format");
  }
  file.tokens_ = mapping.data() + file.headerBytes_;
  file.mapping_ = std::move(mapping);
  return file;
}

int64_t TokenFile::tokensOnDiskNow() const {
  struct stat info;
  if (::stat(path_.c_str(), &info) != 0 ||
      static_cast<uint64_t>(info.st_dev) != mapping_.device() ||
      static_cast<uint64_t>(info.st_ino) != mapping_.inode())
    return tokenCount_;
  int64_t bytes = static_cast<int64_t>(info.st_size) - headerBytes_;
  return std::clamp<int64_t>(bytes / tokenBytes_, 0, tokenCount_);
}

} // namespace kiln::rt::data
