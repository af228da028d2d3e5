//===- StatusTest.cpp - Status, StatusOr and the propagation macros -------===//

#include "runtime/Status.h"

#include <gtest/gtest.h>
#include <memory>

namespace kiln::rt {
namespace {

Status failIf(bool fail) {
  return fail ? invalidArgument("bad value ", 42) : okStatus();
}

Status chain(bool fail, int *reached) {
  KILN_RETURN_IF_ERROR(failIf(fail));
  *reached = 1;
  return okStatus();
}

StatusOr<std::unique_ptr<int>> makeInt(bool fail) {
  if (fail)
    return notFound("no int");
  return std::make_unique<int>(7);
}

StatusOr<int> useInt(bool fail) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<int> value, makeInt(fail));
  return *value + 1;
}

TEST(StatusTest, MessagesAndCodes) {
  Status s = failIf(true);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad value 42");
  EXPECT_EQ(s.withPrefix("f.kart: ").message(), "f.kart: bad value 42");
  EXPECT_STREQ(statusCodeName(s.code()), "INVALID_ARGUMENT");
  EXPECT_TRUE(okStatus().withPrefix("x").message().empty());
}

TEST(StatusTest, ReturnIfError) {
  int reached = 0;
  EXPECT_FALSE(chain(true, &reached).ok());
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusTest, AssignOrReturnMovesValues) {
  auto good = useInt(false);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 8);
  auto bad = useInt(true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

} // namespace
} // namespace kiln::rt
