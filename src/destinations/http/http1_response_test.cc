// Unit tests of the HTTP/1.x answer reader (http1_response.h): each answer is fed whole, then
// one byte at a time, and must read the same. The transport is tested against real servers in
// tests/integration/http1_transport_test.cc.
#include "destinations/http/http1_response.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>

namespace queuebox {
namespace {

struct Read {
  bool done = false;
  std::string problem;
  size_t used = 0;
  bool keep_alive = false;
  Http1Answer answer;
};

// Feeds `wire` in pieces of `step` bytes (0: whole); then the end of the stream when `eof`.
Read Parse(std::string_view wire, size_t step, size_t cap = 1024, bool eof = false) {
  Http1ResponseParser p;
  p.Reset(cap);
  Read r;
  if (step == 0) step = wire.size() == 0 ? 1 : wire.size();
  for (size_t at = 0; at < wire.size() && !p.done() && r.problem.empty(); at += step) {
    r.used += p.Feed(wire.substr(at, step), r.problem);
  }
  if (eof && !p.done()) p.EndOfStream();
  r.done = p.done();
  r.keep_alive = p.keep_alive();
  if (r.done) r.answer = p.TakeAnswer();
  return r;
}

// The same answer whole and byte by byte.
void ExpectSame(std::string_view wire, const Read& whole) {
  Read bytes = Parse(wire, 1);
  EXPECT_EQ(bytes.done, whole.done);
  EXPECT_EQ(bytes.problem, whole.problem);
  EXPECT_EQ(bytes.answer.status, whole.answer.status);
  EXPECT_EQ(bytes.answer.body, whole.answer.body);
}

TEST(Http1ResponseTest, StatusReasonAndLengthBody) {
  const std::string wire = "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!";
  Read r = Parse(wire, 0);
  ASSERT_TRUE(r.done) << r.problem;
  EXPECT_EQ(r.answer.kind, Http1Answer::Kind::kAnswered);
  EXPECT_EQ(r.answer.status, 404);
  EXPECT_EQ(r.answer.reason, "Not Found");
  EXPECT_EQ(r.answer.body, "nope!");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.used, wire.size());
  ExpectSame(wire, r);
}

TEST(Http1ResponseTest, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string wire =
      "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;name=x\r\nboom\r\n3\r\n!!!\r\n0\r\nX-Trailer: 1\r\n\r\n";
  Read r = Parse(wire, 0);
  ASSERT_TRUE(r.done) << r.problem;
  EXPECT_EQ(r.answer.body, "boom!!!");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.used, wire.size());
  ExpectSame(wire, r);
}

TEST(Http1ResponseTest, TheBodyIsKeptUpToItsCapAndReadWhole) {
  const std::string wire = "HTTP/1.1 400 Bad Request\r\nContent-Length: 10\r\n\r\n0123456789";
  Read r = Parse(wire, 3, /*cap=*/4);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.answer.body, "0123");
  EXPECT_EQ(r.used, wire.size());
  EXPECT_TRUE(r.keep_alive);
}

TEST(Http1ResponseTest, InterimAnswersArePassedOver) {
  const std::string wire =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 204 No Content\r\n\r\n";
  Read r = Parse(wire, 0);
  ASSERT_TRUE(r.done) << r.problem;
  EXPECT_EQ(r.answer.status, 204);
  EXPECT_EQ(r.answer.reason, "No Content");
  ExpectSame(wire, r);
}

TEST(Http1ResponseTest, NoLengthReadsToTheEndOfTheConnection) {
  const std::string wire = "HTTP/1.1 502 Bad Gateway\r\n\r\nupstream down";
  Read open = Parse(wire, 0);
  EXPECT_FALSE(open.done);
  Read closed = Parse(wire, 0, 1024, /*eof=*/true);
  ASSERT_TRUE(closed.done);
  EXPECT_EQ(closed.answer.body, "upstream down");
  EXPECT_FALSE(closed.keep_alive);
}

TEST(Http1ResponseTest, ConnectionCloseAndHttp10DecideReuse) {
  EXPECT_FALSE(
      Parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 0).keep_alive);
  EXPECT_FALSE(Parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 0).keep_alive);
  EXPECT_TRUE(Parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 0)
                  .keep_alive);
  EXPECT_TRUE(Parse("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", 0).keep_alive);
}

TEST(Http1ResponseTest, BytesAfterTheAnswerAreNotConsumed) {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
  Read r = Parse(wire, 0);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.used, wire.find("okHTTP") + 2);
}

TEST(Http1ResponseTest, RetryAfterInSecondsOrAsADate) {
  Read seconds = Parse("HTTP/1.1 503 x\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n", 0);
  EXPECT_EQ(seconds.answer.retry_after_s, 120);
  // A date 300 s from now, as an IMF-fixdate.
  std::time_t at = std::time(nullptr) + 300;
  std::tm tm{};
  gmtime_r(&at, &tm);
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  Read dated = Parse(
      std::string("HTTP/1.1 429 x\r\nRetry-After: ") + date + "\r\nContent-Length: 0\r\n\r\n", 0);
  EXPECT_GE(dated.answer.retry_after_s, 298);
  EXPECT_LE(dated.answer.retry_after_s, 300);
  Read junk = Parse("HTTP/1.1 503 x\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n", 0);
  EXPECT_EQ(junk.answer.retry_after_s, 0);
}

TEST(Http1ResponseTest, TransferEncodingWinsOverContentLength) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nok\r\n0\r\n\r\n";
  Read r = Parse(wire, 0);
  ASSERT_TRUE(r.done) << r.problem;
  EXPECT_EQ(r.answer.body, "ok");
}

TEST(Http1ResponseTest, MalformedAnswersAreProblemsNamed) {
  EXPECT_EQ(Parse("SSH-2.0-OpenSSH\r\n", 0).problem, "not an HTTP/1.x status line");
  EXPECT_EQ(Parse("HTTP/1.1 2000 OK\r\n", 0).problem, "not an HTTP/1.x status line");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", 0).problem,
            "bad Content-Length");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0).problem,
            "bad Content-Length");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0).problem,
            "bad chunk size");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", 0).problem,
            "chunk not followed by a line end");
  EXPECT_EQ(Parse("HTTP/1.1 101 Switching Protocols\r\n\r\n", 0).problem,
            "101 Switching Protocols to a request that asked for none");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", 0).problem, "header line without a name");
  EXPECT_EQ(Parse("HTTP/1.1 200 OK\r\nX: " + std::string(70000, 'a') + "\r\n\r\n", 4096).problem,
            "head or chunk line longer than 64 KiB");
}

// The 64 KiB bound is the head's, and each chunk line's on its own: a head just under the bound
// must not make the first chunk-size line of a chunked body "longer than 64 KiB".
TEST(Http1ResponseTest, AHeadNearTheBoundDoesNotCountAgainstTheFirstChunkLine) {
  std::string head = "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\nX: ";
  head += std::string(Http1ResponseParser::kMaxHead - head.size() - 4, 'a');
  head += "\r\n\r\n";
  ASSERT_EQ(head.size(), Http1ResponseParser::kMaxHead);
  const std::string wire = head + "4\r\nboom\r\n0\r\n\r\n";
  Read r = Parse(wire, 0);
  EXPECT_EQ(r.problem, "");
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.answer.body, "boom");
  ExpectSame(wire, r);
  // A head over the bound is still refused.
  EXPECT_EQ(
      Parse("HTTP/1.1 200 OK\r\nX: " + std::string(Http1ResponseParser::kMaxHead, 'a') + "\r\n\r\n",
            0)
          .problem,
      "head or chunk line longer than 64 KiB");
}

}  // namespace
}  // namespace queuebox
