//===- Diagnostics.cpp - Source buffers and error printing ----------------===//
//
// See Diagnostics.h. The caret line copies tabs from the source line so the
// caret stays under the right character whatever the terminal's tab width.
//
//===----------------------------------------------------------------------===//

#include "frontend/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

namespace kiln {

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  // Lines end at "\n", "\r\n" or a lone "\r" (as the lexer counts them).
  for (uint32_t i = 0, e = text_.size(); i < e; ++i)
    if (text_[i] == '\n' || (text_[i] == '\r' && (i + 1 == e || text_[i + 1] != '\n')))
      lineStarts_.push_back(i + 1);
}

std::string SourceFile::lineText(uint32_t line) const {
  if (line == 0 || line > lineStarts_.size())
    return "";
  uint32_t begin = lineStarts_[line - 1];
  uint32_t end = begin;
  while (end < text_.size() && text_[end] != '\n' && text_[end] != '\r')
    ++end;
  return text_.substr(begin, end - begin);
}

SourceLoc SourceFile::endLoc() const {
  SourceLoc loc;
  loc.line = lineStarts_.size();
  // A trailing newline leaves an empty last line: point past the last real
  // character instead, which is where a reader expects "end of file".
  if (loc.line > 1 && lineStarts_.back() == text_.size())
    --loc.line;
  loc.col = lineText(loc.line).size() + 1;
  loc.offset = text_.size();
  return loc;
}

void DiagnosticPrinter::error(SourceLoc loc, const std::string &msg) {
  ++errorCount_;
  emit(loc, "error", msg);
}

void DiagnosticPrinter::note(SourceLoc loc, const std::string &msg) {
  emit(loc, "note", msg);
}

void DiagnosticPrinter::warning(SourceLoc loc, const std::string &msg) {
  emit(loc, "warning", msg);
}

void DiagnosticPrinter::emit(SourceLoc loc, const char *kind,
                             const std::string &msg) {
  if (!loc.isValid()) {
    os_ << file_.path() << ": " << kind << ": " << msg << "\n";
    os_.flush();
    return;
  }
  os_ << file_.path() << ":" << loc.line << ":" << loc.col << ": " << kind
      << ": " << msg << "\n";
  std::string line = file_.lineText(loc.line);
  os_ << line << "\n";
  std::string caret;
  for (uint32_t i = 0; i + 1 < loc.col; ++i)
    caret += (i < line.size() && line[i] == '\t') ? '\t' : ' ';
  os_ << caret << "^\n";
  os_.flush();
}

} // namespace kiln
