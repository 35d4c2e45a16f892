// Block-valued options declared as rows (opt::Block, opt::TypedBlock): the pattern for nested
// blocks such as routes[i].transform or destinations.<name>.auth. A test-only table shows that
// validation, binding and the struct defaults come from the rows alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "config/validate.h"
#include "queuebox/options.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct Transform {
  std::string expression;
  int64_t timeout_ms = 100;
};

struct Credentials {
  std::string type;
  json options = json::object();
};

struct Route {
  std::string topic;
  std::optional<Transform> transform;
  std::optional<Credentials> auth;
};

OptionSpec TextKey(std::string key, json def, bool required) {
  OptionSpec s;
  s.key = std::move(key);
  s.default_value = std::move(def);
  s.required = required;
  return s;
}

const OptionTable<Route>& RouteRows() {
  static const OptionTable<Route>* const table = [] {
    OptionTable<Transform> transform = {
        opt::Text("expression", &Transform::expression, nullptr, "JSONata").Required(),
        opt::Millis("timeoutMs", &Transform::timeout_ms, 100, "Evaluation limit").Min(1),
    };
    BlockVariant basic{"basic", {TextKey("username", nullptr, true)}, nullptr, nullptr};
    BlockVariant header{
        "header", {TextKey("headerName", "Authorization", false)}, nullptr, nullptr};
    return new OptionTable<Route>{
        opt::Text("topic", &Route::topic, nullptr, "Topic").Required(),
        opt::Block("transform", &Route::transform, transform, "Rewrites the payload"),
        opt::TypedBlock("auth", &Route::auth, {basic, header}, "Credentials"),
    };
  }();
  return *table;
}

// Validates `yaml_json` against the rows and binds it; the collected problems in `errors`.
Route Load(const json& block, std::string* errors) {
  cfg::Diagnostics d;
  json valid = cfg::ValidateTable(block, RouteRows().specs(), {}, "routes[0]", d);
  Route r;
  EXPECT_TRUE(RouteRows().BindPresent(valid, r).ok());
  *errors = d.empty() ? "" : d.ToStatus().message();
  return r;
}

TEST(OptionBlocks, AnAbsentBlockStaysEmpty) {
  std::string errors;
  Route r = Load(json{{"topic", "a"}}, &errors);
  EXPECT_EQ(errors, "");
  EXPECT_FALSE(r.transform.has_value());
  EXPECT_FALSE(r.auth.has_value());
}

TEST(OptionBlocks, AGivenBlockIsValidatedAndBound) {
  std::string errors;
  Route r = Load(json{{"topic", "a"}, {"transform", {{"expression", "$"}}}}, &errors);
  EXPECT_EQ(errors, "");
  ASSERT_TRUE(r.transform.has_value());
  EXPECT_EQ(r.transform->expression, "$");
  EXPECT_EQ(r.transform->timeout_ms, 100);  // the row default, filled in the block

  Load(json{{"topic", "a"}, {"transform", {{"timeoutMS", 5}}}}, &errors);
  EXPECT_THAT(errors, HasSubstr("  - routes[0].transform.timeoutMS: unknown key; did you mean "
                                "timeoutMs?"));
  EXPECT_THAT(errors, HasSubstr("  - routes[0].transform.expression: required key is missing"));
}

TEST(OptionBlocks, ATypedBlockTakesTheKeysOfItsType) {
  std::string errors;
  Route r = Load(json{{"topic", "a"}, {"auth", {{"type", "header"}}}}, &errors);
  EXPECT_EQ(errors, "");
  ASSERT_TRUE(r.auth.has_value());
  EXPECT_EQ(r.auth->type, "header");
  EXPECT_EQ(r.auth->options, json({{"headerName", "Authorization"}}));

  Load(json{{"topic", "a"}, {"auth", {{"type", "header"}, {"username", "u"}}}}, &errors);
  EXPECT_THAT(errors, HasSubstr("  - routes[0].auth.username: unknown key for type header; type "
                                "basic takes it"));
  Load(json{{"topic", "a"}, {"auth", {{"username", "u"}}}}, &errors);
  EXPECT_THAT(errors, HasSubstr("  - routes[0].auth: missing type; set one of basic, header"));
}

TEST(OptionBlocks, StructDefaultsAndReadBack) {
  EXPECT_EQ(RouteRows().StructDefaults(),
            json({{"topic", ""}, {"transform", nullptr}, {"auth", nullptr}}));
  Route r;
  r.topic = "t";
  r.transform = Transform{"$.a", 50};
  r.auth = Credentials{"basic", {{"username", "u"}}};
  EXPECT_EQ(RouteRows().Read(r), json({{"topic", "t"},
                                       {"transform", {{"expression", "$.a"}, {"timeoutMs", 50}}},
                                       {"auth", {{"type", "basic"}, {"username", "u"}}}}));
}

}  // namespace
}  // namespace queuebox
