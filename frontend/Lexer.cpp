//===- Lexer.cpp - Tokens of the Kiln model language ----------------------===//
//
// See Lexer.h. Numbers follow C: `128`, `0.02`, `1e-5`, `.5`. Anything that
// runs straight on from a number (`1e`, `1.2.3`, `12abc`) is one bad literal,
// reported once, so the parser does not see a confusing token stream.
//
//===----------------------------------------------------------------------===//

#include "frontend/Lexer.h"
#include "frontend/ByteSize.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace kiln {

std::string describeTokenKind(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "end of file";
  case TokenKind::Error:
    return "invalid token";
  case TokenKind::Identifier:
    return "identifier";
  case TokenKind::Number:
    return "number";
  case TokenKind::KwModel:
    return "'model'";
  case TokenKind::KwConfig:
    return "'config'";
  case TokenKind::KwParam:
    return "'param'";
  case TokenKind::KwInput:
    return "'input'";
  case TokenKind::KwBlock:
    return "'block'";
  case TokenKind::KwReturn:
    return "'return'";
  case TokenKind::KwRepeat:
    return "'repeat'";
  case TokenKind::KwTrain:
    return "'train'";
  case TokenKind::KwMetric:
    return "'metric'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LBracket:
    return "'['";
  case TokenKind::RBracket:
    return "']'";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Semicolon:
    return "';'";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::StarStar:
    return "'**'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::At:
    return "'@'";
  case TokenKind::Less:
    return "'<'";
  case TokenKind::LessEqual:
    return "'<='";
  case TokenKind::Greater:
    return "'>'";
  case TokenKind::GreaterEqual:
    return "'>='";
  case TokenKind::EqualEqual:
    return "'=='";
  case TokenKind::BangEqual:
    return "'!='";
  }
  return "token";
}

static bool isIdentStart(char c) {
  return std::isalpha((unsigned char)c) || c == '_';
}
static bool isIdentChar(char c) {
  return std::isalnum((unsigned char)c) || c == '_';
}

void Lexer::advance() {
  if (pos_ >= text_.size())
    return;
  // A line ends at '\n', or at a '\r' not followed by one (old Mac files);
  // SourceFile's line starts count the same way.
  if (text_[pos_] == '\n' ||
      (text_[pos_] == '\r' && (pos_ + 1 == text_.size() || text_[pos_ + 1] != '\n'))) {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipSpaceAndComments() {
  while (pos_ < text_.size()) {
    char c = peek();
    if (c == '#') {
      while (pos_ < text_.size() && peek() != '\n' && peek() != '\r')
        advance();
    } else if (std::isspace((unsigned char)c)) {
      advance();
    } else {
      return;
    }
  }
}

Token Lexer::lexNumber() {
  Token tok;
  tok.loc = here();
  size_t start = pos_;
  bool ok = true, sawDot = false, sawExp = false;
  while (std::isdigit((unsigned char)peek()))
    advance();
  if (peek() == '.') {
    sawDot = true;
    advance();
    while (std::isdigit((unsigned char)peek()))
      advance();
  }
  // An exponent needs its digits: `1EiB` is a (bad) unit, not `1E` + `iB`.
  bool exponentDigits =
      std::isdigit((unsigned char)peek(1)) ||
      ((peek(1) == '+' || peek(1) == '-') && std::isdigit((unsigned char)peek(2)));
  if ((peek() == 'e' || peek() == 'E') && exponentDigits) {
    sawExp = true;
    advance();
    if (peek() == '+' || peek() == '-')
      advance();
    if (!std::isdigit((unsigned char)peek()))
      ok = false;
    while (std::isdigit((unsigned char)peek()))
      advance();
  }
  // A byte unit may follow directly (`60GiB`); anything else that sticks
  // to the literal is swallowed so it is reported as one token.
  size_t unitStart = pos_;
  while (isIdentChar(peek()) || peek() == '.')
    advance();
  std::optional<int64_t> unitBytes;
  if (pos_ > unitStart) {
    unitBytes = bytesPerUnit(text_.substr(unitStart, pos_ - unitStart));
    ok = ok && unitBytes.has_value();
  }
  tok.text = text_.substr(start, pos_ - start);
  if (tok.text == ".")
    ok = false;
  if (ok) {
    errno = 0;
    tok.isInteger = !sawDot && !sawExp;
    if (tok.isInteger) {
      char *end = nullptr;
      tok.intValue = std::strtoll(tok.text.c_str(), &end, 10);
      ok = errno == 0;
      tok.floatValue = (double)tok.intValue;
    } else {
      tok.floatValue = std::strtod(tok.text.c_str(), nullptr);
      ok = errno == 0;
    }
  }
  if (ok && unitBytes) {
    // Whole bytes: `1.5GiB` is an integer.
    std::optional<int64_t> bytes = scaleByUnit(tok.floatValue, *unitBytes);
    ok = bytes.has_value();
    tok.isInteger = true;
    tok.intValue = bytes.value_or(0);
    tok.floatValue = (double)tok.intValue;
  }
  if (!ok) {
    std::string suffix = text_.substr(unitStart, pos_ - unitStart);
    if (!suffix.empty() && std::isalpha((unsigned char)suffix[0]) &&
        !unitBytes)
      diag_.error(tok.loc, "bad number literal '" + tok.text + "': '" +
                               suffix + "' is not a byte unit (" +
                               byteUnitList() + ")");
    else
      diag_.error(tok.loc, "bad number literal '" + tok.text + "'");
    tok.kind = TokenKind::Error;
    return tok;
  }
  tok.kind = TokenKind::Number;
  return tok;
}

Token Lexer::next() {
  skipSpaceAndComments();
  Token tok;
  tok.loc = here();
  if (pos_ >= text_.size()) {
    tok.kind = TokenKind::Eof;
    return tok;
  }
  char c = peek();
  if (std::isdigit((unsigned char)c) ||
      (c == '.' && std::isdigit((unsigned char)peek(1))))
    return lexNumber();
  if (isIdentStart(c)) {
    size_t start = pos_;
    while (isIdentChar(peek()))
      advance();
    tok.text = text_.substr(start, pos_ - start);
    static const std::pair<const char *, TokenKind> keywords[] = {
        {"model", TokenKind::KwModel},   {"config", TokenKind::KwConfig},
        {"param", TokenKind::KwParam},   {"input", TokenKind::KwInput},
        {"block", TokenKind::KwBlock},   {"return", TokenKind::KwReturn},
        {"repeat", TokenKind::KwRepeat}, {"train", TokenKind::KwTrain},
        {"metric", TokenKind::KwMetric}};
    tok.kind = TokenKind::Identifier;
    for (auto &kw : keywords)
      if (tok.text == kw.first)
        tok.kind = kw.second;
    return tok;
  }
  advance();
  tok.text = std::string(1, c);
  switch (c) {
  case '(':
    tok.kind = TokenKind::LParen;
    return tok;
  case ')':
    tok.kind = TokenKind::RParen;
    return tok;
  case '[':
    tok.kind = TokenKind::LBracket;
    return tok;
  case ']':
    tok.kind = TokenKind::RBracket;
    return tok;
  case '{':
    tok.kind = TokenKind::LBrace;
    return tok;
  case '}':
    tok.kind = TokenKind::RBrace;
    return tok;
  case ',':
    tok.kind = TokenKind::Comma;
    return tok;
  case ':':
    tok.kind = TokenKind::Colon;
    return tok;
  case ';':
    tok.kind = TokenKind::Semicolon;
    return tok;
  case '=':
    tok.kind = TokenKind::Equal;
    if (peek() == '=') {
      advance();
      tok.kind = TokenKind::EqualEqual;
      tok.text = "==";
    }
    return tok;
  case '<':
  case '>': {
    bool less = c == '<';
    tok.kind = less ? TokenKind::Less : TokenKind::Greater;
    if (peek() == '=') {
      advance();
      tok.kind = less ? TokenKind::LessEqual : TokenKind::GreaterEqual;
      tok.text = less ? "<=" : ">=";
    }
    return tok;
  }
  case '!':
    if (peek() == '=') {
      advance();
      tok.kind = TokenKind::BangEqual;
      tok.text = "!=";
      return tok;
    }
    break;
  case '+':
    tok.kind = TokenKind::Plus;
    return tok;
  case '-':
    tok.kind = TokenKind::Minus;
    return tok;
  case '/':
    tok.kind = TokenKind::Slash;
    return tok;
  case '@':
    tok.kind = TokenKind::At;
    return tok;
  case '*':
    if (peek() == '*') {
      advance();
      tok.kind = TokenKind::StarStar;
      tok.text = "**";
    } else {
      tok.kind = TokenKind::Star;
    }
    return tok;
  default:
    break;
  }
  diag_.error(tok.loc, "unexpected " + describeCharacter(c));
  tok.kind = TokenKind::Error;
  return tok;
}

std::string Lexer::describeCharacter(char first) {
  auto byte = [](unsigned char b) {
    static const char hex[] = "0123456789abcdef";
    return std::string("\\x") + hex[b >> 4] + hex[b & 15];
  };
  unsigned char b = first;
  if (b >= 0x20 && b < 0x7f)
    return std::string("character '") + first + "'";
  // A UTF-8 sequence (a pasted '×' or '’'): show the character and its code
  // point, and step over its continuation bytes (`first` is consumed).
  unsigned length = (b & 0xe0) == 0xc0   ? 2
                    : (b & 0xf0) == 0xe0 ? 3
                    : (b & 0xf8) == 0xf0 ? 4
                                         : 0;
  uint32_t codePoint = b & (length == 2 ? 0x1f : length == 3 ? 0x0f : 0x07);
  bool valid = length != 0;
  for (unsigned i = 1; valid && i < length; ++i) {
    unsigned char next = peek(i - 1);
    valid = (next & 0xc0) == 0x80;
    codePoint = (codePoint << 6) | (next & 0x3f);
  }
  if (!valid)
    return "byte '" + byte(b) + "'"; // a control character or stray byte
  std::string text(1, first);
  for (unsigned i = 1; i < length; ++i) {
    text += peek();
    advance();
  }
  char code[16];
  std::snprintf(code, sizeof(code), "U+%04X", codePoint);
  return "character '" + text + "' (" + code + ")";
}

} // namespace kiln
