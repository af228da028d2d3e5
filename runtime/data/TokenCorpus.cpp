//===- TokenCorpus.cpp - The token files of a --data spec, or random tokens
//===//

#include "runtime/data/TokenCorpus.h"

#include "runtime/data/RandomTokens.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <glob.h>

namespace kiln::rt::data {

namespace {

// Frees the glob(3) result on every path out.
struct GlobResult {
  glob_t value{};
  ~GlobResult() { globfree(&value); }
};

const std::string &randomFileName() {
  static const std::string name = kRandomDataSpec;
  return name;
}

} // namespace

StatusOr<std::vector<std::string>>
expandDataPattern(const std::string &pattern) {
  if (pattern.empty())
    return invalidArgument("data pattern is empty");
  GlobResult result;
  int rc = ::glob(pattern.c_str(), 0, nullptr, &result.value);
  if (rc == GLOB_NOMATCH)
    return notFound("data pattern ", pattern, " matches no file");
  if (rc == GLOB_NOSPACE)
    return internalError("data pattern ", pattern, ": glob ran out of memory");
  if (rc != 0)
    return invalidArgument("data pattern ", pattern,
                           ": cannot read a directory it names");
  std::vector<std::string> paths(result.value.gl_pathv,
                                 result.value.gl_pathv + result.value.gl_pathc);
  // glob sorts by the locale's collation; bytewise order is the same on
  // every machine, which multi-rank runs and resume depend on.
  std::sort(paths.begin(), paths.end());
  return paths;
}

StatusOr<TokenCorpus> TokenCorpus::open(const std::string &patternOrRandom,
                                        DataFormat format,
                                        int64_t vocabForRandom, uint64_t seed) {
  auto state = std::make_shared<State>();
  state->spec = patternOrRandom;

  if (format == DataFormat::kRandom || patternOrRandom == kRandomDataSpec) {
    if (patternOrRandom != kRandomDataSpec)
      return invalidArgument("data format random reads no files, but the "
                             "data spec is '",
                             patternOrRandom, "' (use --data random)");
    if (format != DataFormat::kRandom && format != DataFormat::kAuto)
      return invalidArgument("data spec random cannot be read as format ",
                             dataFormatName(format));
    if (vocabForRandom <= 0)
      return invalidArgument("random tokens need a vocabulary size > 0, got ",
                             vocabForRandom);
    state->random = true;
    state->randomKey = randomTokenKey(seed);
    state->randomVocab = static_cast<uint64_t>(vocabForRandom);
    return TokenCorpus(std::move(state));
  }

  KILN_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                        expandDataPattern(patternOrRandom));
  for (const std::string &path : paths) {
    KILN_ASSIGN_OR_RETURN(TokenFile file, TokenFile::open(path, format));
    if (!state->files.empty() && file.kind() != state->files[0].kind())
      return invalidArgument("data pattern ", patternOrRandom,
                             " mixes formats: ", state->files[0].path(), " is ",
                             describeTokenFileKind(state->files[0].kind()),
                             " but ", path, " is ",
                             describeTokenFileKind(file.kind()));
    state->files.push_back(std::move(file));
  }
  return TokenCorpus(std::move(state));
}

size_t TokenCorpus::numFiles() const {
  return state_->random ? 1 : state_->files.size();
}

const std::string &TokenCorpus::filePath(size_t file) const {
  return state_->random ? randomFileName() : state_->files[file].path();
}

int64_t TokenCorpus::fileTokens(size_t file) const {
  return state_->random ? kRandomCorpusTokens : state_->files[file].size();
}

int64_t TokenCorpus::totalTokens() const {
  int64_t total = 0;
  for (size_t f = 0; f < numFiles(); ++f)
    total += fileTokens(f);
  return total;
}

uint32_t TokenCorpus::token(size_t file, int64_t index) const {
  if (state_->random)
    return randomToken(state_->randomKey, static_cast<uint64_t>(index),
                       state_->randomVocab);
  return state_->files[file].token(index);
}

int64_t TokenCorpus::tokensOnDiskNow(size_t file) const {
  if (state_->random)
    return kRandomCorpusTokens;
  return state_->files[file].tokensOnDiskNow();
}

std::string TokenCorpus::describeOffset(size_t file, int64_t index) const {
  if (state_->random)
    return detail::concat("token offset ", index);
  return detail::concat("token offset ", index, " (byte offset ",
                        state_->files[file].byteOffset(index), ")");
}

std::string TokenCorpus::describe() const {
  if (state_->random)
    return detail::concat("random tokens below ", state_->randomVocab);
  return detail::concat(numFiles(),
                        numFiles() == 1 ? " file of " : " files of ",
                        describeTokenFileKind(state_->files[0].kind()), ", ",
                        totalTokens(), " tokens");
}

} // namespace kiln::rt::data
