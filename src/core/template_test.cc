#include "core/template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace queuebox {
namespace {

using ::testing::HasSubstr;

std::string RenderKey(std::string_view tmpl, std::string_view topic, std::string_view payload,
                      std::string missing_default = "") {
  Template t = Template::CompileRoutingKey(tmpl, std::move(missing_default));
  return t.Render(TemplateContext(topic, std::nullopt, std::nullopt, payload));
}

std::string RenderAddress(std::string_view tmpl, const TemplateContext& ctx) {
  Result<Template> t = Template::CompileAddress(tmpl);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? t->Render(ctx) : "<invalid>";
}

// QueueBox reference §7.6, RoutingKeyTemplateContractTest.
TEST(RoutingKeyTemplate, ContractTable) {
  EXPECT_EQ(RenderKey("{{ topic }}", "orders.created", "{}"), "orders.created");
  EXPECT_EQ(RenderKey("{{topic}}", "orders.created", "{}"), "orders.created");
  EXPECT_EQ(RenderKey("{{ payload.region }}", "t", R"({"region":"eu"})"), "eu");
  EXPECT_EQ(RenderKey("{{ data.customer.region }}", "t", R"({"customer":{"region":"de"}})"), "de");
  EXPECT_EQ(RenderKey("{{ payload.missingField }}", "t", R"({"region":"eu"})", "fallback"),
            "fallback");
  EXPECT_EQ(RenderKey("{{ region }}", "t", R"({"region":"eu"})", "fallback"), "fallback");
  EXPECT_EQ(RenderKey("{{ payload.missingField }}", "t", "{}"), "");
}

TEST(RoutingKeyTemplate, MixesLiteralsAndPlaceholders) {
  EXPECT_EQ(RenderKey("rk.{{ topic }}.{{payload.region}}", "o.c", R"({"region":"eu"})"),
            "rk.o.c.eu");
  // Each missing placeholder renders the default in its place.
  EXPECT_EQ(RenderKey("a.{{ nope }}.{{ payload.x }}", "t", "{}", "_"), "a._._");
}

TEST(RoutingKeyTemplate, NullKeyAndAggregateTypeAreMissing) {
  Template t = Template::CompileRoutingKey("{{ key }}|{{ aggregateType }}", "d");
  EXPECT_EQ(t.Render(TemplateContext("t", std::nullopt, std::nullopt, "{}")), "d|d");
  EXPECT_EQ(t.Render(TemplateContext("t", "k1", "order", "{}")), "k1|order");
}

TEST(RoutingKeyTemplate, NotJsonPayloadIsMissing) {
  EXPECT_EQ(RenderKey("{{ payload.a }}", "t", "not json", "d"), "d");
}

TEST(AddressTemplate, FieldKindsRender) {
  std::string payload =
      R"({"s":"text","n":42,"f":1.5,"b":true,"o":{"x":1,"y":[1,2]},"a":["p","q"],"z":null})";
  TemplateContext ctx("orders.created", "k-1", "order", payload);
  EXPECT_EQ(RenderAddress("{{ payload.s }}", ctx), "text");
  EXPECT_EQ(RenderAddress("{{ payload.n }}", ctx), "42");
  EXPECT_EQ(RenderAddress("{{ payload.f }}", ctx), "1.5");
  EXPECT_EQ(RenderAddress("{{ payload.b }}", ctx), "true");
  EXPECT_EQ(RenderAddress("{{ payload.o }}", ctx), R"({"x":1,"y":[1,2]})");
  EXPECT_EQ(RenderAddress("{{ data.a }}", ctx), R"(["p","q"])");
  EXPECT_EQ(RenderAddress("{{ data.a.1 }}", ctx), "q");
  EXPECT_EQ(RenderAddress("{{ payload.z }}", ctx), "");
  EXPECT_EQ(RenderAddress("{{ payload.o.x }}", ctx), "1");
  EXPECT_EQ(RenderAddress("{{ payload.s.deeper }}", ctx), "");
  EXPECT_EQ(RenderAddress("events.{{ aggregateType }}.{{ key }}", ctx), "events.order.k-1");
  EXPECT_EQ(RenderAddress("{{   topic\t}}", ctx), "orders.created");
}

TEST(AddressTemplate, MissingValuesRenderEmpty) {
  TemplateContext ctx("t", std::nullopt, std::nullopt, "{}");
  EXPECT_EQ(RenderAddress("{{ key }}", ctx), "");
  EXPECT_EQ(RenderAddress("{{ aggregateType }}", ctx), "");
  EXPECT_EQ(RenderAddress("{{ payload.a.b }}", ctx), "");
  EXPECT_EQ(RenderAddress("x.{{ payload.a }}", ctx), "x.");
}

TEST(AddressTemplate, UnknownPlaceholderIsRejectedByName) {
  for (const char* bad : {"{{ region }}", "orders.{{ Topic }}", "{{ payload }}", "{{ data. }}",
                          "{{ payload..a }}", "{{ aggregate_type }}"}) {
    Status s = ValidateAddressTemplate(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ValidateAddressTemplate("a.{{ region }}").message(),
              HasSubstr("unknown placeholder '{{ region }}'"));
  EXPECT_TRUE(ValidateAddressTemplate("plain.topic").ok());
  EXPECT_TRUE(ValidateAddressTemplate("{{topic}}.{{ data.x.y }}").ok());
}

TEST(AddressTemplate, TextThatIsNotAPlaceholderIsLiteral) {
  TemplateContext ctx("t", std::nullopt, std::nullopt, "{}");
  EXPECT_EQ(RenderAddress("a{{b", ctx), "a{{b");
  EXPECT_EQ(RenderAddress("a{{}}b", ctx), "a{{}}b");
  EXPECT_EQ(RenderAddress("a}}b{", ctx), "a}}b{");
  EXPECT_EQ(RenderAddress("{{ to}pic }}", ctx), "{{ to}pic }}");
}

TEST(Template, ParsesPayloadOnlyWhenNeeded) {
  Template plain = Template::CompileRoutingKey("{{ topic }}.{{ key }}");
  EXPECT_FALSE(plain.uses_payload());
  EXPECT_FALSE(plain.literal());
  EXPECT_TRUE(Template::CompileRoutingKey("fixed").literal());
  TemplateContext ctx("t", "k", std::nullopt, "not json at all");
  EXPECT_EQ(plain.Render(ctx), "t.k");

  Template field = Template::CompileRoutingKey("{{ payload.a }}");
  EXPECT_TRUE(field.uses_payload());
  TemplateContext ctx2("t", std::nullopt, std::nullopt, R"({"a":"v"})");
  const nlohmann::json* first = ctx2.payload_json();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(field.Render(ctx2), "v");
  EXPECT_EQ(ctx2.payload_json(), first);  // parsed once per context
}

TEST(Template, ForRowUsesRowColumns) {
  OutboxRow row;
  row.topic = "orders.created";
  row.key = "k9";
  row.aggregate_type = "order";
  row.payload = R"({"region":"eu"})";
  TemplateContext ctx = TemplateContext::ForRow(row);
  EXPECT_EQ(RenderAddress("{{topic}}/{{key}}/{{aggregateType}}/{{payload.region}}", ctx),
            "orders.created/k9/order/eu");
}

}  // namespace
}  // namespace queuebox
