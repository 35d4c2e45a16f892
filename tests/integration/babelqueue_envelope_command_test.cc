// babelqueue_envelope_command_test.cc: `queuebox envelope` (apps/queuebox/envelope_command.cc) on
// the vendored conformance fixtures, standard input and unreadable paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "../../apps/queuebox/envelope_command.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kFixtures =
    std::string(QUEUEBOX_SOURCE_DIR) + "/tests/conformance/babelqueue/fixtures/";

struct CommandRun {
  int code;
  std::string out, err;
};

CommandRun Envelope(const std::string& path, bool canonical, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  const int code = RunEnvelopeCommand(path, canonical, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(EnvelopeCommandTest, AcceptsAValidFixture) {
  CommandRun r = Envelope(kFixtures + "order-created.json", false);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out,
            "accepted: job=urn:babel:orders:created id=f1e2d3c4-b5a6-4789-90ab-cdef01234567 "
            "queue=orders lang=php attempts=0\n");
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(EnvelopeCommandTest, CanonicalReencodesThePrettyPrintedFixture) {
  CommandRun r = Envelope(kFixtures + "order-created.json", true);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(
      r.out,
      R"({"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",)"
      R"("data":{"order_id":1042},"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567",)"
      R"("queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},)"
      R"("attempts":0})"
      "\n");
}

TEST(EnvelopeCommandTest, CanonicalTurnsTheUrnAliasIntoJob) {
  CommandRun r = Envelope(kFixtures + "urn-alias.json", true);
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, ::testing::StartsWith(R"({"job":"urn:babel:orders:created","trace_id")"));
}

TEST(EnvelopeCommandTest, ExplainsWhyAnEnvelopeIsNotAccepted) {
  CommandRun version = Envelope(kFixtures + "invalid-unknown-schema-version.json", false);
  EXPECT_EQ(version.code, 1);
  EXPECT_THAT(version.out, IsEmpty());
  EXPECT_EQ(version.err,
            "not accepted: unsupported_schema_version: meta.schema_version 2 is not a version "
            "this SDK supports (1)\n");
  CommandRun urn = Envelope(kFixtures + "invalid-missing-urn.json", true);
  EXPECT_EQ(urn.code, 1);
  EXPECT_THAT(urn.err, HasSubstr("not accepted: missing_urn"));
}

TEST(EnvelopeCommandTest, ReadsStandardInput) {
  CommandRun ok =
      Envelope("-", false,
               R"({"job":"urn:a:b","trace_id":"t","data":{},"meta":{"schema_version":1},)"
               R"("attempts":4})");
  EXPECT_EQ(ok.code, 0);
  EXPECT_THAT(ok.out, HasSubstr("job=urn:a:b"));
  EXPECT_THAT(ok.out, HasSubstr("attempts=4"));
  CommandRun bad = Envelope("-", false, "{not json");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("not accepted: malformed"));
}

TEST(EnvelopeCommandTest, UnreadablePathExitsTwo) {
  CommandRun r = Envelope("/nonexistent/envelope.json", false);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read /nonexistent/envelope.json"));
}

}  // namespace
}  // namespace queuebox
