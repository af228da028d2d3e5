//===- FileIO.h - Whole-file reads and crash-safe writes ------------------===//
//
// Every file the runtime writes (checkpoints, safetensors dumps, cached kernel
// libraries, kept kernel sources) goes through writeFileAtomically: a reader
// either sees the old file or the complete new one, never a torn write from
// a killed run. Reads return the whole file; artifacts and data sets in this
// issue fit in memory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FILEIO_H
#define KILN_RUNTIME_FILEIO_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// Reads all bytes of `path`. Errors name the path and the OS reason.
StatusOr<std::vector<uint8_t>> readFileBytes(const std::string &path);

// contentHash64 (Hash.h) of the file's bytes, as "ch64:<16 hex digits>";
// read through a mapping, so a file of many GB costs no RAM.
StatusOr<std::string> fileContentHash(const std::string &path);

// Writes the concatenation of `chunks` to `path` via a temp file in the same
// directory, fsync, rename, and fsync of the directory.
Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &chunks);

// Creates `dir` and its parents (like mkdir -p).
Status createDirectories(const std::string &dir);

bool fileExists(const std::string &path);

bool isDirectory(const std::string &path);

// fsync(2) of a directory, so that the entries created, renamed or removed
// in it survive a crash (POSIX leaves a rename's durability to this).
Status syncDirectory(const std::string &dir);

// rename(2) with errors naming both paths. Atomic within one file system;
// replaces an existing file (or an empty directory) at `to`.
Status renamePath(const std::string &from, const std::string &to);

// Removes `path` and, if it is a directory, everything below it (rm -rf).
// A missing path is not an error.
Status removeRecursively(const std::string &path);

// The names in `dir` (not "." or ".."), unsorted.
StatusOr<std::vector<std::string>> listDirectory(const std::string &dir);

} // namespace kiln::rt

#endif // KILN_RUNTIME_FILEIO_H
