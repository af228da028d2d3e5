//===- Lexer.h - Tokens of the Kiln model language --------------*- C++ -*-===//
//
// A hand-written lexer. Newlines are not tokens: the grammar is unambiguous
// without them (every statement starts with a keyword or `name =`), so the
// parser treats `;` as an optional separator and otherwise ignores layout.
// `#` starts a comment that runs to the end of the line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_LEXER_H
#define KILN_FRONTEND_LEXER_H

#include "frontend/Diagnostics.h"

#include <string>

namespace kiln {

enum class TokenKind {
  Eof,
  Error, // already diagnosed by the lexer
  Identifier,
  Number,
  // Keywords.
  KwModel,
  KwConfig,
  KwParam,
  KwInput,
  KwBlock,
  KwReturn,
  KwRepeat,
  KwTrain,
  KwMetric,
  // Punctuation.
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Semicolon,
  Equal,
  Plus,
  Minus,
  Star,
  StarStar,
  Slash,
  At,
  // Comparisons (score and mask expressions of attention).
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  EqualEqual,
  BangEqual,
};

/// How a token is spelled in messages: "'('", "identifier", "end of file".
std::string describeTokenKind(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::Eof;
  SourceLoc loc;
  std::string text;        // the spelling
  bool isInteger = false;  // for Number: no '.' and no exponent
  long long intValue = 0;  // for integer Numbers
  double floatValue = 0.0; // for all Numbers

  bool is(TokenKind k) const { return kind == k; }
};

class Lexer {
public:
  Lexer(const SourceFile &file, DiagnosticPrinter &diag)
      : text_(file.text()), diag_(diag) {
    // A UTF-8 byte order mark (what some Windows editors write first) is
    // not part of the text; columns count from after it.
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0)
      pos_ = 3;
  }

  /// Returns the next token; a malformed one is reported and returned as
  /// TokenKind::Error.
  Token next();

private:
  /// How an unexpected character appears in a message: "character 'x'",
  /// a whole UTF-8 character with its code point, or "byte '\xNN'".
  std::string describeCharacter(char first);
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance();
  SourceLoc here() const { return {line_, col_, (uint32_t)pos_}; }
  void skipSpaceAndComments();
  Token lexNumber();

  const std::string &text_;
  DiagnosticPrinter &diag_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

} // namespace kiln

#endif // KILN_FRONTEND_LEXER_H
