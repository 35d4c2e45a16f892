// Key affinity on PostgreSQL (ReplicaMembership::EnableKeyAffinity / Heartbeat / LeaveReplicaSet,
// docs/operations.md "Replicas"): replicas register in queuebox_relay_replicas and each claims
// only its share of the keys, so two replicas never claim rows of the same key while both are
// live; a replica that leaves or stops heartbeating hands its keys over, and per-key order still
// holds across the hand-over (the head check, not the share, decides what is claimable).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "store_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::IsEmpty;
using testing::StatusIs;

constexpr int64_t kLease = 60000;

class PostgresKeyAffinityTest : public testing::MigratedPgStoreTest {
 protected:
  void SetUp() override {
    testing::MigratedPgStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    other_ = db_->Open();
    ASSERT_NE(other_, nullptr);
  }

  // Both stores join; after the second round each sees two live replicas.
  void JoinBoth(int64_t ttl_a = kLease, int64_t ttl_b = kLease) {
    Replicas(*store_).EnableKeyAffinity(ttl_a, "a");
    Replicas(*other_).EnableKeyAffinity(ttl_b, "b");
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(Replicas(*store_).Heartbeat().ok());
      ASSERT_TRUE(Replicas(*other_).Heartbeat().ok());
    }
  }

  // The store's replica set (never null on PostgreSQL).
  static ReplicaMembership& Replicas(OutboxStore& s) {
    ReplicaMembership* replicas = s.replica_membership();
    EXPECT_NE(replicas, nullptr);
    return *replicas;
  }

  static KeyShare Share(OutboxStore& s) {
    auto share = Replicas(s).Heartbeat();
    EXPECT_TRUE(share.ok()) << share.status().ToString();
    return share.ok() ? *share : KeyShare{-1, -1};
  }

  // The share a row belongs to among `count` replicas, computed by the database.
  int ShareOf(const OutboxRow& r, int count) {
    const std::string key = r.key.has_value() && !r.key->empty() ? *r.key : r.id;
    return std::stoi(db_->Scalar("SELECT mod(hashtext('" + key + "') & 2147483647, " +
                                 std::to_string(count) + ")"));
  }

  std::vector<OutboxRow> Claim(OutboxStore& s, int limit) {
    auto rows = s.Claim(limit, kLease);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? std::move(rows).value() : std::vector<OutboxRow>{};
  }

  static void Send(OutboxStore& s, const std::vector<OutboxRow>& rows) {
    std::vector<Fence> fences;
    for (const OutboxRow& r : rows) fences.push_back({r.id, r.claim_token});
    auto sent = s.MarkSent(fences);
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    ASSERT_EQ(sent->size(), rows.size());
  }

  std::unique_ptr<OutboxStore> other_;
};

TEST_F(PostgresKeyAffinityTest, OffByDefaultEveryKeyAndNoReplicaRow) {
  EXPECT_EQ(Share(*store_), (KeyShare{1, 0}));
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || n, '{}' "
      "FROM generate_series(1, 20) AS n");
  EXPECT_EQ(Claim(*store_, 100).size(), 20u);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM queuebox_relay_replicas"), "0");
}

TEST_F(PostgresKeyAffinityTest, TwoReplicasDrainDisjointSharesOfTheKeys) {
  JoinBoth();
  const KeyShare a = Share(*store_), b = Share(*other_);
  EXPECT_EQ(a.count, 2);
  EXPECT_EQ(b.count, 2);
  EXPECT_EQ(std::set<int>({a.index, b.index}), (std::set<int>{0, 1}));
  EXPECT_EQ(db_->Scalar("SELECT string_agg(name, ',' ORDER BY name) FROM queuebox_relay_replicas"),
            "a,b");
  // 40 keys x 5 rows, interleaved, plus 10 unkeyed rows.
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || (n % 40), '{}' "
      "FROM generate_series(0, 199) AS n");
  db_->Exec("INSERT INTO outbox (topic, payload) SELECT 't', '{}' FROM generate_series(1, 10)");

  std::map<std::string, int> claims_per_id;
  std::map<std::string, std::set<int>> owners_per_key;  // key -> which store claimed it
  for (int round = 0; round < 40; ++round) {
    for (int who = 0; who < 2; ++who) {
      OutboxStore& s = who == 0 ? *store_ : *other_;
      const int index = who == 0 ? a.index : b.index;
      std::vector<OutboxRow> rows = Claim(s, 10);
      for (const OutboxRow& r : rows) {
        ++claims_per_id[r.id];
        EXPECT_EQ(ShareOf(r, 2), index) << "row " << r.id << " key " << r.key.value_or("<none>");
        if (r.key.has_value()) owners_per_key[*r.key].insert(who);
      }
      Send(s, rows);
    }
  }
  EXPECT_EQ(claims_per_id.size(), 210u) << "every row claimed";
  for (const auto& [id, n] : claims_per_id) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(owners_per_key.size(), 40u);
  std::set<int> owners_seen;
  for (const auto& [key, owners] : owners_per_key) {
    EXPECT_EQ(owners.size(), 1u) << key << " was claimed by both replicas";
    owners_seen.insert(owners.begin(), owners.end());
  }
  EXPECT_EQ(owners_seen, (std::set<int>{0, 1})) << "both replicas got keys";
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'"), "0");
}

// Each replica's window is full of one hot key's rows, so its claims find the other heads by
// the key walk: still only its share's keys, each row once, each key in sequence order.
TEST_F(PostgresKeyAffinityTest, TheKeyWalkTakesOnlyTheShareInKeyOrder) {
  JoinBoth();
  const KeyShare a = Share(*store_), b = Share(*other_);
  ASSERT_EQ(a.count, 2);
  ASSERT_EQ(b.count, 2);
  // One hot key per share, 60 rows each, ahead of 60 other keys x 3 rows.
  std::map<int, std::string> hot;  // share -> key
  for (int n = 0; hot.size() < 2; ++n) {
    const std::string key = "hot" + std::to_string(n);
    hot.emplace(std::stoi(db_->Scalar("SELECT mod(hashtext('" + key + "') & 2147483647, 2)")), key);
  }
  for (const auto& [share, key] : hot) {
    db_->Exec("INSERT INTO outbox (topic, key, payload) SELECT 't', '" + key +
              "', '{}' FROM generate_series(1, 60)");
  }
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || (n % 60), '{}' "
      "FROM generate_series(0, 179) AS n");

  std::map<std::string, int> claims_per_id;
  std::map<std::string, int64_t> last_sequence;         // key -> highest claimed
  std::map<std::string, std::set<int>> owners_per_key;  // key -> which store claimed it
  size_t first_claim_size[2] = {0, 0};
  for (int round = 0; round < 80; ++round) {
    for (int who = 0; who < 2; ++who) {
      OutboxStore& s = who == 0 ? *store_ : *other_;
      const int index = who == 0 ? a.index : b.index;
      std::vector<OutboxRow> rows = Claim(s, 10);
      if (round == 0) first_claim_size[who] = rows.size();
      for (const OutboxRow& r : rows) {
        ++claims_per_id[r.id];
        EXPECT_EQ(ShareOf(r, 2), index) << "row " << r.id << " key " << *r.key;
        EXPECT_GT(r.sequence, last_sequence[*r.key]) << *r.key << " out of order";
        last_sequence[*r.key] = r.sequence;
        owners_per_key[*r.key].insert(who);
      }
      Send(s, rows);
    }
  }
  // The window (20 rows) holds only the hot key's rows: full claims came from the walk.
  EXPECT_EQ(first_claim_size[0], 10u);
  EXPECT_EQ(first_claim_size[1], 10u);
  EXPECT_EQ(claims_per_id.size(), 300u) << "every row claimed";
  for (const auto& [id, n] : claims_per_id) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(owners_per_key.size(), 62u);
  for (const auto& [key, owners] : owners_per_key) {
    EXPECT_EQ(owners.size(), 1u) << key << " was claimed by both replicas";
  }
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'"), "0");
}

TEST_F(PostgresKeyAffinityTest, ALeavingReplicaHandsOverItsKeysInKeyOrder) {
  JoinBoth();
  const KeyShare a = Share(*store_);
  ASSERT_EQ(a.count, 2);
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || (n % 20), '{}' "
      "FROM generate_series(0, 59) AS n");
  // A claims the heads of its keys and keeps them in flight.
  std::vector<OutboxRow> held = Claim(*store_, 100);
  ASSERT_FALSE(held.empty());
  std::set<std::string> held_keys;
  for (const OutboxRow& r : held) held_keys.insert(*r.key);

  Replicas(*store_).LeaveReplicaSet();
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM queuebox_relay_replicas"), "1");
  EXPECT_EQ(Share(*other_), (KeyShare{1, 0}));
  // B now claims every key, but none of the keys A still has in flight.
  std::vector<OutboxRow> b_rows = Claim(*other_, 100);
  std::set<std::string> b_keys;
  for (const OutboxRow& r : b_rows) b_keys.insert(*r.key);
  EXPECT_EQ(b_keys.size() + held_keys.size(), 20u);
  for (const std::string& k : held_keys) EXPECT_EQ(b_keys.count(k), 0u) << k;
  // Once A's rows are sent, B takes those keys' next rows.
  Send(*store_, held);
  std::vector<OutboxRow> next = Claim(*other_, 100);
  std::set<std::string> next_keys;
  for (const OutboxRow& r : next) next_keys.insert(*r.key);
  for (const std::string& k : held_keys) EXPECT_EQ(next_keys.count(k), 1u) << k;
}

TEST_F(PostgresKeyAffinityTest, AReplicaThatStopsHeartbeatingDropsOutAfterItsTtl) {
  // 2 s: the count of 2 is read before A's heartbeat expires even in a slow sanitizer run.
  JoinBoth(/*ttl_a=*/2000, /*ttl_b=*/kLease);
  EXPECT_EQ(Share(*other_).count, 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Share(*other_) != KeyShare{1, 0} && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Share(*other_), (KeyShare{1, 0}));
  // Its row stays until it has been expired for a minute, then a heartbeat deletes it.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM queuebox_relay_replicas"), "2");
  db_->Exec(
      "UPDATE queuebox_relay_replicas SET expires_at = clock_timestamp() - interval '2 minutes' "
      "WHERE name = 'a'");
  EXPECT_EQ(Share(*other_), (KeyShare{1, 0}));
  EXPECT_EQ(db_->Scalar("SELECT string_agg(name, ',') FROM queuebox_relay_replicas"), "b");
  // A heartbeat brings it back.
  EXPECT_EQ(Share(*store_).count, 2);
}

TEST_F(PostgresKeyAffinityTest, RelaysOfAnotherOutboxTableAreNotCounted) {
  db_->Exec("CREATE TABLE billing_outbox (LIKE outbox INCLUDING ALL)");
  DatabaseConfig billing = db_->config();
  billing.outbox_table = "billing_outbox";
  auto opened = OpenStore(billing);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<OutboxStore> billing_store = std::move(opened).value();
  Replicas(*billing_store).EnableKeyAffinity(kLease, "billing");
  JoinBoth();
  ASSERT_TRUE(Replicas(*billing_store).Heartbeat().ok());
  EXPECT_EQ(Share(*store_).count, 2);
  EXPECT_EQ(Share(*other_).count, 2);
  EXPECT_EQ(Share(*billing_store), (KeyShare{1, 0}));
  db_->Exec(
      "INSERT INTO billing_outbox (topic, key, payload) SELECT 't', 'k' || n, '{}' "
      "FROM generate_series(1, 30) AS n");
  EXPECT_EQ(Claim(*billing_store, 100).size(), 30u) << "the only billing relay takes every key";
}

// A replica whose claims fail (here a column mapping that names no column) never heartbeats, so
// it takes no share from the replicas that work.
TEST_F(PostgresKeyAffinityTest, AReplicaWhoseClaimsFailDoesNotJoin) {
  DatabaseConfig broken = db_->config();
  broken.columns.topic = "no_such_column";
  auto opened = OpenStore(broken);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<OutboxStore> broken_store = std::move(opened).value();
  Replicas(*broken_store).EnableKeyAffinity(kLease, "broken");
  Replicas(*store_).EnableKeyAffinity(kLease, "a");
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'k', '{}')");
  EXPECT_THAT(broken_store->Claim(10, kLease),
              StatusIs(StatusCode::kInternal,
                       "PostgreSQL: column o.no_such_column does not exist (SQLSTATE 42703)"));
  EXPECT_EQ(Claim(*store_, 10).size(), 1u);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(name, ',') FROM queuebox_relay_replicas"), "a");
  EXPECT_EQ(Share(*store_), (KeyShare{1, 0}));
}

TEST_F(PostgresKeyAffinityTest, WithoutTheReplicaTableClaimsTakeEveryKey) {
  db_->Exec("DROP TABLE queuebox_relay_replicas");
  Replicas(*store_).EnableKeyAffinity(kLease, "a");
  auto share = Replicas(*store_).Heartbeat();
  EXPECT_THAT(share, StatusIs(StatusCode::kInternal,
                              "PostgreSQL: relation \"queuebox_relay_replicas\" does not exist "
                              "(SQLSTATE 42P01)"));
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || n, '{}' "
      "FROM generate_series(1, 30) AS n");
  EXPECT_EQ(Claim(*store_, 100).size(), 30u);
  Replicas(*store_).LeaveReplicaSet();  // nothing joined: no statement, no crash
  EXPECT_THAT(Claim(*store_, 100), IsEmpty());
}

}  // namespace
}  // namespace queuebox
