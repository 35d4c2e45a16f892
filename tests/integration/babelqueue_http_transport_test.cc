// babelqueue_http_transport_test.cc: OutboxRelay -> DestinationTransport -> the relay's http
// destination -> a real HTTP receiver on loopback. The request body is the envelope bytes exactly
// as encoded and the bq-* binding headers are projected from it; a non-2xx answer leaves the row
// pending with the reason, and a later drain delivers it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "babelqueue/outbox.h"
#include "destinations/babelqueue_transport/destination_transport.h"
#include "destinations/http/http_destination.h"
#include "testing/http_receiver.h"

namespace babelqueue {
namespace {

using ::testing::HasSubstr;

class HttpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(receiver_.Start().ok());
    queuebox::HttpDestinationSettings settings;
    settings.name = "bq-http";
    settings.base_url = receiver_.BaseUrl();
    settings.path = "/events";
    settings.timeout_ms = 10000;
    auto destination = queuebox::HttpDestination::Create(settings);
    ASSERT_TRUE(destination.ok()) << destination.status().message();
    auto transport = DestinationTransport::Create(std::move(*destination));
    ASSERT_TRUE(transport.ok()) << transport.status().message();
    transport_ = std::move(*transport);
    options_.sleeper = [this](int64_t ms) { sleeps_.push_back(ms); };
  }

  Envelope Tricky(const std::string& queue) {
    Json data = Json::object();
    data["title"] = "Café — ☕ </b> \u2028";
    data["ratio"] = 1.0;
    data["qty"] = 7;
    Result<Envelope> env =
        Make("urn:babel:orders:created", data, {.queue = queue, .trace_id = "trace-http-1"});
    EXPECT_TRUE(env.ok());
    return *env;
  }

  queuebox::testing::HttpReceiver receiver_;
  std::unique_ptr<DestinationTransport> transport_;
  InMemoryOutboxStore store_;
  RelayOptions options_;
  std::vector<int64_t> sleeps_;
};

TEST_F(HttpTransportTest, PostsTheEncodedBytesVerbatimWithBindingHeaders) {
  const Envelope first = Tricky("orders");
  const Envelope second = Tricky("billing");
  ASSERT_TRUE(Outbox(store_).Write(first).ok());
  ASSERT_TRUE(Outbox(store_).Write(second).ok());

  RelayResult r = OutboxRelay(*transport_, store_, options_).Drain();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.published, 2);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(store_.PendingCount(), 0);

  ASSERT_TRUE(receiver_.WaitForRequests(2, std::chrono::seconds(10)));
  const auto requests = receiver_.Requests();
  ASSERT_EQ(requests.size(), 2u);
  const Envelope* sent[] = {&first, &second};
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const auto& req = requests[i];
    const Envelope& env = *sent[i];
    EXPECT_EQ(req.method, "POST");
    EXPECT_EQ(req.target, "/events");
    EXPECT_EQ(req.body, *Encode(env));  // byte for byte
    EXPECT_EQ(req.Header("Content-Type"), "application/json");
    EXPECT_EQ(req.Header("bq-job"), "urn:babel:orders:created");
    EXPECT_EQ(req.Header("bq-trace-id"), "trace-http-1");
    EXPECT_EQ(req.Header("bq-message-id"), env.meta.id);
    EXPECT_EQ(req.Header("bq-schema-version"), "1");
    EXPECT_EQ(req.Header("bq-source-lang"), "cpp");
    EXPECT_EQ(req.Header("bq-attempts"), "0");
    EXPECT_EQ(req.Header("X-Message-Id"), env.meta.id);
    EXPECT_EQ(req.Header("X-Topic"), env.meta.queue);
  }
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(HttpTransportTest, ARefusedPostLeavesTheRowPendingUntilALaterDrain) {
  receiver_.EnqueueResponse({.status = 503, .body = "busy"});
  ASSERT_TRUE(Outbox(store_).Write(Tricky("orders")).ok());
  OutboxRelay relay(*transport_, store_, options_);

  RelayResult first = relay.Drain();
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.published, 0);
  EXPECT_EQ(first.failed, 1);
  EXPECT_EQ(store_.PendingCount(), 1);
  EXPECT_EQ(store_.AttemptsOf("ob-1"), 1);
  EXPECT_THAT(store_.LastErrorOf("ob-1"), HasSubstr("HTTP 503"));
  EXPECT_EQ(sleeps_, std::vector<int64_t>{50});

  RelayResult second = relay.Drain();
  ASSERT_TRUE(second.status.ok());
  EXPECT_EQ(second.published, 1);
  EXPECT_EQ(store_.PendingCount(), 0);
  ASSERT_TRUE(receiver_.WaitForRequests(2, std::chrono::seconds(10)));
  EXPECT_EQ(receiver_.Requests()[0].body, receiver_.Requests()[1].body);  // same bytes resent
}

TEST_F(HttpTransportTest, AnUnreachableReceiverIsARetryableFailure) {
  receiver_.Stop();
  Status s = transport_->Publish("orders", *Encode(Tricky("orders")));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("Publish failed"));
  Status bad = transport_->Publish("orders", "not an envelope");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace babelqueue
