//===- TokenWindows.cpp - A corpus cut into training windows --------------===//

#include "runtime/data/TokenWindows.h"

#include "runtime/data/MappedFile.h"

#include <sys/stat.h>

#include <algorithm>

namespace kiln::rt::data {

StatusOr<TokenWindows> TokenWindows::create(TokenCorpus corpus, int64_t seq,
                                            int64_t vocab) {
  if (seq <= 0)
    return invalidArgument("sequence length must be positive, got ", seq);
  if (vocab <= 0)
    return invalidArgument("vocabulary size must be positive, got ", vocab);
  TokenWindows windows(std::move(corpus), seq, vocab);
  const TokenCorpus &c = windows.corpus_;
  windows.firstWindow_.reserve(c.numFiles() + 1);
  windows.firstWindow_.push_back(0);
  int64_t longest = 0;
  for (size_t f = 0; f < c.numFiles(); ++f) {
    int64_t tokens = c.fileTokens(f);
    longest = std::max(longest, tokens);
    uint64_t count = tokens > seq ? uint64_t(tokens - 1) / uint64_t(seq) : 0;
    windows.firstWindow_.push_back(windows.firstWindow_.back() + count);
  }
  if (windows.size() == 0)
    return invalidArgument(
        "data ", c.spec(), " (", c.describe(),
        ") has no training window: a window is seq + 1 = ", seq + 1,
        " tokens within one file, but the longest file has ", longest,
        " tokens");
  return windows;
}

TokenWindows::Location TokenWindows::locate(uint64_t window) const {
  // The last file whose first window is <= window (files without windows
  // have the same first window as their successor and are skipped).
  auto it = std::upper_bound(firstWindow_.begin(), firstWindow_.end(), window);
  size_t file = static_cast<size_t>(it - firstWindow_.begin()) - 1;
  Location location;
  location.file = file;
  location.firstToken =
      static_cast<int64_t>(window - firstWindow_[file]) * seq_;
  return location;
}

namespace {

// What the guarded copy of one window reads and writes (readMappedSafely:
// nothing here has a destructor).
struct WindowCopy {
  const TokenCorpus *corpus;
  size_t file;
  int64_t first, seq, vocab;
  int32_t *inputs, *targets;
  int64_t badOffset = -1; // the first id not below vocab
  uint32_t badId = 0;
  int64_t reached = 0; // the offset being read (where a SIGBUS stopped it)
};

void copyWindow(void *context) {
  WindowCopy &c = *static_cast<WindowCopy *>(context);
  for (int64_t t = 0; t <= c.seq; ++t) {
    c.reached = c.first + t;
    uint32_t id = c.corpus->token(c.file, c.reached);
    if (static_cast<int64_t>(id) >= c.vocab) {
      c.badOffset = c.reached;
      c.badId = id;
      return;
    }
    if (t < c.seq)
      c.inputs[t] = static_cast<int32_t>(id);
    if (t > 0)
      c.targets[t - 1] = static_cast<int32_t>(id);
  }
}

} // namespace

// The error of a window that reads past the end of its file as it is now.
Status TokenWindows::cutShort(size_t file, int64_t index) const {
  const std::string &path = corpus_.filePath(file);
  struct stat info;
  std::string now = ::stat(path.c_str(), &info) == 0
                        ? detail::concat("is ", static_cast<long long>(info.st_size),
                                         " bytes now")
                        : std::string("is gone");
  return dataLoss("data file ", path, ": cannot read ",
                  corpus_.describeOffset(file, index),
                  ": the file was cut short after it was opened (it ", now,
                  "); was it rewritten while training?");
}

Status TokenWindows::read(uint64_t window, int32_t *inputs,
                          int32_t *targets) const {
  if (window >= size())
    return internalError("window ", window, " out of range (", size(),
                         " windows)");
  Location at = locate(window);
  WindowCopy copy{&corpus_, at.file, at.firstToken, seq_, vocab_, inputs, targets};
  if (!readMappedSafely(copyWindow, &copy))
    return cutShort(at.file, copy.reached);
  // A file cut inside a page faults only past that page: the rest of the
  // page reads zeros. So the file must still hold the whole window now.
  int64_t onDisk = corpus_.tokensOnDiskNow(at.file);
  if (onDisk < at.firstToken + seq_ + 1)
    return cutShort(at.file, std::max(onDisk, at.firstToken));
  if (copy.badOffset >= 0)
    return invalidArgument(
        "data file ", corpus_.filePath(at.file), ": token id ", copy.badId, " at ",
        corpus_.describeOffset(at.file, copy.badOffset),
        " is not below the model's vocabulary size ", vocab_);
  return okStatus();
}

} // namespace kiln::rt::data
