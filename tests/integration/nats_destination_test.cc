// The nats destination against a real `nats-server -js` (QB_TEST_NATS_URL, started by
// scripts/services.sh): subjects and Nats-Msg-Id read back from the stream, de-duplication, PubAcks
// that fail or do not come, core NATS, server loss and recovery (the test stops and starts
// nats-server through scripts/services.sh), credentials. What every destination does is in
// tests/contract/destination_contract_test.cc.
#ifdef QB_WITH_NATS
#include "destinations/nats/nats_destination.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nats/nats.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config_test_util.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/join_on_exit.h"
#include "testing/log_capture.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BrokerRow;
using ::queuebox::testing::PublishAll;
using ::testing::AllOf;
using ::testing::HasSubstr;

using StreamFixture = ::queuebox::testing::JetStreamTestStream;
using Stored = ::queuebox::testing::StoredNatsMessage;

class NatsDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url_);
    static std::atomic<int> n{0};
    std::string id = std::to_string(::getpid()) + "_" + std::to_string(++n);
    stream_ = "QBTEST_" + id;
    prefix_ = "qbtest." + id;
  }

  NatsDestinationSettings Settings(std::string subject) {
    NatsDestinationSettings s;
    s.name = "nats";
    s.servers = url_;
    s.subject = std::move(subject);
    s.timeout_ms = 5000;
    return s;
  }

  std::unique_ptr<NatsDestination> Started(NatsDestinationSettings s) {
    return testing::StartedDestination<NatsDestination>(std::move(s));
  }

  std::string url_, stream_, prefix_;
};

// The subject renders from the row; JetStream de-duplicates on Nats-Msg-Id, the row id.
TEST_F(NatsDestinationTest, PubAckPathCarriesSubjectAndNatsMsgId) {
  StreamFixture stream(url_, stream_, prefix_);
  auto d = Started(Settings(prefix_ + ".{{ topic }}"));
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {
      BrokerRow("11111111-1111-1111-1111-111111111111", "orders.created", "k1", "{}"),
      BrokerRow("22222222-2222-2222-2222-222222222222", "orders.none", std::nullopt, "{}")};
  std::vector<Outcome> out = PublishAll(*d, rows);
  ASSERT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  ASSERT_EQ(out[1].kind, Outcome::Kind::kDelivered) << out[1].error;
  ASSERT_EQ(stream.Count(), 2u);

  Stored first = stream.Get(1);
  EXPECT_EQ(first.subject, prefix_ + ".orders.created");
  EXPECT_EQ(first.headers["Nats-Msg-Id"], "11111111-1111-1111-1111-111111111111");
  EXPECT_EQ(stream.Get(2).subject, prefix_ + ".orders.none");
}

TEST_F(NatsDestinationTest, SameRowTwiceIsStoredOnce) {
  StreamFixture stream(url_, stream_, prefix_);
  auto d = Started(Settings(prefix_ + ".events"));
  ASSERT_NE(d, nullptr);
  OutboxRow row = BrokerRow("33333333-3333-3333-3333-333333333333", "t", "k", R"({"a":1})");
  EXPECT_EQ(PublishAll(*d, {row})[0].kind, Outcome::Kind::kDelivered);
  row.attempt = 1;  // a retry after a lost PubAck
  Outcome again = PublishAll(*d, {row})[0];
  EXPECT_EQ(again.kind, Outcome::Kind::kDelivered) << again.error;
  EXPECT_EQ(stream.Count(), 1u);
}

// One slice whose PubAcks settle differently (stored, no stream: no responders, stored): its
// worker, woken once when the last one settles, gets each message's own outcome.
TEST_F(NatsDestinationTest, ASliceWithAFailedPubAckSettlesEachMessage) {
  StreamFixture stream(url_, stream_, prefix_);
  NatsDestinationSettings s = Settings("unused");
  s.subject_from = "key";
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  std::vector<Outcome> out =
      PublishAll(*d, {BrokerRow("m-a", "t", prefix_ + ".a", "{}"),
                      BrokerRow("m-b", "t", "qbtest.nostream." + stream_, "{}"),
                      BrokerRow("m-c", "t", prefix_ + ".c", "{}")});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(out[1].kind, Outcome::Kind::kRetry) << out[1].error;
  EXPECT_THAT(out[1].error, HasSubstr("qbtest.nostream." + stream_));
  EXPECT_EQ(out[2].kind, Outcome::Kind::kDelivered) << out[2].error;
  EXPECT_EQ(stream.Count(), 2u);
}

TEST_F(NatsDestinationTest, EmptySubjectAndSubjectFrom) {
  StreamFixture stream(url_, stream_, prefix_);
  NatsDestinationSettings s = Settings("unused");
  s.subject_from = "key";
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t", prefix_ + ".from-key", "{}"),
                                             BrokerRow("b", "t", std::nullopt, "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(out[1].kind, Outcome::Kind::kRetry);
  EXPECT_THAT(out[1].error, HasSubstr("rendered an empty subject"));
  EXPECT_EQ(stream.Get(1).subject, prefix_ + ".from-key");
}

TEST_F(NatsDestinationTest, CoreNatsPublishesAndFlushes) {
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url_.c_str()), NATS_OK);
  natsSubscription* sub = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, nc, (prefix_ + ".core").c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(nc), NATS_OK);

  NatsDestinationSettings s = Settings(prefix_ + ".core");
  s.jet_stream = false;
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("c1", "t", "k", R"({"core":true})")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;

  natsMsg* m = nullptr;
  ASSERT_EQ(natsSubscription_NextMsg(&m, sub, 5000), NATS_OK);
  EXPECT_EQ(std::string(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m))),
            R"({"core":true})");
  const char* id = nullptr;
  EXPECT_EQ(natsMsgHeader_Get(m, "x-message-id", &id), NATS_OK);
  EXPECT_STREQ(id, "c1");
  EXPECT_EQ(natsMsgHeader_Get(m, "Nats-Msg-Id", &id), NATS_NOT_FOUND);  // JetStream only
  natsMsg_Destroy(m);
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
}

TEST_F(NatsDestinationTest, ServerLossIsAnOutageThenDeliveryResumes) {
  std::string script = std::string(QUEUEBOX_SOURCE_DIR) + "/scripts/services.sh";
  // The stream must outlive the restart: created before, checked after (file storage).
  {
    StreamFixture setup(url_, stream_, prefix_);
    NatsDestinationSettings s = Settings(prefix_ + ".loss");
    s.timeout_ms = 5000;  // "before" is acknowledged even on a loaded machine
    auto d = Started(std::move(s));
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(PublishAll(*d, {BrokerRow("before", "t", "k", "{}")})[0].kind,
              Outcome::Kind::kDelivered);

    ASSERT_EQ(std::system(("bash " + script + " stop nats >/dev/null").c_str()), 0);
    Outcome during = PublishAll(*d, {BrokerRow("during", "t", "k", "{}")})[0];
    // The destination's fault, not the message's: the relay releases the row.
    EXPECT_EQ(during.kind, Outcome::Kind::kUnavailable) << during.error;
    EXPECT_EQ(d->Health().code(), StatusCode::kUnavailable);
    ASSERT_EQ(std::system(("bash " + script + " start nats >/dev/null").c_str()), 0);

    // The client reconnects on its own; the retried row is then delivered.
    std::string last;
    EXPECT_TRUE(testing::WaitUntil(
        [&] {
          Outcome o = PublishAll(*d, {BrokerRow("during", "t", "k", "{}")})[0];
          last = o.error;
          return o.kind == Outcome::Kind::kDelivered;
        },
        std::chrono::seconds(30)))
        << last;
    EXPECT_TRUE(d->Health().ok());
  }
}

// A PubAck that does not come costs only its own message: nats.c's per-message deadline
// (jsPubOptions.MaxWait = timeoutMs) settles it as Retry, and another batch whose PubAck is
// still on its way at that moment is delivered. (Clearing nats.c's whole pending list after a
// timeout, as before, dropped that PubAck too: a stored message spent an attempt.) A core
// subscriber stands in for the stream on two subjects and answers by hand: never for A, after
// A's timeout for B.
TEST_F(NatsDestinationTest, AMissingPubAckCostsOnlyItsOwnMessage) {
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url_.c_str()), NATS_OK);
  natsSubscription* sub = nullptr;
  const std::string silent = "qbsilent." + stream_;
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, nc, (silent + ".>").c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(nc), NATS_OK);

  NatsDestinationSettings s = Settings("unused");
  s.subject_from = "key";
  s.timeout_ms = 6000;  // 3 s between A's timeout and B's: room for a sanitizer run
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  auto next_reply = [&](const std::string& subject) {
    natsMsg* m = nullptr;
    EXPECT_EQ(natsSubscription_NextMsg(&m, sub, 10000), NATS_OK);
    if (m == nullptr) return std::string();
    EXPECT_EQ(natsMsg_GetSubject(m), subject);
    std::string reply = natsMsg_GetReply(m) ? natsMsg_GetReply(m) : "";
    natsMsg_Destroy(m);
    return reply;
  };
  std::vector<Outcome> a_out, b_out;
  std::thread a([&] { a_out = PublishAll(*d, {BrokerRow("pa-a", "t", silent + ".a", "{}")}); });
  next_reply(silent + ".a");  // A is in flight; never answered
  // The gap between the two deadlines is the scenario (B in flight when A times out), not a wait
  // for an event: no event tells when nats.c will time A out.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // B's deadline 3 s after A's
  std::thread b([&] { b_out = PublishAll(*d, {BrokerRow("pa-b", "t", silent + ".b", "{}")}); });
  queuebox::testing::JoinOnExit join_b(b);  // b gives up on its own PubAck deadline
  const std::string b_reply = next_reply(silent + ".b");
  a.join();
  ASSERT_EQ(a_out.size(), 1u);
  EXPECT_EQ(a_out[0].kind, Outcome::Kind::kRetry) << a_out[0].error;
  EXPECT_THAT(a_out[0].error, HasSubstr("no JetStream PubAck within 6000ms"));
  EXPECT_THAT(a_out[0].error, ::testing::Not(HasSubstr("gave up")));  // nats.c's own timeout
  // A has timed out; B's PubAck arrives now, within B's own deadline.
  ASSERT_FALSE(b_reply.empty());
  const std::string ack = R"({"stream":")" + stream_ + R"(","seq":1})";
  ASSERT_EQ(natsConnection_PublishString(nc, b_reply.c_str(), ack.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(nc), NATS_OK);
  b.join();
  ASSERT_EQ(b_out.size(), 1u);
  EXPECT_EQ(b_out[0].kind, Outcome::Kind::kDelivered) << b_out[0].error;
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
}

// nats.c runs the disconnected and closed callbacks on its own thread after Close returned; a
// destination torn down before they ran had them write into its freed connection state (CI saw
// the heap corrupted, a crash in another connection's teardown, about one run in ten). Stopping
// waits for the closed callback. Here: many connected teardowns in a row, each followed by
// allocations of the same size class; the ASan job (scripts/sanitizers.sh asan) reports a late
// callback as heap-use-after-free, a plain build as a crash or a wrong count below.
TEST_F(NatsDestinationTest, StoppingWaitsForTheLibrarysCallbacks) {
  StreamFixture stream(url_, stream_, prefix_);
  for (int i = 0; i < 40; ++i) {
    auto d = Started(Settings(prefix_ + ".teardown"));
    ASSERT_NE(d, nullptr);
    ASSERT_TRUE(d->Health().ok()) << d->Health().ToString();
    if (i % 10 == 0) {
      Outcome o = PublishAll(*d, {BrokerRow("t" + std::to_string(i), "t", std::nullopt, "{}")})[0];
      EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
    }
    d->Stop();
    d.reset();
    std::vector<std::unique_ptr<std::array<uint64_t, 8>>> churn;
    for (int j = 0; j < 64; ++j) churn.push_back(std::make_unique<std::array<uint64_t, 8>>());
    for (const auto& a : churn) EXPECT_EQ((*a)[0] + (*a)[1] + (*a)[7], 0u);
  }
  EXPECT_EQ(stream.Count(), 4u);
}

// ---- configuration errors through LoadConfig (no server needed) ----

class NatsConfigTest : public testing::ConfigFileTest {};

TEST_F(NatsConfigTest, EveryKeyIsChecked) {
  Result<Config> c = Load(
      "database:\n  url: /tmp/qb-nats.db\ndestinations:\n  n:\n    type: nats\n"
      "    subject: \"{{ x }}\"\n    subjectFrom: id\n    jetStream: maybe\n    timeoutMs: 0\n"
      "routes:\n  - {topicPattern: \"**\", destination: n}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("destinations.n.servers"), HasSubstr("destinations.n.subjectFrom"),
                    HasSubstr("destinations.n.jetStream"), HasSubstr("destinations.n.timeoutMs")));
  c = Load(
      "database:\n  url: /tmp/qb-nats.db\ndestinations:\n  n:\n    type: nats\n"
      "    servers: nats://127.0.0.1:4222\n    subject: \"{{ x }}\"\n    username: u\n"
      "    token: t\nroutes:\n  - {topicPattern: \"**\", destination: n}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("destinations.n.subject: unknown placeholder '{{ x }}'"),
                    HasSubstr("destinations.n.password: required when username is set"),
                    HasSubstr("destinations.n.token: use either token")));
}

// A token reaches the server; a wrong token delivers nothing and never shows in a log line, an
// outcome's error or the health status. A private nats-server of this test (`--auth`): the
// shared one has no credentials.
TEST(NatsDestinationCredentialsTest, TokenPublishesAndAWrongTokenIsNeverShown) {
  testing::TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  testing::ChildProcess server(testing::PrivateNatsServer::NatsServerPath(),
                               {"-a", "127.0.0.1", "-p", std::to_string(port), "-js", "-sd",
                                dir.File("js"), "--auth", "right-token-5172"},
                               {}, dir.File("nats.log"));
  const std::string plain = "nats://127.0.0.1:" + std::to_string(port);
  const std::string with_token = "nats://right-token-5172@127.0.0.1:" + std::to_string(port);
  ASSERT_TRUE(testing::WaitUntil([&] {
    natsConnection* probe = nullptr;
    bool up = natsConnection_ConnectTo(&probe, with_token.c_str()) == NATS_OK;
    natsConnection_Destroy(probe);
    return up;
  })) << server.Log();
  StreamFixture stream(with_token, "TOKEN", "token");
  testing::LogCapture logs;
  auto settings = [&](const std::string& token) {
    NatsDestinationSettings s;
    s.name = "nats";
    s.servers = plain;
    s.subject = "token.{{ topic }}";
    s.timeout_ms = 2000;
    s.token = token;
    return s;
  };
  Result<std::unique_ptr<NatsDestination>> right =
      NatsDestination::Create(settings("right-token-5172"));
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  ASSERT_TRUE((*right)->Start().ok());
  std::vector<Outcome> out = PublishAll(**right, {BrokerRow("tok-1", "a", "k", "{}")});
  ASSERT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(stream.Count(), 1u);
  EXPECT_TRUE((*right)->Health().ok());

  Result<std::unique_ptr<NatsDestination>> wrong =
      NatsDestination::Create(settings("wrong-token-9931"));
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  // Refused credentials do not stop the start: the destination keeps connecting in the
  // background and says why it is down (the server's answer) where it reports. nats.c sometimes
  // sees the socket close before it reads the server's -ERR, hence the wait for the answer.
  // Under ThreadSanitizer nats.c missed the -ERR on every attempt of a 20 s wait (5 runs of 5)
  // and knows only "No server available": there, either reason is what can be said.
  const auto says_why = [](const std::string& m) {
#if defined(__SANITIZE_THREAD__)
    if (m.find("No server available") != std::string::npos) return true;
#endif
    return m.find("the server refused the credentials") != std::string::npos;
  };
  ASSERT_TRUE((*wrong)->Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return says_why((*wrong)->Health().message()); }))
      << (*wrong)->Health().ToString();
  out = PublishAll(**wrong, {BrokerRow("tok-2", "a", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kUnavailable) << out[0].error;
  EXPECT_TRUE(says_why(out[0].error)) << out[0].error;
  EXPECT_THAT(out[0].error, ::testing::Not(HasSubstr("token-")));
  EXPECT_THAT((*wrong)->Health().message(), ::testing::Not(HasSubstr("token-")));
  EXPECT_EQ(logs.Count({"cannot connect yet"}), 1) << "one WARN per outage: " << logs.All();
  EXPECT_EQ(stream.Count(), 1u);
  EXPECT_EQ(logs.Count({"token-"}), 0) << logs.All();
  (*right)->Stop();
  (*wrong)->Stop();
}

// Credentials in the servers URL (nats://user:password@host) never show, however long: a
// password of 64 hex characters (`openssl rand -hex 32`) is past the 64 characters after "//"
// within which the generic redaction looks for the '@' of a URL's userinfo. Found by the review
// of 44a7a2a: the outcome error, the health status and the WARN showed it.
TEST(NatsDestinationCredentialsTest, ALongPasswordInTheServersUrlIsNeverShown) {
  testing::TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  const std::string right(64, 'a');
  const std::string wrong = "f00d" + std::string(60, '7');
  testing::ChildProcess server(
      testing::PrivateNatsServer::NatsServerPath(),
      {"-a", "127.0.0.1", "-p", std::to_string(port), "--user", "qbuser", "--pass", right}, {},
      dir.File("nats.log"));
  const std::string good = "nats://qbuser:" + right + "@127.0.0.1:" + std::to_string(port);
  ASSERT_TRUE(testing::WaitUntil([&] {
    natsConnection* probe = nullptr;
    bool up = natsConnection_ConnectTo(&probe, good.c_str()) == NATS_OK;
    natsConnection_Destroy(probe);
    return up;
  })) << server.Log();
  testing::LogCapture logs;
  NatsDestinationSettings s;
  s.name = "nats";
  s.servers = "nats://qbuser:" + wrong + "@127.0.0.1:" + std::to_string(port);
  s.subject = "cred.{{ topic }}";
  s.timeout_ms = 2000;
  s.jet_stream = false;
  Result<std::unique_ptr<NatsDestination>> d = NatsDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE((*d)->Start().ok());
  // A refused attempt has been seen: nats.c reports it as refused credentials or, when the
  // server closed the socket before its -ERR was read, as "No server available".
  ASSERT_TRUE(testing::WaitUntil([&] {
    const std::string m = (*d)->Health().message();
    return m.find("the server refused the credentials") != std::string::npos ||
           m.find("No server available") != std::string::npos;
  })) << (*d)->Health().ToString();
  std::vector<Outcome> out = PublishAll(**d, {BrokerRow("cred-1", "a", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kUnavailable) << out[0].error;
  EXPECT_THAT(out[0].error, ::testing::Not(HasSubstr("f00d")));
  EXPECT_THAT((*d)->Health().message(), ::testing::Not(HasSubstr("f00d")));
  EXPECT_EQ(logs.Count({"f00d"}), 0) << logs.All();
  (*d)->Stop();
}

// A second outage logs its WARN even when no batch ran while the connection was up: the server
// is down at the start (WARN), comes up (connected, the relay idle), then comes back refusing
// the token, so nats.c closes the connection and the next batch makes a new one. Found by the
// review of 44a7a2a: "once per outage" was reset only by a batch that saw the connection up.
TEST(NatsDestinationCredentialsTest, ASecondOutageLogsAgainAfterAnIdleConnection) {
  testing::TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  testing::LogCapture logs;
  NatsDestinationSettings s;
  s.name = "nats";
  s.servers = "nats://127.0.0.1:" + std::to_string(port);
  s.subject = "outage.{{ topic }}";
  s.timeout_ms = 2000;
  s.jet_stream = false;
  s.token = "wrong-token-4410";
  Result<std::unique_ptr<NatsDestination>> d = NatsDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE((*d)->Start().ok());
  EXPECT_EQ(logs.Count({"cannot connect yet"}), 1) << logs.All();
  {
    // No auth: the token is not checked.
    testing::ChildProcess no_auth(testing::PrivateNatsServer::NatsServerPath(),
                                  {"-a", "127.0.0.1", "-p", std::to_string(port)}, {},
                                  dir.File("open.log"));
    ASSERT_TRUE(testing::WaitUntil([&] { return (*d)->Health().ok(); }))
        << (*d)->Health().ToString() << no_auth.Log();
  }
  testing::ChildProcess refusing(
      testing::PrivateNatsServer::NatsServerPath(),
      {"-a", "127.0.0.1", "-p", std::to_string(port), "--auth", "right-token-4410"}, {},
      dir.File("refusing.log"));
  // nats.c closes the connection the server refused twice (before that it is disconnected,
  // then reconnecting, and a batch would find the old connection).
  ASSERT_TRUE(testing::WaitUntil([&] {
    return (*d)->Health().message().find("(closed;") != std::string::npos;
  })) << (*d)->Health().ToString()
      << refusing.Log();
  std::vector<Outcome> out = PublishAll(**d, {BrokerRow("out-1", "a", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kUnavailable) << out[0].error;
  EXPECT_EQ(logs.Count({"cannot connect yet"}), 2) << logs.All();
  (*d)->Stop();
}

TEST_F(NatsConfigTest, ValidBlockLoadsAndBuilds) {
  Result<Config> c = Load(
      "database:\n  url: /tmp/qb-nats.db\ndestinations:\n  n:\n    type: nats\n"
      "    servers: nats://127.0.0.1:4222\n    subject: \"events.{{ topic }}\"\n"
      "routes:\n  - {topicPattern: \"**\", destination: n}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const DestinationConfig& dc = c->destinations.at("n");
  EXPECT_EQ(dc.options.value("jetStream", false), true);
  EXPECT_EQ(dc.options.value("timeoutMs", 0), 30000);
  Result<std::unique_ptr<Destination>> d =
      FindDestinationType("nats")->create(dc, DestinationContext{});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->type(), "nats");
}

}  // namespace
}  // namespace queuebox
#else
#include <gtest/gtest.h>

#include "testing/source_dir.h"
TEST(BrokerDestination, NotBuilt) { GTEST_SKIP() << "QB_WITH_NATS is off"; }
#endif  // QB_WITH_NATS
