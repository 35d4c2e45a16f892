// URL rules of the http destination (QueueBox reference §7.1) and its registry entry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "destinations/http/http_destination.h"
#include "destinations/registry.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::vector<std::string> Check(const std::string& base_url, const std::string& path = "/") {
  return ValidateHttpBlock({{"baseUrl", base_url}, {"path", path}, {"timeoutMs", 30000}});
}

TEST(HttpUrlTest, AcceptsAbsoluteHttpAndHttps) {
  EXPECT_THAT(Check("http://127.0.0.1:8080"), IsEmpty());
  EXPECT_THAT(Check("https://hooks.example.com/base/", "/v1/events"), IsEmpty());
  EXPECT_THAT(Check("HTTP://EXAMPLE.com"), IsEmpty());
}

TEST(HttpUrlTest, RejectsOtherSchemesAndRelativeUrls) {
  EXPECT_THAT(Check("ftp://example.com"),
              ElementsAre("baseUrl: must be an absolute http or https URL with a host"));
  EXPECT_THAT(Check("/relative/path"),
              ElementsAre("baseUrl: must be an absolute http or https URL with a host"));
  EXPECT_THAT(Check("example.com"),
              ElementsAre("baseUrl: must be an absolute http or https URL with a host"));
  EXPECT_THAT(Check("http://"),
              ElementsAre("baseUrl: must be an absolute http or https URL with a host"));
}

TEST(HttpUrlTest, RejectsUserinfoWithoutEchoingIt) {
  for (std::string url : {"http://user:hunter2@example.com/", "https://user@example.com",
                          "http://:hunter2@example.com", "http://u:p@ss@example.com/x"}) {
    std::vector<std::string> problems = Check(url);
    ASSERT_EQ(problems.size(), 1u) << url;
    EXPECT_THAT(problems[0], HasSubstr("must not contain credentials"));
    EXPECT_THAT(problems[0], Not(HasSubstr("hunter2")));
    EXPECT_THAT(problems[0], Not(HasSubstr("ss@")));
  }
}

TEST(HttpUrlTest, RejectsDotSegments) {
  EXPECT_THAT(Check("http://h", "/a/../b"),
              ElementsAre("path: must not contain '.' or '..' segments"));
  EXPECT_THAT(Check("http://h", "./b"), ElementsAre("path: must not contain '.' or '..' segments"));
  EXPECT_THAT(Check("http://h", "/a/%2E%2e/b"),
              ElementsAre("path: must not contain '.' or '..' segments"));
  EXPECT_THAT(Check("http://h/api/../admin"),
              ElementsAre("baseUrl: must not contain '.' or '..' segments"));
  EXPECT_THAT(Check("http://h", "/a/.well-known/..b"), IsEmpty());  // not whole segments
}

TEST(HttpUrlTest, JoinDropsEmptySegments) {
  auto join = [](std::string_view base, std::string_view path) {
    Result<std::string> r = JoinHttpUrl(base, path);
    return r.ok() ? *r : "error: " + r.status().message();
  };
  EXPECT_EQ(join("http://h:1", "/"), "http://h:1/");
  EXPECT_EQ(join("http://h:1", ""), "http://h:1/");
  EXPECT_EQ(join("http://h:1/api/", "//v1//events"), "http://h:1/api/v1/events");
  EXPECT_EQ(join("http://h:1/api", "events/"), "http://h:1/api/events/");
  EXPECT_EQ(join("http://h:1/api/", "/"), "http://h:1/api/");
  EXPECT_EQ(join("https://h/base?sig=1", "/x"), "https://h/base/x?sig=1");
  EXPECT_EQ(join("http://h", "/a/../b"), "error: path: must not contain '.' or '..' segments");
}

TEST(HttpUrlTest, CreateRefusesBadUrlsAndNamesTheDestination) {
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = "http://u:secret@h";
  Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(s);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("destinations.webhook.baseUrl"));
  EXPECT_THAT(d.status().message(), Not(HasSubstr("secret")));
}

// Found by fuzz/http_request_fuzz.cc: a key (or header value) of blanks only became
// "X-Message-Key:  ", which curl does not send, so the header vanished.
TEST(HttpRequestHeadersTest, BlankValuesAreSentEmptyNotDropped) {
  OutboxRow row;
  row.id = "id-1";
  row.topic = "orders.created";
  row.key = " ";
  row.headers = R"({"X-Blank":" \t","X-Set":" a "})";
  Result<std::vector<std::string>> lines = HttpRequestHeaders(row, {}, std::nullopt);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_THAT(*lines, ElementsAre("Content-Type: application/json", "X-Message-Id: id-1",
                                  "X-Topic: orders.created", "X-Attempt: 0", "X-Message-Key;",
                                  "X-Blank;", "X-Set:  a "));
}

// curl sends a custom header in place of its own, so a row's Content-Length would frame the body.
TEST(HttpRequestHeadersTest, RowHeadersThatFrameTheRequestAreRefused) {
  OutboxRow row;
  row.id = "id-1";
  row.topic = "orders.created";
  for (const char* name : {"Content-Length", "transfer-encoding", "Connection", "Expect", "Upgrade",
                           "TE", "Trailer", "Keep-Alive", "Proxy-Connection"}) {
    row.headers = std::string(R"({"X-Ok":"1",")") + name + R"(":"5"})";
    Result<std::vector<std::string>> lines = HttpRequestHeaders(row, {}, std::nullopt);
    ASSERT_FALSE(lines.ok()) << name;
    EXPECT_EQ(lines.status().message(),
              std::string("invalid row header \"") + name +
                  "\": it frames the request or the connection, which the relay does itself");
  }
  row.headers = R"({"Host":"orders.internal","Content-Type":"text/plain"})";
  EXPECT_TRUE(HttpRequestHeaders(row, {}, std::nullopt).ok());
}

TEST(RegistryTest, KnowsHttpAndFile) {
  EXPECT_THAT(KnownDestinationTypes(), HasSubstr("file, http"));
  const DestinationType* http = FindDestinationType("http");
  ASSERT_NE(http, nullptr);
  ASSERT_EQ(http->options.size(), 6u);  // baseUrl, path, timeoutMs, maxInFlight, auth, signing
  EXPECT_EQ(http->options[5].key, "signing");
  EXPECT_EQ(http->options[0].key, "baseUrl");
  EXPECT_TRUE(http->options[0].required);
  EXPECT_EQ(http->options[1].key, "path");
  EXPECT_EQ(http->options[1].default_value, "/");
  EXPECT_EQ(http->options[2].key, "timeoutMs");
  EXPECT_EQ(http->options[2].type, OptionType::kMillis);
  EXPECT_EQ(http->options[2].default_value, 30000);
  EXPECT_EQ(http->options[2].min, 1);
  EXPECT_EQ(http->options[3].key, "maxInFlight");
  EXPECT_EQ(http->options[3].type, OptionType::kInt);
  EXPECT_EQ(http->options[3].default_value, 256);
  EXPECT_EQ(http->options[3].min, 1);
  EXPECT_EQ(http->options[4].key, "auth");  // oauth2 | basic | header (http_auth.h)
  EXPECT_FALSE(http->options[4].required);
  ASSERT_TRUE(static_cast<bool>(http->validate));
  const DestinationType* file = FindDestinationType("file");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->options[1].key, "fsync");
  EXPECT_EQ(file->options[1].default_value, true);
  EXPECT_EQ(FindDestinationType("smtp"), nullptr);
}

TEST(RegistryTest, HttpFactoryReadsTheBlock) {
  DestinationConfig config;
  config.name = "webhook";
  config.type = "http";
  config.headers = {{"X-Static", "1"}};
  config.options = {{"baseUrl", "http://127.0.0.1:9/api"}, {"path", "/in"}, {"timeoutMs", 500}};
  Result<std::unique_ptr<Destination>> d = FindDestinationType("http")->create(
      config, DestinationContext{.max_error_body_bytes = 64, .on_http_response = {}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->name(), "webhook");
  EXPECT_EQ((*d)->type(), "http");
  EXPECT_EQ(static_cast<HttpDestination&>(**d).url(), "http://127.0.0.1:9/api/in");
  EXPECT_TRUE((*d)->Start().ok());
}

}  // namespace
}  // namespace queuebox
