// Unit tests of the http destination's `auth` tables (QueueBox reference §7.1): the oauth2 block
// as QueueBox's "Authenticate to a destination" page writes it binds to its settings, and
// headerName defaults to Authorization. Delivery with auth is tested against real servers
// (tests/integration/http_destination_auth_test.cc).
#include "destinations/http/http_auth.h"

#include <gtest/gtest.h>

namespace queuebox {
namespace {

TEST(HttpAuthOptionsTest, Oauth2BlockBindsAsQueueBoxDocumentsIt) {
  nlohmann::json block = {{"clientId", "queuebox"},
                          {"clientSecret", "cs-123"},
                          {"tokenUrl", "https://auth.example.com/oauth/token"},
                          {"scope", "api:write"},
                          {"extraParams", {{"audience", "https://api.example.com"}}}};
  OAuth2AuthSettings s;
  ASSERT_TRUE(OAuth2AuthOptions().Bind(block, s).ok());
  EXPECT_EQ(s.client_id, "queuebox");
  EXPECT_EQ(s.client_secret, "cs-123");
  EXPECT_EQ(s.token_url, "https://auth.example.com/oauth/token");
  EXPECT_EQ(s.scope, std::optional<std::string>("api:write"));
  EXPECT_EQ(s.extra_params.at("audience"), "https://api.example.com");
}

TEST(HttpAuthOptionsTest, HeaderNameDefaultsToAuthorization) {
  HeaderAuthSettings s;
  ASSERT_TRUE(HeaderAuthOptions().Bind({{"headerValue", "Bearer st-456"}}, s).ok());
  EXPECT_EQ(s.header_name, "Authorization");
  EXPECT_EQ(s.header_value, "Bearer st-456");
}

}  // namespace
}  // namespace queuebox
