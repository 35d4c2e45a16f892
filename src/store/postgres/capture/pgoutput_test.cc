// The replication frames and pgoutput messages of change capture, built byte by byte as the
// PostgreSQL docs describe them ("Streaming Replication Protocol", "Logical Replication Message
// Formats"): only inserts into the outbox table wake, once per transaction; the confirmed position
// follows commits and keepalives outside transactions.
#include "store/postgres/capture/pgoutput.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace queuebox::store::capture {
namespace {

using ::testing::HasSubstr;

void Put(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string XLog(Lsn start, const std::string& message) {
  std::string f = "w";
  Put(f, start, 8);
  Put(f, start + 100, 8);  // the server's WAL end
  Put(f, 0, 8);            // send time
  return f + message;
}

std::string Keep(Lsn wal_end, bool reply) {
  std::string f = "k";
  Put(f, wal_end, 8);
  Put(f, 0, 8);
  f.push_back(reply ? 1 : 0);
  return f;
}

std::string Begin(Lsn final_lsn, uint32_t xid) {
  std::string m = "B";
  Put(m, final_lsn, 8);
  Put(m, 0, 8);
  Put(m, xid, 4);
  return m;
}

std::string Commit(Lsn commit_lsn, Lsn end_lsn) {
  std::string m = "C";
  m.push_back(0);
  Put(m, commit_lsn, 8);
  Put(m, end_lsn, 8);
  Put(m, 0, 8);
  return m;
}

std::string Relation(uint32_t relid, const std::string& ns, const std::string& name) {
  std::string m = "R";
  Put(m, relid, 4);
  m += ns;
  m.push_back('\0');
  m += name;
  m.push_back('\0');
  m.push_back('d');  // replica identity
  Put(m, 1, 2);      // one column
  m.push_back(1);    // part of the key
  m += "id";
  m.push_back('\0');
  Put(m, 2950, 4);  // uuid
  Put(m, 0xffffffff, 4);
  return m;
}

// A change with one text column ('t', length, bytes).
std::string Change(char kind, uint32_t relid) {
  std::string m(1, kind);
  Put(m, relid, 4);
  if (kind == 'U' || kind == 'D') m.push_back('K');
  if (kind != 'D') {
    if (kind == 'U') {
      Put(m, 1, 2);
      m.push_back('n');
    }
    m.push_back('N');
  }
  Put(m, 1, 2);
  m.push_back('t');
  Put(m, 2, 4);
  m += "ab";
  return m;
}

TEST(LsnTest, FormatsAndParsesLikePgLsn) {
  EXPECT_EQ(FormatLsn(0), "0/0");
  EXPECT_EQ(FormatLsn((Lsn{0x16} << 32) | 0xB374D848), "16/B374D848");
  EXPECT_EQ(ParseLsn("16/B374D848"), (Lsn{0x16} << 32) | 0xB374D848);
  EXPECT_EQ(ParseLsn("0/1a"), Lsn{0x1a});
  EXPECT_EQ(ParseLsn("16B374D848"), std::nullopt);
  EXPECT_EQ(ParseLsn("/1"), std::nullopt);
  EXPECT_EQ(ParseLsn("1/"), std::nullopt);
  EXPECT_EQ(ParseLsn("1/123456789"), std::nullopt);
  EXPECT_EQ(ParseLsn("g/1"), std::nullopt);
}

TEST(CopyFrameTest, ReadsXLogDataAndKeepalive) {
  // XLogData::data points into the frame, so the frame must outlive it.
  const std::string frame = XLog(0x100, "B...");
  auto w = ParseCopyFrame(frame);
  ASSERT_TRUE(w.ok());
  const auto& x = std::get<XLogData>(*w);
  EXPECT_EQ(x.start, 0x100u);
  EXPECT_EQ(x.wal_end, 0x164u);
  EXPECT_EQ(x.data, "B...");
  auto k = ParseCopyFrame(Keep(0x200, true));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(std::get<Keepalive>(*k).wal_end, 0x200u);
  EXPECT_TRUE(std::get<Keepalive>(*k).reply_requested);
}

TEST(CopyFrameTest, RefusesTruncatedAndUnknownFrames) {
  EXPECT_EQ(ParseCopyFrame("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseCopyFrame("w1234").status().message(), HasSubstr("truncated XLogData"));
  EXPECT_THAT(ParseCopyFrame("k12").status().message(), HasSubstr("truncated keepalive"));
  EXPECT_THAT(ParseCopyFrame("x").status().message(), HasSubstr("unknown type"));
}

TEST(CopyFrameTest, StandbyStatusUpdateHasTheProtocolLayout) {
  std::string m = StandbyStatusUpdate(0x0102030405060708, 0x1122, true);
  ASSERT_EQ(m.size(), 34u);
  EXPECT_EQ(m[0], 'r');
  for (int field = 0; field < 3; ++field) {  // written, flushed, applied
    EXPECT_EQ(m.substr(1 + 8 * field, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  }
  EXPECT_EQ(m.substr(25, 8), std::string("\0\0\0\0\0\0\x11\x22", 8));
  EXPECT_EQ(m[33], 1);
}

TEST(CopyFrameTest, PgEpochIsTheYear2000) {
  auto t = std::chrono::system_clock::time_point(std::chrono::seconds(946684800));
  EXPECT_EQ(PgEpochMicros(t), 0);
  EXPECT_EQ(PgEpochMicros(t + std::chrono::milliseconds(1500)), 1500000);
}

TEST(PgOutputDecoderTest, TellsOutboxChangesFromOtherTables) {
  PgOutputDecoder d("public", "outbox");
  EXPECT_EQ(d.Decode(Relation(7, "public", "outbox")).kind, ChangeKind::kRelation);
  EXPECT_EQ(d.Decode(Relation(8, "public", "orders")).kind, ChangeKind::kRelation);
  EXPECT_EQ(d.Decode(Relation(9, "other", "outbox")).kind, ChangeKind::kRelation);
  Decoded ins = d.Decode(Change('I', 7));
  EXPECT_EQ(ins.kind, ChangeKind::kInsert);
  EXPECT_TRUE(ins.outbox);
  EXPECT_FALSE(d.Decode(Change('I', 8)).outbox);
  EXPECT_FALSE(d.Decode(Change('I', 9)).outbox);  // same name, another schema
  Decoded upd = d.Decode(Change('U', 7));
  EXPECT_EQ(upd.kind, ChangeKind::kUpdate);
  EXPECT_TRUE(upd.outbox);
  EXPECT_EQ(d.Decode(Change('D', 7)).kind, ChangeKind::kDelete);
  Decoded c = d.Decode(Commit(0x500, 0x528));
  EXPECT_EQ(c.kind, ChangeKind::kCommit);
  EXPECT_EQ(c.commit_end, 0x528u);
  EXPECT_EQ(d.Decode("T").kind, ChangeKind::kTruncate);
  EXPECT_EQ(d.Decode("Oxyz").kind, ChangeKind::kOther);
}

TEST(PgOutputDecoderTest, UnknownRelationsAndMessagesAreUnreadable) {
  PgOutputDecoder d("public", "outbox");
  EXPECT_EQ(d.Decode(Change('I', 42)).kind, ChangeKind::kUnreadable);  // never described
  EXPECT_EQ(d.Decode("").kind, ChangeKind::kUnreadable);
  EXPECT_EQ(d.Decode("Z").kind, ChangeKind::kUnreadable);
  EXPECT_EQ(d.Decode("I\x01").kind, ChangeKind::kUnreadable);
  EXPECT_EQ(d.Decode(std::string("R\0\0\0\x07public", 11)).kind, ChangeKind::kUnreadable);
  EXPECT_EQ(d.Decode("C\x00\x01").kind, ChangeKind::kUnreadable);
}

class StreamTrackerTest : public ::testing::Test {
 protected:
  StreamTracker::Step Feed(const std::string& frame) {
    auto step = tracker_.OnFrame(frame);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    return step.ok() ? *step : StreamTracker::Step{};
  }
  // One transaction of `changes` (messages) from `at`; returns whether any frame woke.
  int Transaction(Lsn at, const std::vector<std::string>& changes) {
    int wakes = Feed(XLog(at, Begin(at + 0x80, 1))).wake ? 1 : 0;
    for (const auto& c : changes) wakes += Feed(XLog(at + 8, c)).wake ? 1 : 0;
    wakes += Feed(XLog(at + 0x60, Commit(at + 0x60, at + 0x80))).wake ? 1 : 0;
    return wakes;
  }
  StreamTracker tracker_{"public", "outbox", 0x10};
};

TEST_F(StreamTrackerTest, OneWakePerTransactionThatInsertsIntoTheOutbox) {
  Feed(XLog(0x20, Relation(7, "public", "outbox")));
  Feed(XLog(0x20, Relation(8, "public", "orders")));
  EXPECT_EQ(Transaction(0x100, {Change('I', 8), Change('I', 7), Change('I', 7)}), 1);
  EXPECT_EQ(tracker_.counts().outbox_inserts, 2);
  EXPECT_EQ(tracker_.counts().other_changes, 1);
  EXPECT_EQ(Transaction(0x200, {Change('I', 7)}), 1);
  EXPECT_EQ(tracker_.counts().wakes, 2);
  EXPECT_EQ(tracker_.counts().commits, 2);
}

TEST_F(StreamTrackerTest, UpdatesDeletesTruncatesAndOtherTablesNeverWake) {
  Feed(XLog(0x20, Relation(7, "public", "outbox")));
  Feed(XLog(0x20, Relation(8, "public", "orders")));
  EXPECT_EQ(Transaction(0x100, {Change('U', 7), Change('D', 7), "T", Change('I', 8)}), 0);
  EXPECT_EQ(tracker_.counts().outbox_updates, 1);
  EXPECT_EQ(tracker_.counts().outbox_deletes, 1);
  EXPECT_EQ(tracker_.counts().wakes, 0);
}

TEST_F(StreamTrackerTest, AnUnreadableMessageWakes) {
  EXPECT_EQ(Transaction(0x100, {Change('I', 99)}), 1);  // a relation never described
  EXPECT_EQ(tracker_.counts().unreadable, 1);
}

TEST_F(StreamTrackerTest, ConfirmsCommitsAndKeepalivesOutsideTransactionsOnly) {
  EXPECT_EQ(tracker_.confirmed(), 0x10u);
  Transaction(0x100, {});
  EXPECT_EQ(tracker_.confirmed(), 0x180u);  // the commit's end
  EXPECT_FALSE(Feed(Keep(0x300, false)).reply);
  EXPECT_EQ(tracker_.confirmed(), 0x300u);  // nothing open: everything before it was sent
  Feed(XLog(0x400, Begin(0x480, 2)));
  EXPECT_TRUE(Feed(Keep(0x500, true)).reply);
  EXPECT_EQ(tracker_.confirmed(), 0x300u);  // a transaction is open: its commit comes later
  EXPECT_EQ(tracker_.received(), 0x500u);
  Feed(XLog(0x460, Commit(0x460, 0x480)));
  EXPECT_EQ(tracker_.confirmed(), 0x480u);
  Feed(Keep(0x200, false));  // never backwards
  EXPECT_EQ(tracker_.confirmed(), 0x480u);
}

TEST_F(StreamTrackerTest, ABadFrameIsAnError) {
  EXPECT_EQ(tracker_.OnFrame("q").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace queuebox::store::capture
