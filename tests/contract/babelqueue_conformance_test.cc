// babelqueue_conformance_test.cc: the public BabelQueue conformance suite, driven by the vendored
// manifest (tests/conformance/babelqueue/manifest.json; origin in ORIGIN.md). Runs every envelope
// case, the idempotency dedup key and sequences (in-memory and PostgreSQL seen-sets), and the
// broker bindings of the transports QueueBox ships (Kafka headers, AMQP properties + headers).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <openssl/evp.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "babelqueue/bindings.h"
#include "babelqueue/envelope.h"
#include "babelqueue/idempotency.h"
#include "babelqueue/postgres.h"
#include "testing/env.h"
#include "testing/pg.h"
#include "testing/status_matchers.h"
#include "testing/source_dir.h"

namespace babelqueue {
namespace {

using ::queuebox::testing::StatusIs;

const std::string kSuiteDir = std::string(QUEUEBOX_SOURCE_DIR) + "/tests/conformance/babelqueue";

std::string ReadFile(const std::string& relative) {
  std::ifstream in(kSuiteDir + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << kSuiteDir << "/" << relative;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Json& Manifest() {
  static const Json manifest = Json::parse(ReadFile("manifest.json"));
  return manifest;
}

Envelope DecodeFixture(const std::string& file) {
  Result<Envelope> env = Decode(ReadFile(file));
  EXPECT_TRUE(env.ok()) << file << ": " << env.status().message();
  return env.ok() ? *env : Envelope{};
}

// Canonical text with object keys sorted: equal values compare equal regardless of key order,
// while 1 and 1.0 stay different (the suite says integers and floats round-trip identically).
std::string Canonical(const Json& value) {
  const Json sorted = Json::parse(nlohmann::json::parse(value.dump()).dump());
  Result<std::string> text = EncodeJson(sorted);
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? *text : std::string();
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

TEST(ConformanceSuite, VendoredFilesMatchOrigin) {
  // ORIGIN.md lists "<sha256>  <path>" lines; every one must match the file beside it.
  std::istringstream origin(ReadFile("ORIGIN.md"));
  std::string line;
  int checked = 0;
  while (std::getline(origin, line)) {
    if (line.size() < 67 || line[64] != ' ' || line.find_first_not_of("0123456789abcdef") != 64) {
      continue;
    }
    const std::string path = line.substr(66);
    EXPECT_EQ(Sha256Hex(ReadFile(path)), line.substr(0, 64)) << path << " drifted from ORIGIN.md";
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(ConformanceSuite, ManifestShape) {
  EXPECT_EQ(Manifest().at("schema_version"), 1);
  EXPECT_GE(Manifest().at("cases").size(), 6u);
}

TEST(ConformanceSuite, EnvelopeCases) {
  int valid = 0, invalid = 0;
  for (const Json& c : Manifest().at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE("case " + name);
    const std::string bytes = ReadFile(c.at("file"));
    if (!c.at("valid").get<bool>()) {
      Status verdict = Accepts(std::string_view(bytes));
      // What each invalid fixture is rejected with.
      static const std::map<std::string, std::string> kRejections = {
          {"invalid-unknown-schema-version",
           "unsupported_schema_version: meta.schema_version 2 is not a version this SDK supports "
           "(1)"},
          {"invalid-missing-urn", "missing_urn: no 'job' or 'urn'; the message has no identity"},
      };
      const auto expected = kRejections.find(name);
      if (expected == kRejections.end()) {
        ADD_FAILURE() << "no expected rejection for this invalid case; add it to kRejections";
      } else {
        EXPECT_THAT(verdict, StatusIs(StatusCode::kInvalidArgument, expected->second))
            << "must be rejected: " << c.at("reason");
      }
      ++invalid;
      continue;
    }
    Result<Envelope> env = Decode(bytes);
    ASSERT_TRUE(env.ok()) << env.status().message();
    Status verdict = Accepts(*env);
    EXPECT_TRUE(verdict.ok()) << verdict.message();
    const Json& expect = c.at("expect");
    EXPECT_EQ(env->job, expect.at("urn").get<std::string>());
    EXPECT_EQ(env->attempts, expect.at("attempts").get<int64_t>());
    EXPECT_EQ(env->meta.lang, expect.at("lang").get<std::string>());
    EXPECT_EQ(env->meta.schema_version, expect.at("schema_version").get<int64_t>());
    EXPECT_EQ(Canonical(env->data), Canonical(expect.at("data")));
    EXPECT_FALSE(env->trace_id.empty());
    EXPECT_FALSE(env->meta.id.empty());
    EXPECT_NE(env->meta.created_at, 0);
    if (expect.contains("dead_letter")) {
      ASSERT_TRUE(env->dead_letter.has_value());
      Result<std::string> block_text = Encode(*env);
      ASSERT_TRUE(block_text.ok());
      const Json block = Json::parse(*block_text).at("dead_letter");
      for (const auto& [key, value] : expect.at("dead_letter").items()) {
        EXPECT_EQ(Canonical(block.at(key)), Canonical(value)) << "dead_letter." << key;
      }
    }
    // The canonical bytes are stable: encode, decode, encode again gives the same bytes.
    Result<std::string> once = Encode(*env);
    ASSERT_TRUE(once.ok()) << once.status().message();
    Result<Envelope> again = Decode(*once);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*Encode(*again), *once);
    ++valid;
  }
  EXPECT_EQ(valid, 4);
  EXPECT_EQ(invalid, 2);
}

TEST(ConformanceSuite, IdempotencyDedupKeyIsMetaIdVerbatim) {
  const Json& key = Manifest().at("idempotency").at("dedup_key");
  ASSERT_EQ(key.at("key_field"), "meta.id");
  const Envelope env = DecodeFixture(key.at("envelope_file"));
  EXPECT_EQ(env.meta.id, key.at("expected_key").get<std::string>());
  EXPECT_NE(env.meta.id, env.trace_id);

  // The wrapper keys on exactly that id: a second delivery with the same meta.id but another
  // trace_id is skipped; the same trace_id with a new meta.id runs.
  InMemorySeenStore store;
  int runs = 0;
  Handler handler = Wrap(
      [&](const Envelope&) {
        ++runs;
        return Status::Ok();
      },
      store);
  ASSERT_TRUE(handler(env).ok());
  Envelope other_trace = env;
  other_trace.trace_id = "another-trace";
  ASSERT_TRUE(handler(other_trace).ok());
  EXPECT_EQ(runs, 1);
  Envelope other_id = env;
  other_id.meta.id = "another-id";
  ASSERT_TRUE(handler(other_id).ok());
  EXPECT_EQ(runs, 2);
}

// Replays every manifest sequence; `new_store` gives a fresh, empty seen-set per case.
void RunIdempotencySequences(const std::function<std::unique_ptr<SeenStore>()>& new_store) {
  const Json& cases = Manifest().at("idempotency").at("sequences").at("cases");
  ASSERT_GE(cases.size(), 6u);
  for (const Json& c : cases) {
    SCOPED_TRACE("sequence " + c.at("name").get<std::string>());
    std::unique_ptr<SeenStore> store = new_store();
    ASSERT_NE(store, nullptr);
    int invocations = 0;
    bool fail_next = false;
    Handler handler = Wrap(
        [&](const Envelope&) {
          ++invocations;
          return fail_next ? Status(StatusCode::kInternal, "handler threw") : Status::Ok();
        },
        *store);
    int index = 0;
    for (const Json& d : c.at("deliveries")) {
      SCOPED_TRACE("delivery " + std::to_string(index++));
      Envelope env = DecodeFixture("fixtures/order-created.json");
      env.meta.id = d.at("meta_id").get<std::string>();
      if (d.value("forget_before", false)) {
        ASSERT_TRUE(store->Forget(env.meta.id).ok());
      }
      fail_next = d.value("outcome", "ok") == "throw";
      const int before = invocations;
      Status result = handler(env);
      const bool ran = invocations > before;
      EXPECT_EQ(ran ? "run" : "skip", d.at("expect_effect").get<std::string>());
      if (ran && fail_next) {
        EXPECT_THAT(result, StatusIs(StatusCode::kInternal, "handler threw"))
            << "a throwing handler's error must reach the runtime";
      } else {
        EXPECT_TRUE(result.ok()) << result.message();
      }
    }
    // Every handler invocation counts (reference §8.7: 2 throws + 1 ok = 3 in
    // throw-leaves-id-unmarked).
    EXPECT_EQ(invocations, c.at("expected_effects").get<int>());
  }
}

TEST(ConformanceSuite, IdempotencySequencesInMemory) {
  RunIdempotencySequences([] { return std::make_unique<InMemorySeenStore>(); });
}

TEST(ConformanceSuite, IdempotencySequencesPostgres) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  queuebox::testing::TempPgDatabase db(url);
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(db.url().c_str()), &PQfinish);
  ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
  ASSERT_TRUE(CreatePostgresSeenSchema(conn.get()).ok());
  RunIdempotencySequences([&]() -> std::unique_ptr<SeenStore> {
    db.Exec("TRUNCATE babelqueue_idempotency");
    Result<std::unique_ptr<PostgresSeenStore>> store = PostgresSeenStore::Create(conn.get());
    EXPECT_TRUE(store.ok()) << store.status().message();
    return store.ok() ? std::move(*store) : nullptr;
  });
}

TEST(ConformanceSuite, KafkaHeaderProjection) {
  const Json& block = Manifest().at("kafka").at("property_projection");
  const Envelope env = DecodeFixture(block.at("envelope_file"));
  const KafkaProjection projection = ProjectKafka(env);
  std::map<std::string, std::string> got(projection.headers.begin(), projection.headers.end());
  EXPECT_EQ(got.size(), projection.headers.size()) << "duplicate header names";
  std::map<std::string, std::string> want;
  for (const auto& [name, value] : block.at("headers").items()) want[name] = value;
  EXPECT_EQ(got, want);
  EXPECT_EQ(projection.timestamp_ms, env.meta.created_at);
}

TEST(ConformanceSuite, KafkaAttemptsReconciliation) {
  for (const Json& c : Manifest().at("kafka").at("attempts_reconciliation").at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::optional<std::string> header;
    if (!c.at("header_attempts").is_null()) header = c.at("header_attempts").dump();
    EXPECT_EQ(ReconcileKafkaAttempts(c.at("body_attempts").get<int64_t>(), header),
              c.at("expected_attempts").get<int64_t>());
  }
  EXPECT_EQ(ReconcileKafkaAttempts(3, std::string("not-a-number")), 3);
}

TEST(ConformanceSuite, RabbitMqPropertyProjection) {
  const Json& block = Manifest().at("rabbitmq").at("property_projection");
  const AmqpProjection p = ProjectAmqp(DecodeFixture(block.at("envelope_file")));
  const Json& props = block.at("properties");
  EXPECT_EQ(p.type, props.at("type").get<std::string>());
  EXPECT_EQ(p.correlation_id, props.at("correlation_id").get<std::string>());
  EXPECT_EQ(p.message_id, props.at("message_id").get<std::string>());
  EXPECT_EQ(p.app_id, props.at("app_id").get<std::string>());
  EXPECT_EQ(p.content_type, props.at("content_type").get<std::string>());
  EXPECT_EQ(props.size(), 5u);
  // Natively typed headers: integers stay integers (Canonical keeps 0 and "0" apart).
  EXPECT_EQ(Canonical(p.headers), Canonical(block.at("headers")));
  EXPECT_TRUE(p.headers.at("x-attempts").is_number_integer());
}

}  // namespace
}  // namespace babelqueue
