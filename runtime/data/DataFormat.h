//===- DataFormat.h - Which token format a --data spec is read as ---------===//
//
// kiln-run reads training tokens from several formats. The user may name the
// format (--data-format) or leave it to detection (auto): a file that starts
// with an llm.c magic is a shard, a .bin file without one is an error (it is
// almost certainly a headerless nanoGPT file or a corrupt shard, and reading
// it as text would train on garbage without a word), anything else is
// byte-level text. The spec "random" selects random tokens for benchmarks.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_DATAFORMAT_H
#define KILN_RUNTIME_DATA_DATAFORMAT_H

#include "runtime/Status.h"

#include <string_view>

namespace kiln::rt::data {

enum class DataFormat {
  kAuto,    // detect per file (see the banner)
  kText,    // byte-level text: every byte one token, vocabulary 256
  kLlmc,    // llm.c shard: GPT-2 (uint16) or Llama-3 (uint32), by its magic
  kNanoGpt, // headerless uint16 tokens (nanoGPT's train.bin / val.bin)
  kRandom,  // uniformly random token ids, no files
};

// "auto", "text", "llmc", "nanogpt", "random"; anything else is an error
// listing the accepted names.
StatusOr<DataFormat> parseDataFormat(std::string_view name);

// The flag spelling of `format` (the inverse of parseDataFormat).
const char *dataFormatName(DataFormat format);

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_DATAFORMAT_H
