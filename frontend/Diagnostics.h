//===- Diagnostics.h - Source buffers and error printing --------*- C++ -*-===//
//
// The frontend reports every user mistake as
//
//   path:line:col: error: message
//     <the source line>
//     <spaces>^
//
// This printer is deliberately independent of MLIR so that the lexer, parser
// and semantic checks can be tested (and reused by other tools) without an
// MLIRContext. It never aborts: callers check `hadError()` and return failure.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_DIAGNOSTICS_H
#define KILN_FRONTEND_DIAGNOSTICS_H

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace kiln {

/// A position in the model file. Lines and columns are 1-based; `offset` is
/// the byte offset (used to order declarations by their place in the file).
/// A default-constructed location (line 0) means "no position" (e.g. -D).
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
  uint32_t offset = 0;
  bool isValid() const { return line != 0; }
};

/// Owns the text of one model file and answers "what is on line N".
class SourceFile {
public:
  SourceFile(std::string path, std::string text);

  const std::string &path() const { return path_; }
  const std::string &text() const { return text_; }
  /// The text of 1-based line `line`, without its newline ("" if out of range).
  std::string lineText(uint32_t line) const;
  /// Location just past the last character (where EOF errors point).
  SourceLoc endLoc() const;

private:
  std::string path_;
  std::string text_;
  std::vector<uint32_t> lineStarts_; // byte offset of each line's first char
};

/// Prints diagnostics against one SourceFile and remembers whether any error
/// was reported.
class DiagnosticPrinter {
public:
  DiagnosticPrinter(const SourceFile &file, llvm::raw_ostream &os)
      : file_(file), os_(os) {}

  /// `path:line:col: error: msg` plus source line and caret; without a valid
  /// location just `path: error: msg`.
  void error(SourceLoc loc, const std::string &msg);
  /// A follow-up `note:` (e.g. "previous definition is here").
  void note(SourceLoc loc, const std::string &msg);
  /// Compilation goes on; the message says what may not be what was meant.
  void warning(SourceLoc loc, const std::string &msg);

  bool hadError() const { return errorCount_ != 0; }
  unsigned errorCount() const { return errorCount_; }
  const SourceFile &file() const { return file_; }

private:
  void emit(SourceLoc loc, const char *kind, const std::string &msg);

  const SourceFile &file_;
  llvm::raw_ostream &os_;
  unsigned errorCount_ = 0;
};

} // namespace kiln

#endif // KILN_FRONTEND_DIAGNOSTICS_H
