// outbox.ordering: strict on PostgreSQL (OutboxStore::EnableStrictOrdering, docs/claim.md "Strict
// order"): a keyed row is never claimed while a transaction that may still commit a lower
// sequence of its key is open. T1 inserts m1 and stays open, T2 inserts m2 of the same key and
// commits: m2 waits until T1 ends; T1 commits: m1, then m2; T1 rolls back: m2 at once. An open
// transaction holds back only the rows it could precede, and Stats() names it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <set>

#include "store_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::StatusIs;

constexpr int64_t kStrictLease = 60000;

// A producer's transaction on its own connection, left open until Commit or Rollback.
class OpenProducer {
 public:
  explicit OpenProducer(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
    Exec("BEGIN");
  }
  ~OpenProducer() { PQfinish(conn_); }
  OpenProducer(const OpenProducer&) = delete;
  OpenProducer& operator=(const OpenProducer&) = delete;

  // Inserts a row of `key` with payload {"m": "<name>"} and returns its id.
  std::string Insert(const std::string& key, const std::string& name) {
    PGresult* r = PQexec(conn_, ("INSERT INTO outbox (topic, key, payload) VALUES ('t', '" + key +
                                 "', '{\"m\": \"" + name + "\"}') RETURNING id")
                                    .c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(conn_);
    std::string id = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return id;
  }
  void Exec(const char* sql) {
    PGresult* r = PQexec(conn_, sql);
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(conn_);
    PQclear(r);
  }
  int pid() const { return PQbackendPID(conn_); }

 private:
  PGconn* conn_;
};

class PostgresStrictOrderTest : public testing::MigratedPgStoreTest {
 protected:
  void SetUp() override {
    testing::MigratedPgStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(store_->EnableStrictOrdering().ok());
  }

  // A committed row of `key` (NULL when empty) named `name`; returns its id.
  std::string Commit(const std::string& key, const std::string& name) {
    const std::string k = key.empty() ? "NULL" : "'" + key + "'";
    return db_->Scalar("INSERT INTO outbox (topic, key, payload) VALUES ('t', " + k +
                       ", '{\"m\": \"" + name + "\"}') RETURNING id");
  }

  static std::vector<std::string> ClaimIds(OutboxStore& s) {
    auto rows = s.Claim(100, kStrictLease);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<std::string> ids;
    if (rows.ok()) {
      for (const OutboxRow& r : *rows) ids.push_back(r.id);
    }
    return ids;
  }

  void SendAll(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      db_->Exec("UPDATE outbox SET state = 'sent' WHERE id = '" + id + "'");
    }
  }
};

TEST_F(PostgresStrictOrderTest, TheLaterRowWaitsForTheOpenLowerSequenceThenBothGoInOrder) {
  OpenProducer t1(db_->config().url);
  const std::string m1 = t1.Insert("k", "m1");
  const std::string m2 = Commit("k", "m2");
  EXPECT_THAT(ClaimIds(*store_), IsEmpty());
  EXPECT_THAT(ClaimIds(*store_), IsEmpty());
  t1.Exec("COMMIT");
  EXPECT_THAT(ClaimIds(*store_), ElementsAre(m1));
  SendAll({m1});
  EXPECT_THAT(ClaimIds(*store_), ElementsAre(m2));
}

TEST_F(PostgresStrictOrderTest, ARolledBackTransactionReleasesTheKeyAtOnce) {
  OpenProducer t1(db_->config().url);
  t1.Insert("k", "m1");
  const std::string m2 = Commit("k", "m2");
  EXPECT_THAT(ClaimIds(*store_), IsEmpty());
  t1.Exec("ROLLBACK");
  EXPECT_THAT(ClaimIds(*store_), ElementsAre(m2));
}

// The rows committed before T1 took its sequence, of any key, and unkeyed rows go while T1 is
// open; a keyed row committed after it waits (T1's row may be of its key: its key is invisible).
TEST_F(PostgresStrictOrderTest, AnOpenTransactionHoldsBackOnlyTheRowsItCouldPrecede) {
  const std::string before = Commit("j", "before");
  EXPECT_THAT(ClaimIds(*store_), ElementsAre(before));  // a reading before T1 began
  OpenProducer t1(db_->config().url);
  const std::string m1 = t1.Insert("k", "m1");
  const std::string other_key = Commit("j", "after");
  const std::string unkeyed = Commit("", "unkeyed");
  EXPECT_THAT(ClaimIds(*store_), ElementsAre(unkeyed));
  SendAll({before, unkeyed});
  EXPECT_THAT(ClaimIds(*store_), IsEmpty());
  t1.Exec("COMMIT");
  EXPECT_THAT(ClaimIds(*store_), ::testing::UnorderedElementsAre(m1, other_key));
}

TEST_F(PostgresStrictOrderTest, StatsNameTheOldestOpenTransactionHoldingRowsBack) {
  auto none = store_->Stats();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->strict_blocker.has_value());
  OpenProducer t1(db_->config().url);
  t1.Insert("k", "m1");
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_TRUE(stats->strict_blocker.has_value());
  EXPECT_EQ(stats->strict_blocker->pid, t1.pid());
  ASSERT_TRUE(stats->strict_blocker->age_seconds.has_value());
  EXPECT_GE(*stats->strict_blocker->age_seconds, 0.0);
  t1.Exec("COMMIT");
  auto after = store_->Stats();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->strict_blocker.has_value());
}

// Two replicas under key affinity: neither claims m2 while T1 is open, whoever holds the key.
TEST_F(PostgresStrictOrderTest, TwoReplicasNeitherClaimsPastTheOpenLowerSequence) {
  std::unique_ptr<OutboxStore> other = db_->Open();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->EnableStrictOrdering().ok());
  store_->replica_membership()->EnableKeyAffinity(kStrictLease, "a");
  other->replica_membership()->EnableKeyAffinity(kStrictLease, "b");
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(store_->replica_membership()->Heartbeat().ok());
    ASSERT_TRUE(other->replica_membership()->Heartbeat().ok());
  }
  OpenProducer t1(db_->config().url);
  const std::string m1 = t1.Insert("k", "m1");
  const std::string m2 = Commit("k", "m2");
  EXPECT_THAT(ClaimIds(*store_), IsEmpty());
  EXPECT_THAT(ClaimIds(*other), IsEmpty());
  t1.Exec("COMMIT");
  std::vector<std::string> first = ClaimIds(*store_);
  for (const std::string& id : ClaimIds(*other)) first.push_back(id);
  EXPECT_THAT(first, ElementsAre(m1));
  SendAll({m1});
  std::vector<std::string> second = ClaimIds(*store_);
  for (const std::string& id : ClaimIds(*other)) second.push_back(id);
  EXPECT_THAT(second, ElementsAre(m2));
}

TEST_F(PostgresStrictOrderTest, ASequenceThatCachesValuesIsRefusedNamingTheFix) {
  db_->Exec("ALTER SEQUENCE outbox_sequence_seq CACHE 20");
  std::unique_ptr<OutboxStore> cached = db_->Open();
  ASSERT_NE(cached, nullptr);
  EXPECT_THAT(cached->EnableStrictOrdering(),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::HasSubstr("CACHE 1")));
}

}  // namespace
}  // namespace queuebox
