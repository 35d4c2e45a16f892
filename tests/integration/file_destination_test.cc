// The file destination against the real file system: the line format, durability before
// Delivered, write errors. What every destination does is in
// tests/contract/destination_contract_test.cc.
#include "destinations/file/file_destination.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "testing/broker_testing.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BatchOf;
using ::queuebox::testing::CollectingSink;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

OutboxRow Row(std::string id, std::optional<std::string> key, std::string payload,
              std::string headers = "{}") {
  return ::queuebox::testing::BrokerRow(std::move(id), "orders.created", std::move(key),
                                        std::move(payload), std::move(headers));
}

std::map<std::size_t, Outcome> Publish(Destination& d, const std::vector<OutboxRow>& rows) {
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d.PublishBatch(batch, sink);
  EXPECT_EQ(sink.outcomes().size(), rows.size());
  return sink.outcomes();
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class FileDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "qb-file-dest-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<FileDestination> Make(const std::string& path, bool fsync = true) {
    return std::make_unique<FileDestination>(FileDestinationSettings{
        .name = "archive", .path = path, .fsync = fsync, .static_headers = {}});
  }

  std::string dir_;
};

TEST_F(FileDestinationTest, WritesOneParsableLinePerMessage) {
  std::string path = dir_ + "/out.jsonl";
  auto d = Make(path);
  ASSERT_TRUE(d->Start().ok());
  std::vector<OutboxRow> rows = {
      Row("id-1", "customer-7", "{\n  \"order\": {\"total\": 12.5, \"items\": [1, 2]}\n}",
          R"({"X-Correlation-Id":"c-1"})"),
      Row("id-2", std::nullopt, "[1,\"two\",null]"),
      Row("id-3", "", "\"just a string with \\n newline\""),
  };
  rows[1].attempt = 2;
  auto outcomes = Publish(*d, rows);
  for (const auto& [i, o] : outcomes) EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;

  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 3u);
  json first = json::parse(lines[0]);
  EXPECT_EQ(first["id"], "id-1");
  EXPECT_EQ(first["topic"], "orders.created");
  EXPECT_EQ(first["key"], "customer-7");
  EXPECT_EQ(first["attempt"], 0);
  EXPECT_EQ(first["headers"], json::parse(R"({"X-Correlation-Id":"c-1"})"));
  EXPECT_EQ(first["payload"], json::parse(rows[0].payload));  // embedded as JSON, not a string
  EXPECT_TRUE(first["payload"].is_object());
  json second = json::parse(lines[1]);
  EXPECT_TRUE(second["key"].is_null());
  EXPECT_EQ(second["attempt"], 2);
  EXPECT_EQ(second["payload"], json::parse("[1,\"two\",null]"));
  json third = json::parse(lines[2]);
  EXPECT_EQ(third["key"], "");
  EXPECT_EQ(third["payload"], "just a string with \n newline");
  // The field order is fixed.
  EXPECT_THAT(lines[1], StartsWith(R"({"id":"id-2","topic":"orders.created","key":null,)"
                                   R"("attempt":2,"headers":{},"payload":)"));
}

TEST_F(FileDestinationTest, StartFailsWhenTheFolderIsMissing) {
  auto d = Make(dir_ + "/missing/out.jsonl");
  Status s = d->Start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("destinations.archive"));
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/missing/out.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/missing"));
}

TEST_F(FileDestinationTest, InvalidJsonIsRejectedOthersWritten) {
  std::string path = dir_ + "/out.jsonl";
  auto d = Make(path);
  ASSERT_TRUE(d->Start().ok());
  auto outcomes =
      Publish(*d, {Row("ok-1", std::nullopt, "{}"), Row("bad-payload", std::nullopt, "{oops"),
                   Row("bad-headers", std::nullopt, "{}", "[1]"), Row("ok-2", std::nullopt, "{}")});
  EXPECT_EQ(outcomes.at(0).kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(outcomes.at(1).kind, Outcome::Kind::kReject);
  EXPECT_EQ(outcomes.at(1).error, "invalid payload: not a JSON document");
  EXPECT_EQ(outcomes.at(2).kind, Outcome::Kind::kReject);
  EXPECT_EQ(outcomes.at(2).error, "invalid row headers: expected a JSON object");
  EXPECT_EQ(outcomes.at(3).kind, Outcome::Kind::kDelivered);
  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[1])["id"], "ok-2");
}

// fdatasync fails on a FIFO (EINVAL): with fsync on, the batch is not reported Delivered, which
// proves the sync runs before the outcome; with fsync off the same write is Delivered.
TEST_F(FileDestinationTest, SyncsBeforeReportingDelivered) {
  std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);

  auto synced = Make(fifo, /*fsync=*/true);
  ASSERT_TRUE(synced->Start().ok());
  auto outcomes = Publish(*synced, {Row("a", std::nullopt, "1")});
  EXPECT_EQ(outcomes.at(0).kind, Outcome::Kind::kRetry);
  EXPECT_EQ(outcomes.at(0).error, "Publish failed: fdatasync " + fifo + ": Invalid argument");

  auto unsynced = Make(fifo, /*fsync=*/false);
  ASSERT_TRUE(unsynced->Start().ok());
  outcomes = Publish(*unsynced, {Row("b", std::nullopt, "2")});
  EXPECT_EQ(outcomes.at(0).kind, Outcome::Kind::kDelivered) << outcomes.at(0).error;
  ::close(reader);
}

TEST_F(FileDestinationTest, WriteErrorIsRetry) {
  auto d = Make("/dev/full");
  ASSERT_TRUE(d->Start().ok());
  auto outcomes = Publish(*d, {Row("a", std::nullopt, "1"), Row("b", std::nullopt, "2")});
  for (const auto& [i, o] : outcomes) {
    EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
    EXPECT_EQ(o.error, "Publish failed: write /dev/full: No space left on device");
  }
}

}  // namespace
}  // namespace queuebox
