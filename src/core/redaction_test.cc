// Tests of the error sanitizer against the examples of QueueBox reference §10 and more.
#include "core/redaction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RedactTest, ConnectionStringKeepsOtherPairs) {
  EXPECT_EQ(Redact("Host=db;Username=app;Password=hunter2;Database=queuebox"),
            "Host=db;Username=app;Password=[REDACTED];Database=queuebox");
}

TEST(RedactTest, UrlUserinfoWithAtInPassword) {
  EXPECT_EQ(Redact("connect https://user:p@ss@host/path failed"),
            "connect https://***@host/path failed");
}

TEST(RedactTest, JdbcUrlHidesPasswordKeepsHost) {
  std::string out = Redact("jdbc:postgresql://db:5432/app?user=app&password=hunter2&ssl=true");
  EXPECT_THAT(out, AllOf(Not(HasSubstr("hunter2")), HasSubstr("jdbc:postgresql://db:5432/app"),
                         HasSubstr("user=app"), HasSubstr("ssl=true")));
}

// A 64-character token or password (`openssl rand -hex 32`) puts the '@' past the 64-character
// window: still masked (found by the review of the NATS destination's error reporting).
TEST(RedactTest, UrlUserinfoLongerThanTheWindow) {
  const std::string token(64, 'f');
  EXPECT_EQ(Redact("cannot connect to NATS (nats://" + token + "@127.0.0.1:4222): refused"),
            "cannot connect to NATS (nats://***@127.0.0.1:4222): refused");
  EXPECT_EQ(Redact("nats://qbuser:" + token + "@h1:4222,nats://qbuser:" + token + "@h2:4222"),
            "nats://***@h1:4222,nats://***@h2:4222");
  EXPECT_EQ(MaskUrlCredentials("postgres://app:" + std::string(300, 'x') + "@db/app"),
            "postgres://***@db/app");
  // Prose after a URL keeps its words: the run past the window ends at whitespace or '/'.
  const std::string path(70, 'p');
  EXPECT_EQ(Redact("see https://host/" + path + " or mail nate@example.com"),
            "see https://host/" + path + " or mail nate@example.com");
}

TEST(RedactTest, JdbcUrlWithUserinfo) {
  EXPECT_EQ(Redact("jdbc:postgresql://app:s3cr%40t@db:5432/app"),
            "jdbc:postgresql://***@db:5432/app");
}

TEST(RedactTest, HeaderMapHidesBoth) {
  std::string out =
      Redact("headers {Authorization=Bearer leaked-value-123, X-Api-Key=leaked-key-456}");
  EXPECT_THAT(out, AllOf(Not(HasSubstr("leaked-value-123")), Not(HasSubstr("leaked-key-456"))));
  EXPECT_EQ(out, "headers {Authorization=[REDACTED], X-Api-Key=[REDACTED]}");
}

TEST(RedactTest, PasswordlessSurvives) {
  EXPECT_EQ(Redact("passwordless=true login"), "passwordless=true login");
  EXPECT_EQ(Redact("passwordless: enabled"), "passwordless: enabled");
}

TEST(RedactTest, ProseWithTokenSurvives) {
  EXPECT_EQ(Redact("the token bucket is empty"), "the token bucket is empty");
  EXPECT_EQ(Redact("Basic configuration"), "Basic [REDACTED]");  // over-masking, as QueueBox
}

TEST(RedactTest, JsonPassword) {
  std::string out = Redact(R"({"user":"bob","password":"x y z","n":1})");
  EXPECT_EQ(out, R"({"user":"bob","password=[REDACTED],"n":1})");
}

TEST(RedactTest, JsonPasswordWithSpacesAndEscapedQuote) {
  std::string out = Redact(R"({"password" : "a\"b,c"})");
  EXPECT_THAT(out, AllOf(Not(HasSubstr("a\\\"b")), Not(HasSubstr(",c"))));
}

TEST(RedactTest, AuthorizationHeaderColonNotation) {
  EXPECT_EQ(Redact("Authorization: Bearer abc.def-ghi"), "Authorization=[REDACTED]");
  EXPECT_EQ(Redact("authorization: basic dXNlcjpwYXNz\nnext line"),
            "authorization=[REDACTED]\nnext line");
}

TEST(RedactTest, ColonNotationTakesTheWholeTail) {
  EXPECT_EQ(Redact("password: my secret pass"), "password=[REDACTED]");
  EXPECT_EQ(Redact("password: my secret pass; user: bob"), "password=[REDACTED]; user: bob");
}

TEST(RedactTest, EnvNotation) {
  EXPECT_EQ(Redact("PGPASSWORD=x psql"), "PGPASSWORD=[REDACTED] psql");
  EXPECT_EQ(Redact("export API_KEY='abc def'"), "export API_KEY=[REDACTED]");
}

TEST(RedactTest, KeySpellings) {
  EXPECT_EQ(Redact("apiKey=1"), "apiKey=[REDACTED]");
  EXPECT_EQ(Redact("client.secret=2"), "client.secret=[REDACTED]");
  EXPECT_EQ(Redact("access_token=3"), "access_token=[REDACTED]");
  EXPECT_EQ(Redact("X-Auth-Token: 4"), "X-Auth-Token=[REDACTED]");
  EXPECT_EQ(Redact("Set-Cookie: a=b; Path=/"), "Set-Cookie=[REDACTED]; Path=/");
  EXPECT_EQ(Redact("credentials=5"), "credentials=[REDACTED]");
  EXPECT_EQ(Redact("private_key=6"), "private_key=[REDACTED]");
  EXPECT_EQ(Redact("passphrase=7"), "passphrase=[REDACTED]");
  EXPECT_EQ(Redact("pwd=8"), "pwd=[REDACTED]");
}

TEST(RedactTest, ValueWithSchemeInEnvNotation) {
  EXPECT_EQ(Redact("auth_header=Bearer zzz, next=1"), "auth_header=Bearer [REDACTED], next=1");
  EXPECT_EQ(Redact("token=Bearer zzz next"), "token=[REDACTED] next");
}

TEST(RedactTest, BareSchemeTokens) {
  EXPECT_EQ(Redact("sent Bearer eyJhbGciOi.J9x-y_z== to upstream"),
            "sent Bearer [REDACTED] to upstream");
  EXPECT_EQ(Redact("Basic dXNlcjpwYXNz"), "Basic [REDACTED]");
  EXPECT_EQ(Redact("bearer lowercase survives"), "bearer lowercase survives");
  EXPECT_EQ(Redact("NotBearer abc"), "NotBearer abc");
}

TEST(RedactTest, UrlOverMaskingAcceptedAndCommasBound) {
  EXPECT_EQ(Redact("amqp://rabbit:5672 refused for nate@example.com"), "amqp://***@example.com");
  EXPECT_EQ(Redact("amqp://rabbit:5672, contact nate@example.com"),
            "amqp://rabbit:5672, contact nate@example.com");
}

TEST(RedactTest, UrlWithoutCredentialsSurvives) {
  EXPECT_EQ(Redact("POST http://127.0.0.1:8080/hooks?x=1 failed"),
            "POST http://127.0.0.1:8080/hooks?x=1 failed");
}

TEST(RedactTest, SecretQueryParams) {
  EXPECT_EQ(MaskUrlCredentials("http://h/p?a=1&token=abc;secret=d&b=2"),
            "http://h/p?a=1&token=***;secret=***&b=2");
  EXPECT_EQ(MaskUrlCredentials("redis://u:pw@cache:6379/0"), "redis://***@cache:6379/0");
}

TEST(RedactTest, UnterminatedQuoteHidesRestOfLine) {
  EXPECT_EQ(Redact("password=\"abc def\nnext"), "password=[REDACTED]\nnext");
}

TEST(RedactTest, Idempotent) {
  for (std::string text : {"password=hunter2] x", "token: abc, Bearer xyz",
                           "https://u:p@h/p?token=1", "Authorization=Bearer a.b"}) {
    std::string once = Redact(text);
    EXPECT_EQ(Redact(once), once) << text;
  }
}

TEST(RedactTest, PlainTextUnchanged) {
  std::string text = "HTTP 503: Service Unavailable - upstream busy, retry later; id=42 ok";
  EXPECT_EQ(Redact(text), text);
  EXPECT_EQ(Redact(""), "");
}

TEST(RedactTest, MultibyteTextUnchanged) {
  std::string text = "Fehler: Größe überschritten – 東京 password=geheim";
  EXPECT_EQ(Redact(text), "Fehler: Größe überschritten – 東京 password=[REDACTED]");
}

TEST(IsSecretKeyTest, Names) {
  EXPECT_TRUE(IsSecretKey("Authorization"));
  EXPECT_TRUE(IsSecretKey("X-Api-Key"));
  EXPECT_TRUE(IsSecretKey("PGPASSWORD"));
  EXPECT_FALSE(IsSecretKey("passwordless"));
  EXPECT_FALSE(IsSecretKey("X-Topic"));
  EXPECT_FALSE(IsSecretKey("Content-Type"));
}

TEST(TruncateTest, ShortTextUnchanged) {
  EXPECT_EQ(Truncate("abc", 3), "abc");
  EXPECT_EQ(Truncate("", 0), "");
}

TEST(TruncateTest, LongTextGetsMarkerAndExactLength) {
  std::string text(3000, 'a');
  std::string out = Truncate(text, 2000);
  EXPECT_EQ(out.size(), 2000u);
  EXPECT_EQ(out, std::string(2000 - kTruncatedMarker.size(), 'a') + std::string(kTruncatedMarker));
}

TEST(TruncateTest, NeverCutsInsideACodePoint) {
  // "é" is 2 bytes, "東" 3, "😀" 4: each counts as one character.
  std::string text;
  for (int i = 0; i < 30; ++i) text += "é東😀";
  std::string out = Truncate(text, 20);
  EXPECT_EQ(out, "é東😀é東😀" + std::string(kTruncatedMarker));
  EXPECT_EQ(Truncate(text, 90), text);
  EXPECT_EQ(Truncate(text, 4), "é東😀é");  // smaller than the marker: a plain cut
}

TEST(SanitizeErrorTest, RedactsThenTruncates) {
  std::string text = "password=hunter2 " + std::string(5000, 'x');
  std::string out = SanitizeError(text);
  EXPECT_EQ(out.size(), kMaxErrorChars);
  EXPECT_THAT(out, AllOf(Not(HasSubstr("hunter2")), HasSubstr("password=[REDACTED]"),
                         HasSubstr(std::string(kTruncatedMarker))));
  EXPECT_EQ(SanitizeError("token=abc", 100), "token=[REDACTED]");
}

// Inputs that make backtracking regexes explode finish quickly here (linear scanners). The
// bound is generous: it catches quadratic behaviour (minutes), not slow machines.
TEST(RedactTest, AdversarialInputIsLinear) {
  std::string many_colons(200000, ':');
  std::string many_keys;
  for (int i = 0; i < 20000; ++i) many_keys += "password password= Bearer ";
  std::string many_urls;
  for (int i = 0; i < 20000; ++i)
    many_urls += "a://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  std::string long_run(300000, 'a');
  long_run += ":";
  for (const std::string* s : {&many_colons, &many_keys, &many_urls, &long_run}) {
    std::string out = Redact(*s);
    EXPECT_FALSE(out.empty());
  }
  EXPECT_THAT(Redact(many_keys), Not(HasSubstr("Bearer")));
}

}  // namespace
}  // namespace queuebox
