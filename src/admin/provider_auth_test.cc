// The providers' source auth schemes (issue 36): github, shopify, standard-webhooks and stripe,
// against the providers' published vectors and vectors made with their npm libraries, plus
// rotation, the tolerance both ways and the refusal texts. The libraries themselves sign requests
// in tests/integration/webhook_judges_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <strings.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "auth/auth_schemes.h"
#include "auth/request_auth.h"
#include "auth/webhook_signature.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;

// Svix's published vector (https://docs.svix.com/receiving/verifying-payloads/how-manual).
constexpr char kPaSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kPaId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kPaTs = 1614265330;
constexpr char kPaBody[] = R"({"test": 2432232314})";
constexpr char kPaSignature[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

RequestAuth::HeaderLookup PaHeaders(std::map<std::string, std::string> h) {
  return [h = std::move(h)](std::string_view name) {
    for (const auto& [k, v] : h) {
      if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
    }
    return std::string();
  };
}

std::unique_ptr<RequestAuth> PaMake(std::string type, nlohmann::json options) {
  auto a =
      RequestAuth::Create(AdminAuthConfig{std::move(type), std::move(options)}, "sources.s.auth");
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

std::string PaMessage(const Status& s) { return s.ok() ? "OK" : s.message(); }

TEST(WebhookSignatureTest, Base64AndHexFollowRfc4648) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Decode("Zm9vYg=="), "foob");
  EXPECT_EQ(Base64Decode("Zm9vYg"), "foob");
  EXPECT_EQ(Base64Decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(Base64Decode("Zm9v!mE="), std::nullopt);
  EXPECT_EQ(Base64Decode("Z"), std::nullopt);
  EXPECT_EQ(HexLower("\x01\xab"), "01ab");
  EXPECT_EQ(StandardWebhooksKey("whsec_"), std::nullopt);
  EXPECT_EQ(StandardWebhooksKey("whsec_Zm9v"), "foo");
  EXPECT_EQ(StandardWebhooksSignature(*StandardWebhooksKey(kPaSecret), kPaId, kPaTs, kPaBody),
            kPaSignature);
}

TEST(ProviderAuthTest, StandardWebhooksPublishedVectorBothHeaderFamilies) {
  auto auth = PaMake("standard-webhooks", {{"secret", kPaSecret}});
  ASSERT_NE(auth, nullptr);
  const int64_t now = kPaTs * 1000;
  for (std::string prefix : {"webhook-", "svix-"}) {
    auto h = PaHeaders({{prefix + "id", kPaId},
                        {prefix + "timestamp", std::to_string(kPaTs)},
                        {prefix + "signature", std::string("v1,bm90IGl0 ") + kPaSignature}});
    EXPECT_EQ(PaMessage(auth->Check(h, kPaBody, now)), "OK") << prefix;
    EXPECT_EQ(PaMessage(auth->Check(h, R"({"test": 2432232315})", now)), "Invalid signature");
  }
  EXPECT_EQ(auth->credential_headers(),
            (std::vector<std::string>{"webhook-signature", "svix-signature"}));
  EXPECT_EQ(auth->message_id_source().headers, (std::vector<std::string>{"webhook-id", "svix-id"}));
}

TEST(ProviderAuthTest, StandardWebhooksRefusalsNameTheCheck) {
  auto auth = PaMake("standard-webhooks", {{"secret", kPaSecret}});
  ASSERT_NE(auth, nullptr);
  const int64_t now = kPaTs * 1000;
  const std::string ts = std::to_string(kPaTs);
  auto check = [&](std::map<std::string, std::string> h, int64_t at) {
    return PaMessage(auth->Check(PaHeaders(std::move(h)), kPaBody, at));
  };
  EXPECT_EQ(check({{"webhook-id", kPaId}, {"webhook-timestamp", ts}}, now),
            "Missing webhook-signature header");
  EXPECT_EQ(check({{"webhook-timestamp", ts}, {"webhook-signature", kPaSignature}}, now),
            "Missing webhook-id header");
  EXPECT_EQ(check({{"webhook-id", kPaId}, {"webhook-signature", kPaSignature}}, now),
            "Missing webhook-timestamp header");
  EXPECT_EQ(check({{"webhook-id", kPaId},
                   {"webhook-timestamp", ts + "x"},
                   {"webhook-signature", kPaSignature}},
                  now),
            "Invalid timestamp format");
  EXPECT_EQ(
      check({{"webhook-id", kPaId}, {"webhook-timestamp", ts}, {"webhook-signature", "v2,abc"}},
            now),
      "Invalid webhook-signature header");
  auto full = std::map<std::string, std::string>{
      {"webhook-id", kPaId}, {"webhook-timestamp", ts}, {"webhook-signature", kPaSignature}};
  // Five minutes both ways, inclusive.
  EXPECT_EQ(check(full, now + 300000), "OK");
  EXPECT_EQ(check(full, now - 300000), "OK");
  EXPECT_EQ(check(full, now + 300001), "Request timestamp expired");
  EXPECT_EQ(check(full, now - 300001), "Request timestamp in the future");
  full["webhook-timestamp"] = "99999999999999999999";
  EXPECT_EQ(check(full, now), "Invalid timestamp format");
  full["webhook-timestamp"] = "9223372036854775";
  EXPECT_EQ(check(full, now), "Request timestamp in the future");
}

TEST(ProviderAuthTest, RotationAcceptsEveryActiveSecretAndNoOther) {
  const std::string other = "whsec_" + Base64Encode("another key of 24 bytes!");
  auto rotated = PaMake("standard-webhooks", {{"secret", other}, {"previousSecrets", {kPaSecret}}});
  auto retired = PaMake("standard-webhooks", {{"secret", other}});
  ASSERT_NE(rotated, nullptr);
  ASSERT_NE(retired, nullptr);
  auto h = PaHeaders({{"webhook-id", kPaId},
                      {"webhook-timestamp", std::to_string(kPaTs)},
                      {"webhook-signature", kPaSignature}});
  EXPECT_EQ(PaMessage(rotated->Check(h, kPaBody, kPaTs * 1000)), "OK");
  EXPECT_EQ(PaMessage(retired->Check(h, kPaBody, kPaTs * 1000)), "Invalid signature");

  // github: the same rule over hmac.
  auto gh = PaMake("github", {{"secret", "new"}, {"previousSecrets", {"old"}}});
  ASSERT_NE(gh, nullptr);
  const std::string body = R"({"zen":"x"})";
  for (const char* secret : {"new", "old"}) {
    auto sig =
        PaHeaders({{"X-Hub-Signature-256", "sha256=" + *HmacHex("HmacSHA256", secret, body)}});
    EXPECT_EQ(PaMessage(gh->Check(sig, body, 0)), "OK") << secret;
  }
  auto gone =
      PaHeaders({{"X-Hub-Signature-256", "sha256=" + *HmacHex("HmacSHA256", "older", body)}});
  EXPECT_EQ(PaMessage(gh->Check(gone, body, 0)), "Invalid signature");
  EXPECT_EQ(PaMessage(gh->Check(PaHeaders({}), body, 0)), "Missing X-Hub-Signature-256 header");
}

TEST(ProviderAuthTest, StripeSignatureFromItsLibrary) {
  // stripe 23.1.0: webhooks.generateTestHeaderString({payload, secret: "whsec_abc",
  // timestamp: 1767225600}).
  const std::string body = R"({"id":"evt_1"})";
  const std::string v1 = "e6de2159a892b312f938156c314fdbfc941c8f6c006464fdf9f06d069f92b515";
  auto auth = PaMake("stripe", {{"secret", "whsec_abc"}});
  ASSERT_NE(auth, nullptr);
  const int64_t now = 1767225600000;
  auto check = [&](const std::string& header, int64_t at, const std::string& b) {
    return PaMessage(auth->Check(PaHeaders({{"Stripe-Signature", header}}), b, at));
  };
  EXPECT_EQ(check("t=1767225600,v1=" + v1, now, body), "OK");
  EXPECT_EQ(check("t=1767225600,v1=00,v0=11,v1=" + v1, now, body), "OK");
  EXPECT_EQ(check("t=1767225600,v1=" + v1, now, R"({"id":"evt_2"})"), "Invalid signature");
  EXPECT_EQ(check("t=1767225600,v1=" + v1, now + 300001, body), "Request timestamp expired");
  EXPECT_EQ(check("t=1767225600,v1=" + v1, now - 300001, body), "Request timestamp in the future");
  EXPECT_EQ(check("v1=" + v1, now, body), "Invalid Stripe-Signature header");
  EXPECT_EQ(check("t=1767225600", now, body), "Invalid Stripe-Signature header");
  EXPECT_EQ(check("t=soon,v1=" + v1, now, body), "Invalid timestamp format");
  EXPECT_EQ(PaMessage(auth->Check(PaHeaders({}), body, now)), "Missing Stripe-Signature header");
  EXPECT_EQ(auth->message_id_source().json_path, "$.id");
}

TEST(ProviderAuthTest, ShopifyBase64OfTheBody) {
  // Node's crypto: createHmac("sha256", "shpss_s3cret").update(body).digest("base64").
  const std::string body = R"({"id":820982911946154500})";
  auto auth = PaMake("shopify", {{"secret", "shpss_s3cret"}});
  ASSERT_NE(auth, nullptr);
  auto h = PaHeaders({{"X-Shopify-Hmac-Sha256", "SQNJAXNo/97pAz4mkZRYp9glmgcPJXMuSDDvz1uxyds="}});
  EXPECT_EQ(PaMessage(auth->Check(h, body, 0)), "OK");
  EXPECT_EQ(PaMessage(auth->Check(h, body + " ", 0)), "Invalid signature");
  EXPECT_EQ(PaMessage(auth->Check(PaHeaders({}), body, 0)), "Missing X-Shopify-Hmac-Sha256 header");
}

TEST(ProviderAuthTest, ConfigErrorsAndAdminAuthKeepsItsSchemes) {
  auto bad = RequestAuth::Create({"standard-webhooks", {{"secret", "whsec_not base64!"}}},
                                 "sources.s.auth");
  EXPECT_EQ(bad.status().message(), "sources.s.auth.secret must be whsec_ followed by base64");
  auto prev = RequestAuth::Create(
      {"standard-webhooks", {{"secret", kPaSecret}, {"previousSecrets", {"whsec_%%"}}}},
      "sources.s.auth");
  EXPECT_EQ(prev.status().message(),
            "sources.s.auth.previousSecrets[0] must be whsec_ followed by base64");
  auto empty = RequestAuth::Create({"stripe", {{"secret", ""}}}, "sources.s.auth");
  EXPECT_EQ(empty.status().message(), "sources.s.auth.secret is required");
  auto admin = RequestAuth::Create({"stripe", {{"secret", "whsec_abc"}}});
  EXPECT_EQ(admin.status().message(),
            "admin.auth.type must be bearer, api-key or hmac (got 'stripe')");
  auto unknown = RequestAuth::Create({"svix", {{"secret", "x"}}}, "sources.s.auth");
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("github, shopify, standard-webhooks or stripe (got 'svix')"));
  std::vector<std::string> admin_types;
  for (const BlockVariant& v : AuthVariants()) admin_types.push_back(v.type);
  EXPECT_EQ(admin_types, (std::vector<std::string>{"api-key", "bearer", "hmac"}));
  EXPECT_EQ(SourceAuthVariants().size(), 7u);
}

}  // namespace
}  // namespace queuebox
