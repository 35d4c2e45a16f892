// Every option's default is declared in its table row; the structs keep initialisers so that a
// default-constructed struct is usable in code. These tests prove the two agree, row by row, for
// every table: a row without a default leaves its member unset (an empty optional, text or list).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "auth/auth_schemes.h"
#include "config/schema.h"
#include "config/validate.h"
#include "destinations/registry.h"
#include "sources/registry.h"

namespace queuebox {
namespace {

using nlohmann::json;

// "" when the struct default equals the row default, else what differs.
std::string Mismatch(const OptionSpec& spec, const json& struct_value) {
  if (spec.default_value.is_null()) {
    // Unset: an empty optional, text or list (a required list such as kafka's topics).
    bool unset = struct_value.is_null() || struct_value == "" ||
                 (struct_value.is_array() && struct_value.empty());
    return unset ? "" : "no default in the table, the struct holds " + struct_value.dump();
  }
  cfg::Diagnostics d;
  std::optional<json> declared = cfg::ValidateValue(spec.default_value, spec, spec.key, d);
  if (!declared) return "the table default " + spec.default_value.dump() + " is not valid";
  if (*declared != struct_value) {
    return "the table says " + declared->dump() + ", the struct holds " + struct_value.dump();
  }
  return "";
}

void ExpectDefaultsAgree(const std::vector<OptionSpec>& specs, const json& struct_defaults,
                         const std::string& table) {
  ASSERT_FALSE(specs.empty()) << table;
  for (const OptionSpec& spec : specs) {
    ASSERT_TRUE(struct_defaults.contains(spec.key)) << table << ": " << spec.key;
    EXPECT_EQ(Mismatch(spec, struct_defaults.at(spec.key)), "") << table << ": " << spec.key;
  }
}

template <typename S>
void ExpectDefaultsAgree(const OptionTable<S>& table, const std::string& name) {
  ExpectDefaultsAgree(table.specs(), table.StructDefaults(), name);
}

TEST(OptionDefaults, RootSectionsMatchConfig) {
  ExpectDefaultsAgree(cfg::RootOptions(), "root");
  EXPECT_EQ(cfg::RootOptions().specs().size(), cfg::RootTable().size());
}

TEST(OptionDefaults, RouteAndDestinationCommonKeysMatchTheirStructs) {
  ExpectDefaultsAgree(cfg::RouteOptions(), "routes[]");
  ExpectDefaultsAgree(cfg::DestinationCommonOptions(), "destinations.<name>");
  ExpectDefaultsAgree(cfg::CircuitBreakerOptions(), "destinations.<name>.circuitBreaker");
  ExpectDefaultsAgree(cfg::RateLimitOptions(), "destinations.<name>.rateLimit");
}

TEST(OptionDefaults, AuthTypesMatchTheirSettings) {
  ExpectDefaultsAgree(BearerAuthOptions(), "admin.auth bearer");
  ExpectDefaultsAgree(ApiKeyAuthOptions(), "admin.auth api-key");
  ExpectDefaultsAgree(HmacAuthOptions(), "admin.auth hmac");
}

TEST(OptionDefaults, DestinationTypesMatchTheirSettings) {
  for (const DestinationType& t : BuiltinDestinationTypes()) {
    ExpectDefaultsAgree(t.options, t.settings_defaults, "destinations type " + t.type);
  }
}

TEST(OptionDefaults, SourceKindsMatchTheirSettings) {
  for (const sources::SourceKind& k : sources::BuiltinSourceKinds()) {
    ExpectDefaultsAgree(k.options, k.settings_defaults, "sources type " + k.type);
  }
}

TEST(OptionDefaults, AuthSchemesMatchTheirSettings) {
  for (const AuthScheme& s : BuiltinAuthSchemes()) {
    ExpectDefaultsAgree(s.options, s.settings_defaults, "auth type " + s.type);
  }
}

// The check itself: a struct that drifted from its row is caught.
TEST(OptionDefaults, ADriftIsReported) {
  struct Drifted {
    int batch_size = 50;
    std::string name = "x";
  };
  OptionTable<Drifted> t = {
      opt::Int("batchSize", &Drifted::batch_size, 100, "rows"),
      opt::Text("name", &Drifted::name, nullptr, "no default"),
  };
  json defaults = t.StructDefaults();
  EXPECT_EQ(Mismatch(t.specs()[0], defaults["batchSize"]),
            "the table says 100, the struct holds 50");
  EXPECT_EQ(Mismatch(t.specs()[1], defaults["name"]),
            "no default in the table, the struct holds \"x\"");
}

// Binding stores exactly the validated values, through nested blocks, and leaves the rest.
TEST(OptionBinding, BindsNestedKeysAndKeepsTheRest) {
  Config c;
  ASSERT_TRUE(
      cfg::RootOptions()
          .BindPresent(json::parse(R"({"outbox": {"batchSize": 7, "notify": {"enabled": true}},
                       "database": {"columnMapping": {"outbox": {"aggregateType": "kind"}}},
                       "retention": {"outbox": {"maxAge": 60000}}})"),
                       c)
          .ok());
  EXPECT_EQ(c.outbox.batch_size, 7);
  EXPECT_TRUE(c.outbox.notify);
  EXPECT_EQ(c.database.columns.aggregate_type, "kind");
  EXPECT_EQ(c.retention.outbox.max_age_ms, 60000);
  EXPECT_EQ(c.outbox.concurrency, 8);
  EXPECT_FALSE(c.retention.outbox.max_count.has_value());

  Status wrong =
      cfg::RootOptions().BindPresent(json::parse(R"({"outbox": {"batchSize": "x"}})"), c);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(), ::testing::HasSubstr("outbox.batchSize: "));
  // Bind also wants every required key (database.url).
  Status missing = cfg::RootOptions().Bind(json::object(), c, "root");
  EXPECT_EQ(missing.message(), "root.database.url: required key is missing");
}

}  // namespace
}  // namespace queuebox
