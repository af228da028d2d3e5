//===- RecursionDepth.h - A bound on the depth of a recursive walk --------===//
//
// The parser, the constant evaluator and sema each walk expressions
// recursively, and a hostile model file (100k nested parentheses, a chain of
// blocks or of constants) would overflow the stack. Each walk holds one
// RecursionDepth: it checks `atLimit()` (and reports its own error) before
// descending, and holds a `Scope` for the level it is in.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_RECURSIONDEPTH_H
#define KILN_FRONTEND_RECURSIONDEPTH_H

namespace kiln {

class RecursionDepth {
public:
  explicit RecursionDepth(unsigned limit) : limit_(limit) {}

  unsigned limit() const { return limit_; }
  // True when one more level would exceed the limit.
  bool atLimit() const { return depth_ >= limit_; }

  // One level deeper for the lifetime of the scope.
  class Scope {
  public:
    explicit Scope(RecursionDepth &depth) : depth_(depth) { ++depth_.depth_; }
    ~Scope() { --depth_.depth_; }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    RecursionDepth &depth_;
  };

private:
  unsigned limit_;
  unsigned depth_ = 0;
};

} // namespace kiln

#endif // KILN_FRONTEND_RECURSIONDEPTH_H
