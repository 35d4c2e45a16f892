// The capture state: QueueBox's fingerprint and lock key, the state directory's files, and every
// verdict of the start-up check (QueueBox reference Appendix A).
#include "store/postgres/capture/capture_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/postgres/capture/pg_capture.h"

namespace queuebox::store::capture {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

FingerprintInput ExampleInput() {
  // examples/cdc of QueueBox: jdbc:postgresql://postgres:5432/queuebox, default names.
  return {"postgres", "5432", "queuebox", "public", "outbox", "queuebox_outbox", "queuebox_outbox"};
}

TEST(CaptureFingerprintTest, IsQueueBoxsSha256OverTheSettingsThatGiveAPositionItsMeaning) {
  // SHA-256 of the eight lines QueueBox hashes (computed independently of this code).
  EXPECT_EQ(CaptureFingerprint(ExampleInput()),
            "93de023bd3dd52c12cef7ac7785a04108ea696d0944618c642ace31c75e00092");
}

TEST(CaptureFingerprintTest, EverySettingChangesItAndNoSecretIsPartOfIt) {
  const std::string base = CaptureFingerprint(ExampleInput());
  for (int field = 0; field < 7; ++field) {
    FingerprintInput in = ExampleInput();
    std::string* f[] = {&in.host,  &in.port, &in.database,   &in.schema,
                        &in.table, &in.slot, &in.publication};
    *f[field] += "x";
    EXPECT_NE(CaptureFingerprint(in), base) << field;
  }
  // The input has no user or password field: a new password keeps the fingerprint.
  static_assert(sizeof(FingerprintInput) == 7 * sizeof(std::string));
}

TEST(CaptureLockKeyTest, IsJavasStringHashCodeOfTheResourceName) {
  // "queuebox_capture_queuebox".hashCode() and "queuebox_capture_capture_test".hashCode().
  EXPECT_EQ(CaptureLockKey("queuebox"), 1245868664);
  EXPECT_EQ(CaptureLockKey("capture_test"), 1038018121);
  EXPECT_NE(CaptureLockKey("a"), CaptureLockKey("b"));
}

class StateDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qbcap.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(StateDirectoryTest, MissingFilesReadAsAbsentAndWritesCreateTheDirectory) {
  StateDirectory dir(root_ + "/nested/capture");
  auto id = dir.ReadIdentity();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, std::nullopt);
  auto offsets = dir.ReadOffsets();
  ASSERT_TRUE(offsets.ok());
  EXPECT_FALSE(offsets->present);

  ASSERT_TRUE(dir.WriteIdentity("0b5a6c1e-0000-4000-8000-000000000001").ok());
  ASSERT_TRUE(dir.WriteOffsets((Lsn{1} << 32) | 0x2A).ok());
  EXPECT_EQ(*dir.ReadIdentity(), "0b5a6c1e-0000-4000-8000-000000000001");
  offsets = dir.ReadOffsets();
  ASSERT_TRUE(offsets.ok());
  EXPECT_TRUE(offsets->present);
  EXPECT_EQ(offsets->lsn, (Lsn{1} << 32) | 0x2A);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/nested/capture/offsets.dat.tmp"));
  std::ifstream in(root_ + "/nested/capture/offsets.dat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("lsn=1/2A\n"));
}

TEST_F(StateDirectoryTest, AForeignOffsetsFileIsPresentWithoutAPosition) {
  std::ofstream(root_ + "/offsets.dat") << std::string("\xac\xed\x00\x05sr\x00", 8);
  auto offsets = StateDirectory(root_).ReadOffsets();
  ASSERT_TRUE(offsets.ok());
  EXPECT_TRUE(offsets->present);
  EXPECT_EQ(offsets->lsn, std::nullopt);
}

TEST_F(StateDirectoryTest, AnUnreadableFileIsUnavailableNamingIt) {
  std::filesystem::create_directory(root_ + "/identity");  // read() fails with EISDIR, even as root
  auto id = StateDirectory(root_).ReadIdentity();
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(id.status().message(), HasSubstr(root_ + "/identity"));
}

TEST(DecideStateTest, EveryVerdict) {
  const std::string fp = "f1";
  const RegistryRow row{"id-1", fp};
  auto decide = [&](std::optional<RegistryRow> r, std::optional<std::string> id, bool offsets,
                    std::string fingerprint = "f1") {
    return DecideState(r, id, offsets, fingerprint, "queuebox", "/var/lib/queuebox/capture");
  };
  EXPECT_EQ(decide(std::nullopt, std::nullopt, false).verdict, StateVerdict::kCreate);
  EXPECT_EQ(decide(row, "id-1", true).verdict, StateVerdict::kResume);

  auto changed = decide(row, "id-1", true, "f2");
  EXPECT_EQ(changed.verdict, StateVerdict::kRecover);
  EXPECT_THAT(changed.reason, HasSubstr("settings changed"));

  auto no_files = decide(row, std::nullopt, false);
  EXPECT_EQ(no_files.verdict, StateVerdict::kRecover);
  EXPECT_THAT(no_files.reason, HasSubstr("missing"));
  EXPECT_THAT(no_files.reason, HasSubstr("/var/lib/queuebox/capture"));
  auto no_offsets = decide(row, "id-1", false);
  EXPECT_EQ(no_offsets.verdict, StateVerdict::kRecover);
  EXPECT_THAT(no_offsets.reason, HasSubstr("no offsets.dat file"));

  auto foreign = decide(row, "id-2", true);
  EXPECT_EQ(foreign.verdict, StateVerdict::kRecover);
  EXPECT_THAT(foreign.reason, HasSubstr("belong to another instance"));
  EXPECT_THAT(foreign.reason, HasSubstr("id-2"));

  auto orphan = decide(std::nullopt, "id-1", true);
  EXPECT_EQ(orphan.verdict, StateVerdict::kRecover);
  EXPECT_THAT(orphan.reason, HasSubstr("without a registry row"));
  EXPECT_EQ(decide(std::nullopt, std::nullopt, true).verdict, StateVerdict::kRecover);
}

TEST(ResolveCaptureTargetTest, TakesTheUrlsTargetThenTheOverrides) {
  PgSettings s;
  s.url = "postgresql://app:secret@db.internal:5433/shop?sslmode=disable";
  auto t = ResolveCaptureTarget(s);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->host, "db.internal");
  EXPECT_EQ(t->port, "5433");
  EXPECT_EQ(t->database, "shop");

  s.url = "host=10.0.0.1 dbname=shop";
  t = ResolveCaptureTarget(s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->port, "5432");

  s.host = "replica.internal";
  s.port = "6432";
  s.dbname = "shop_replica";
  t = ResolveCaptureTarget(s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "replica.internal");
  EXPECT_EQ(t->port, "6432");
  EXPECT_EQ(t->database, "shop_replica");
}

TEST(ResolveCaptureTargetTest, RefusesSeveralHostsAndMissingParts) {
  PgSettings s;
  s.url = "postgresql://app@a.internal,b.internal/shop";
  EXPECT_THAT(ResolveCaptureTarget(s).status().message(),
              HasSubstr("outbox.capture.connection.hostname"));
  s.host = "a.internal";
  EXPECT_TRUE(ResolveCaptureTarget(s).ok());

  PgSettings no_db;
  no_db.url = "postgresql://app@db.internal";
  EXPECT_THAT(ResolveCaptureTarget(no_db).status().message(), HasSubstr("a host and a database"));

  PgSettings bad;
  bad.url = "postgresql://app:s3cret@db.internal:notaport/shop?bogus=1";
  auto r = ResolveCaptureTarget(bad);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace queuebox::store::capture
