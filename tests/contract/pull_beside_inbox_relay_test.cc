// Pull rows belong to the pull workers alone (issue 14 item 4, reference §4.7): the inbox relay
// (core/inbox_relay.h) never claims, reclaims, forwards or dead-letters a row of a `pull` source,
// and a relay and a pull worker (queuebox/inbox/pull_worker.h) on one database each take only
// their own rows. SQLite and PostgreSQL, the inbox from the bundled migrations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/inbox_relay.h"
#include "queuebox/inbox/database.h"
#include "queuebox/inbox/pull_worker.h"
#include "store_test_support.h"
#include "testing/join_on_exit.h"

namespace queuebox {
namespace {

using ::testing::IsEmpty;
using testing::StoreDb;
using Kind = InboxStoreOutcome::Kind;

class PullBesideInboxRelayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    auto report = store_->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    inbox_ = store_->inbox();
    ASSERT_NE(inbox_, nullptr);
  }

  std::unique_ptr<InboxRelay> MakeRelay() {
    InboxRelayOptions o;
    o.relay.batch_size = 50;
    o.relay.claim_timeout_ms = 60000;
    o.max_attempts = 7;
    o.topic_templates["stripe"] = "{{ source }}.{{ eventType }}";
    auto relay = InboxRelay::Create(o, inbox_, inbox_, nullptr);
    EXPECT_TRUE(relay.ok()) << relay.status().ToString();
    return relay.ok() ? std::move(relay).value() : nullptr;
  }

  std::string Add(const std::string& source, const std::string& key,
                  std::optional<std::string> aggregate, InboxConsumption consumption) {
    NewInboxMessage m;
    m.source = source;
    m.idempotency_key = key;
    m.aggregate_id = std::move(aggregate);
    m.event_type = "payment.succeeded";
    m.payload = R"({"key":")" + key + R"("})";
    m.consumption = consumption;
    auto out = inbox_->Store(std::span<const NewInboxMessage>(&m, 1));
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok() || out->size() != 1 || (*out)[0].kind != Kind::kStored) return "";
    return (*out)[0].id;
  }

  // Every column of the pull rows, as text, in id order.
  std::vector<std::vector<std::string>> PullRows() {
    return db_->Query("SELECT * FROM inbox WHERE consumption = 'pull' ORDER BY id");
  }

  // The x-inbox-id header of every outbox row.
  std::set<std::string> ForwardedInboxIds() {
    std::set<std::string> ids;
    for (const auto& row : db_->Query("SELECT headers FROM outbox")) {
      ids.insert(nlohmann::json::parse(row[0]).value("x-inbox-id", ""));
    }
    return ids;
  }

  // The pull client's connections to the same database.
  std::shared_ptr<inbox::ConnectionFactory> PullConnections() {
    const std::string& url = db_->config().url;
    if (db_->pg()) return inbox::PostgresConnections(url);
    return inbox::SqliteConnections(url.substr(std::string("sqlite:").size()));
  }

  std::unique_ptr<StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  InboxStore* inbox_ = nullptr;
};

TEST_P(PullBesideInboxRelayTest, TheInboxRelayNeverTouchesPullRows) {
  // Pull rows in every state the relay could mistake for its own: due and pending, sharing an
  // aggregate with push rows, in flight under a live lease, and in flight under an expired lease
  // (a crashed pull worker's row, which only a pull claim may take over).
  Add("orders", "pull-due", std::nullopt, InboxConsumption::kPull);
  Add("orders", "pull-shared-aggregate", "cus_1", InboxConsumption::kPull);
  const std::string live = Add("orders", "pull-live", "cus_2", InboxConsumption::kPull);
  const std::string expired = Add("orders", "pull-expired", "cus_3", InboxConsumption::kPull);
  db_->Exec("UPDATE inbox SET state = 'processing', claim_token = '" +
            std::string("6f1c1a52-3b7e-4d8e-9a6b-2f0e3c4d5a6b") + "', claimed_at = " + db_->Now() +
            ", lease_expires_at = " + db_->NowPlus(600) + " WHERE id = '" + live + "'");
  db_->Exec("UPDATE inbox SET state = 'processing', claim_token = '" +
            std::string("7a2d2b63-4c8f-4e9f-8b7c-3a1f4d5e6b7c") +
            "', claimed_at = " + db_->NowPlus(-7200) +
            ", lease_expires_at = " + db_->NowPlus(-3600) + " WHERE id = '" + expired + "'");
  std::set<std::string> push;
  push.insert(Add("stripe", "push-1", "cus_1", InboxConsumption::kPush));
  push.insert(Add("stripe", "push-2", "cus_2", InboxConsumption::kPush));
  push.insert(Add("stripe", "push-3", "cus_3", InboxConsumption::kPush));
  push.insert(Add("stripe", "push-4", std::nullopt, InboxConsumption::kPush));
  const auto before = PullRows();
  ASSERT_EQ(before.size(), 4u);

  auto relay = MakeRelay();
  ASSERT_NE(relay, nullptr);
  int64_t forwarded = 0;
  for (int i = 0; i < 100; ++i) {
    auto n = relay->RunCycle();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (*n == 0) break;
    forwarded += *n;
  }
  auto reclaimed = inbox_->ReclaimExpired();  // the relay's reclaim, run once more by hand
  ASSERT_TRUE(reclaimed.ok()) << reclaimed.status().ToString();

  EXPECT_EQ(forwarded, 4);
  EXPECT_EQ(ForwardedInboxIds(), push);
  EXPECT_EQ(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE consumption = 'push' AND state = "
                        "'processed'"),
            "4");
  EXPECT_EQ(PullRows(), before) << "the relay changed a pull row";
}

TEST_P(PullBesideInboxRelayTest, ARelayAndAPullWorkerOnOneDatabaseEachTakeOnlyTheirOwnRows) {
  constexpr int kRows = 40;
  std::set<std::string> push, pull;
  for (int i = 0; i < kRows; ++i) {
    const std::string aggregate = "agg-" + std::to_string(i % 5);  // both kinds share aggregates
    pull.insert(Add("orders", "pull-" + std::to_string(i), aggregate, InboxConsumption::kPull));
    push.insert(Add("stripe", "push-" + std::to_string(i), aggregate, InboxConsumption::kPush));
  }

  std::mutex mu;
  std::vector<std::string> handled;
  inbox::PullOptions options;
  options.source = "orders";
  options.batch_size = 8;
  options.max_concurrency = 4;
  options.poll_interval_ms = 10;
  auto worker = inbox::PullWorker::Create(
      PullConnections(), options,
      [&](const inbox::Message& m, inbox::Transaction&, const inbox::HandlerContext&) {
        std::lock_guard lock(mu);
        handled.push_back(m.id);
        return Status::Ok();
      });
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  Status run_status;
  std::thread worker_thread([&] { run_status = (*worker)->Run(); });
  queuebox::testing::JoinOnExit join_worker(worker_thread, [&] { (*worker)->Stop(); });

  auto relay = MakeRelay();
  ASSERT_NE(relay, nullptr);
  int64_t forwarded = 0;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < limit) {
    auto n = relay->RunCycle();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    forwarded += *n;
    if ((*worker)->stats().completed >= kRows && *n == 0) break;
    if (*n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (*worker)->Stop();
  worker_thread.join();
  ASSERT_TRUE(run_status.ok()) << run_status.ToString();

  EXPECT_EQ(forwarded, kRows);
  EXPECT_EQ(ForwardedInboxIds(), push);
  std::set<std::string> handled_set(handled.begin(), handled.end());
  EXPECT_EQ(handled.size(), handled_set.size()) << "a pull row was handled twice";
  EXPECT_EQ(handled_set, pull);
  EXPECT_EQ(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE state = 'processed'"),
            std::to_string(2 * kRows));
  EXPECT_THAT(db_->Query("SELECT id FROM inbox WHERE state <> 'processed'"), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Dialects, PullBesideInboxRelayTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
