//===- DataPositionTest.cpp - The saved data position as JSON -------------===//

#include "runtime/data/DataPosition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using data::DataPosition;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(DataPositionTest, JsonRoundTrip) {
  for (DataPosition position : {DataPosition{0, 0}, DataPosition{3, 17},
                                DataPosition{~0ull, (1ull << 40) + 5}}) {
    json encoded = position.toJson();
    // Through text, as trainer_state.json stores it.
    auto decoded =
        DataPosition::fromJson(json::parse(encoded.dump()), "state.json");
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(*decoded, position);
  }
  EXPECT_EQ(DataPosition({2, 9}).toJson().dump(), R"({"epoch":2,"index":9})");
}

TEST(DataPositionTest, MalformedJsonIsAnError) {
  struct Case {
    const char *text;
    const char *message;
  };
  const Case cases[] = {
      {"[1, 2]", "state.json: data position must be an object {\"epoch\": E, "
                 "\"index\": I}, got [1,2]"},
      {"7", "must be an object"},
      {R"({"index": 3})", "state.json: data position has no 'epoch'"},
      {R"({"epoch": 3})", "state.json: data position has no 'index'"},
      {R"({"epoch": -1, "index": 0})",
       "state.json: data position 'epoch' must be a non-negative integer, "
       "got -1"},
      {R"({"epoch": 1, "index": 2.5})", "'index' must be a non-negative "
                                        "integer, got 2.5"},
      {R"({"epoch": "1", "index": 2})", "got \"1\""},
      {R"({"epoch": true, "index": 2})", "got true"},
      {R"({"epoch": 1, "index": 2, "step": 3})",
       "state.json: data position has unknown key 'step' (expected epoch and "
       "index)"},
  };
  for (const Case &c : cases) {
    auto decoded = DataPosition::fromJson(json::parse(c.text), "state.json");
    ASSERT_FALSE(decoded.ok()) << c.text;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr(c.message)) << c.text;
  }
}

} // namespace
} // namespace kiln::rt::test
