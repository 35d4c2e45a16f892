// The HTTP surface against a real store (SQLite always, PostgreSQL with QB_TEST_PG_URL): every
// route's status and body, the management-port split, each admin auth type, 413 before auth,
// every replay filter, and readiness (QueueBox reference §5.4, §13.1-13.3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>

#include "auth/request_auth.h"
#include "integration/admin_test_support.h"

namespace queuebox::testing {
namespace {

using nlohmann::json;

class BrokerDestination : public Destination {
 public:
  BrokerDestination(std::string name, std::string type)
      : name_(std::move(name)), type_(std::move(type)) {}
  const std::string& name() const override { return name_; }
  std::string_view type() const override { return type_; }
  Status Start() override { return Status::Ok(); }
  void PublishBatch(std::span<const OutboundMessage>, OutcomeSink&) override {}
  Status Health() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !block_; });
    return up_ ? Status::Ok() : Unavailable("down");
  }
  void SetUp(bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    up_ = up;
  }
  void Block(bool block) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      block_ = block;
    }
    cv_.notify_all();
  }

 private:
  std::string name_, type_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool up_ = true, block_ = false;
};

using AdminServerTest = AdminStoreTest;

TEST_P(AdminServerTest, RootLiveAndUnknownRoutes) {
  StartServer();
  auto cli = Data();
  auto root = cli.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->body, "QueueBox is running!");
  auto live = cli.Get("/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(Json(live),
            json::parse(R"({"status":"healthy","components":{"process":{"status":"up"}}})"));
  EXPECT_EQ(cli.Get("/nope")->status, 404);
  // admin.enabled is false: the admin routes do not exist.
  EXPECT_EQ(cli.Post("/admin/replay", R"({"topic":"a"})", "application/json")->status, 404);
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
}

TEST_P(AdminServerTest, ReadinessListsComponentsAndTurnsUnhealthy) {
  std::atomic<bool> poller{true};
  BrokerDestination rabbit("events", "rabbitmq");
  BrokerDestination web("web", "http");
  StopsServer stop_first{this};
  AdminServerDeps deps;
  deps.components = {{"outbox-poller", [&] { return poller.load(); }},
                     {"retention-service", [] { return true; }}};
  for (HealthComponent& h : BrokerDestinationHealth({&rabbit, &web})) deps.components.push_back(h);
  deps.health_timeout = std::chrono::milliseconds(500);
  StartServer(std::move(deps));
  auto cli = Data();
  auto ready = cli.Get("/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(Json(ready), json::parse(R"({"status":"healthy","components":{
      "database":{"status":"up"},"outbox-poller":{"status":"up"},
      "retention-service":{"status":"up"},"rabbitmq.events":{"status":"up"}}})"));

  rabbit.SetUp(false);
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(Json(health)["status"], "unhealthy");
  EXPECT_EQ(Json(health)["components"]["rabbitmq.events"]["status"], "down");
  EXPECT_EQ(Json(health)["components"]["database"]["status"], "up");

  // A check that does not answer within its bound counts as down.
  rabbit.SetUp(true);
  rabbit.Block(true);
  auto slow = cli.Get("/health/ready");
  rabbit.Block(false);
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->status, 503);
  EXPECT_EQ(Json(slow)["components"]["rabbitmq.events"]["status"], "down");

  poller = false;
  auto stalled = cli.Get("/health/ready");
  ASSERT_TRUE(stalled);
  EXPECT_EQ(stalled->status, 503);
  EXPECT_EQ(Json(stalled)["components"]["outbox-poller"]["status"], "down");
}

TEST_P(AdminServerTest, TheCaptureComponentIsShownButNeverDecidesReadiness) {
  std::atomic<bool> capture{true};
  StopsServer stop_first{this};
  AdminServerDeps deps;
  deps.components = {{"outbox-poller", [] { return true; }},
                     {"outbox-capture", [&] { return capture.load(); }, /*advisory=*/true}};
  deps.health_timeout = std::chrono::milliseconds(500);
  StartServer(std::move(deps));
  auto cli = Data();
  auto ready = cli.Get("/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(Json(ready), json::parse(R"({"status":"healthy","components":{
      "database":{"status":"up"},"outbox-poller":{"status":"up"},
      "outbox-capture":{"status":"up"}}})"));
  capture = false;  // capture is down: delivery goes on by SQL, so the instance stays ready
  auto down = cli.Get("/health/ready");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 200);
  EXPECT_EQ(Json(down)["status"], "healthy");
  EXPECT_EQ(Json(down)["components"]["outbox-capture"]["status"], "down");
}

// inbox-relay (shown when the relay runs) decides readiness like the outbox poller: a relay whose
// cycles fail or stall makes /health/ready answer 503.
TEST_P(AdminServerTest, TheInboxRelayComponentDecidesReadiness) {
  std::atomic<bool> relay{true};
  StopsServer stop_first{this};
  AdminServerDeps deps;
  deps.components = {{"outbox-poller", [] { return true; }},
                     {"inbox-relay", [&] { return relay.load(); }}};
  deps.health_timeout = std::chrono::milliseconds(500);
  StartServer(std::move(deps));
  auto cli = Data();
  auto ready = cli.Get("/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(Json(ready), json::parse(R"({"status":"healthy","components":{
      "database":{"status":"up"},"outbox-poller":{"status":"up"},
      "inbox-relay":{"status":"up"}}})"));
  relay = false;
  auto down = cli.Get("/health/ready");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(Json(down)["status"], "unhealthy");
  EXPECT_EQ(Json(down)["components"]["inbox-relay"]["status"], "down");
  EXPECT_EQ(Json(down)["components"]["database"]["status"], "up");
  relay = true;
  auto back = cli.Get("/health/ready");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200);
}

TEST_P(AdminServerTest, ManagementPortTakesHealthMetricsAndAdmin) {
  config_.server.management_port = 0;
  config_.admin.enabled = true;
  config_.admin.insecure = true;
  AdminServerDeps deps;
  deps.components = {{"outbox-poller", nullptr}};
  StartServer(std::move(deps));
  ASSERT_TRUE(server_->management_port().has_value());
  EXPECT_NE(*server_->management_port(), server_->data_port());
  auto data = Data();
  auto mgmt = Management();
  EXPECT_EQ(data.Get("/")->status, 200);
  for (const char* path : {"/health/live", "/health/ready", "/health", "/metrics"}) {
    EXPECT_EQ(data.Get(path)->status, 404) << path;
    EXPECT_EQ(mgmt.Get(path)->status,
              path == std::string("/health/ready") || path == std::string("/health")
                  ? 503  // no poller callback: outbox-poller is down
                  : 200)
        << path;
  }
  EXPECT_EQ(data.Post("/admin/replay", R"({"topic":"a"})", "application/json")->status, 404);
  auto replay = mgmt.Post("/admin/replay", R"({"topic":"a"})", "application/json");
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->status, 200);
  EXPECT_EQ(Json(replay), json::parse(R"({"moved":0})"));
}

TEST_P(AdminServerTest, DrainingAnswers503) {
  StartServer();
  auto cli = Data();
  EXPECT_EQ(cli.Get("/")->status, 200);
  server_->StartDraining();
  auto r = cli.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(Json(r), json::parse(R"({"error":"QueueBox is shutting down"})"));
  EXPECT_EQ(server_->Stop(std::chrono::milliseconds(1000)), 0);
}

TEST_P(AdminServerTest, BearerAuth) {
  config_.admin.enabled = true;
  config_.admin.auth = AdminAuthConfig{"bearer", {{"token", "t0ken"}}};
  StartServer();
  auto cli = Data();
  const std::string body = R"({"topic":"x"})";
  auto missing = cli.Post("/admin/replay", body, "application/json");
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(Json(missing), json::parse(R"({"error":"Missing Authorization header"})"));
  auto wrong =
      cli.Post("/admin/replay", {{"Authorization", "Bearer t0ke"}}, body, "application/json");
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(Json(wrong), json::parse(R"({"error":"Invalid bearer token"})"));
  auto ok =
      cli.Post("/admin/replay", {{"Authorization", "Bearer t0ken"}}, body, "application/json");
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Json(ok), json::parse(R"({"moved":0})"));
  // The value is read whole: cpp-httplib decodes %00 in a header value to a NUL, which used to end
  // the value there, so the right token followed by junk passed.
  auto junk = cli.Post("/admin/replay", {{"Authorization", "Bearer t0ken%00junk"}}, body,
                       "application/json");
  EXPECT_EQ(junk->status, 401);
  EXPECT_EQ(Json(junk), json::parse(R"({"error":"Invalid bearer token"})"));
}

TEST_P(AdminServerTest, ApiKeyAuth) {
  config_.admin.enabled = true;
  config_.admin.auth = AdminAuthConfig{"api-key", {{"key", "k-1"}}};
  StartServer();
  auto cli = Data();
  const std::string body = R"({"topic":"x"})";
  auto missing = cli.Post("/admin/replay", body, "application/json");
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(Json(missing), json::parse(R"({"error":"Missing X-API-Key header"})"));
  auto wrong = cli.Post("/admin/replay", {{"X-API-Key", "k-2"}}, body, "application/json");
  EXPECT_EQ(Json(wrong), json::parse(R"({"error":"Invalid API key"})"));
  EXPECT_EQ(cli.Post("/admin/replay", {{"X-API-Key", "k-1"}}, body, "application/json")->status,
            200);
}

TEST_P(AdminServerTest, HmacAuth) {
  config_.admin.enabled = true;
  config_.admin.auth = AdminAuthConfig{
      "hmac",
      {{"secret", "whsec"}, {"timestampHeader", "X-Timestamp"}, {"timestampTolerance", 60000}}};
  const int64_t now = 1'700'000'000'000;
  AdminServerDeps deps;
  deps.now_ms = [now] { return now; };
  StartServer(std::move(deps));
  auto cli = Data();
  const std::string body = R"({"topic":"x"})";
  auto sign = [&](int64_t ts) {
    return "sha256=" + *HmacHex("HmacSHA256", "whsec", std::to_string(ts) + "." + body);
  };
  auto post = [&](httplib::Headers h) {
    return cli.Post("/admin/replay", h, body, "application/json");
  };
  EXPECT_EQ(Json(post({})), json::parse(R"({"error":"Missing X-Signature header"})"));
  EXPECT_EQ(Json(post({{"X-Signature", sign(now)}})),
            json::parse(R"({"error":"Missing timestamp header"})"));
  EXPECT_EQ(Json(post({{"X-Signature", sign(now)}, {"X-Timestamp", "soon"}})),
            json::parse(R"({"error":"Invalid timestamp format"})"));
  auto stale =
      post({{"X-Signature", sign(now - 120000)}, {"X-Timestamp", std::to_string(now - 120000)}});
  EXPECT_EQ(stale->status, 401);
  EXPECT_EQ(Json(stale), json::parse(R"({"error":"Request timestamp expired"})"));
  auto bad = post({{"X-Signature", sign(now - 1)}, {"X-Timestamp", std::to_string(now)}});
  EXPECT_EQ(Json(bad), json::parse(R"({"error":"Invalid signature"})"));
  auto good = post({{"X-Signature", sign(now - 5)}, {"X-Timestamp", std::to_string(now - 5)}});
  EXPECT_EQ(good->status, 200);
  EXPECT_EQ(Json(good), json::parse(R"({"moved":0})"));
}

TEST_P(AdminServerTest, OversizedBodyIs413BeforeAuth) {
  config_.admin.enabled = true;
  config_.admin.max_payload_bytes = 64;
  config_.admin.auth = AdminAuthConfig{"bearer", {{"token", "t0ken"}}};
  StartServer();
  auto cli = Data();
  std::string big = R"({"topic":")" + std::string(100, 'a') + R"("})";
  auto declared = cli.Post("/admin/replay", big, "application/json");
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->status, 413);
  EXPECT_EQ(Json(declared), json::parse(R"({"error":"Request body exceeds 64 bytes"})"));
  // Chunked (no Content-Length): counted while reading.
  httplib::Client chunked_cli("127.0.0.1", server_->data_port());
  auto chunked = chunked_cli.Post(
      "/admin/replay",
      [&](size_t offset, httplib::DataSink& sink) {
        if (offset < big.size()) {
          sink.write(big.data() + offset, std::min<size_t>(16, big.size() - offset));
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  // The server answers 413 as soon as the count passes the cap and closes the connection; a
  // client still sending chunks may see the close (a reset) before it reads the answer. Either
  // way the oversized body never reaches auth or the handler.
  if (chunked) {
    EXPECT_EQ(chunked->status, 413);
    EXPECT_EQ(Json(chunked), json::parse(R"({"error":"Request body exceeds 64 bytes"})"));
  } else {
    EXPECT_TRUE(chunked.error() == httplib::Error::Write ||
                chunked.error() == httplib::Error::Read ||
                chunked.error() == httplib::Error::Connection)
        << "unexpected client error " << httplib::to_string(chunked.error());
  }
  // Within the cap, auth is checked.
  EXPECT_EQ(Data().Post("/admin/replay", R"({"topic":"x"})", "application/json")->status, 401);
}

// POST /admin/transform/test (reference §13.2): the server reads the body under the cap, checks
// auth, and hands the body to deps.transform_test (the app's TransformTester; its answers are
// tested in src/transform and end to end); its own errors use the endpoint's success:false shape.
TEST_P(AdminServerTest, TransformTestRouteReadsAuthenticatesAndHandsOverTheBody) {
  config_.admin.enabled = true;
  config_.admin.max_payload_bytes = 64;
  config_.admin.auth = AdminAuthConfig{"bearer", {{"token", "t0ken"}}};
  std::vector<std::string> seen;
  std::mutex mu;
  AdminServerDeps deps;
  deps.transform_test = [&](std::string_view body) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(body);
    return std::make_pair(200, std::string(R"({"success":true,"result":1})"));
  };
  StartServer(std::move(deps));
  auto cli = Data();
  const httplib::Headers auth = {{"Authorization", "Bearer t0ken"}};
  const std::string body = R"({"expression":"1","payload":{}})";
  auto ok = cli.Post("/admin/transform/test", auth, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Json(ok), json::parse(R"({"success":true,"result":1})"));
  auto wrong = cli.Post("/admin/transform/test", {{"Authorization", "Bearer nope"}}, body,
                        "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(Json(wrong), json::parse(R"({"success":false,"error":"Invalid bearer token"})"));
  auto big = cli.Post("/admin/transform/test", auth, std::string(100, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(Json(big), json::parse(R"({"success":false,"error":"Request body exceeds 64 bytes"})"));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, std::vector<std::string>{body});
}

// Without a handler (a build without transforms) or with admin off there is no such route.
TEST_P(AdminServerTest, TransformTestRouteNeedsAdminAndAHandler) {
  AdminServerDeps deps;
  deps.transform_test = [](std::string_view) { return std::make_pair(200, std::string("{}")); };
  StartServer(std::move(deps));
  EXPECT_EQ(Data().Post("/admin/transform/test", "{}", "application/json")->status, 404);
  server_->Stop(std::chrono::milliseconds(1000));
  config_.admin.enabled = true;
  config_.admin.insecure = true;
  StartServer();
  EXPECT_EQ(Data().Post("/admin/transform/test", "{}", "application/json")->status, 404);
}

TEST_P(AdminServerTest, RefusesAdminWithoutAuth) {
  config_.admin.enabled = true;
  AdminServerDeps deps;
  deps.store = store_.get();
  auto s = AdminServer::Create(config_, std::move(deps));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("Set 'admin.auth'"));
}

class ReplayTest : public AdminStoreTest {
 protected:
  void SetUp() override {
    AdminStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    config_.admin.enabled = true;
    config_.admin.insecure = true;
    config_.routes = {{"order.*", "orders-web", std::nullopt, ""},
                      {"order.**", "archive", std::nullopt, ""},
                      {"**", "fallback", std::nullopt, ""}};
    StartServer();
  }
  httplib::Result Replay(const std::string& body) {
    return Data().Post("/admin/replay", body, "application/json");
  }
  int64_t Moved(const std::string& body) {
    auto r = Replay(body);
    EXPECT_TRUE(r);
    if (!r) return -1;
    EXPECT_EQ(r->status, 200) << r->body;
    return Json(r).value("moved", int64_t{-1});
  }
  std::string State(const std::string& id) { return db_->Field(id, "state"); }
};

TEST_P(ReplayTest, RequiresAFilterAndValidInput) {
  auto none = Replay("{}");
  EXPECT_EQ(none->status, 400);
  EXPECT_EQ(Json(none), json::parse(R"({"error":"A replay needs at least one filter."})"));
  auto unknown_only = Replay(R"({"foo":1})");
  EXPECT_EQ(Json(unknown_only), json::parse(R"({"error":"A replay needs at least one filter."})"));
  auto bad_json = Replay("{not json");
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_EQ(Json(bad_json)["error"], "Invalid request: the body is not valid JSON");
  auto bad_uuid = Replay(R"({"ids":["123"]})");
  EXPECT_EQ(bad_uuid->status, 400);
  EXPECT_EQ(Json(bad_uuid)["error"], "Invalid request: '123' in 'ids' is not a UUID");
  auto bad_instant = Replay(R"({"createdAfter":"last tuesday"})");
  EXPECT_EQ(bad_instant->status, 400);
  EXPECT_THAT(Json(bad_instant)["error"].get<std::string>(),
              ::testing::StartsWith("Invalid request: 'createdAfter'"));
}

TEST_P(ReplayTest, IdsMoveOnlySentAndDeadAndResetTheRow) {
  std::string dead = Row("order.created", "dead");
  std::string sent = Row("order.created", "sent");
  std::string pending = Row("order.created", "pending");
  std::string processing = Row("order.created", "processing");
  std::string seq_before = db_->Field(dead, "sequence");
  EXPECT_EQ(Moved(json{{"ids", {dead, sent, pending, processing}}}.dump()), 2);
  for (const auto& id : {dead, sent}) {
    EXPECT_EQ(State(id), "pending");
    EXPECT_EQ(db_->Field(id, "attempt"), "0");
    EXPECT_EQ(db_->Field(id, "last_error"), "<null>");
    EXPECT_EQ(db_->Field(id, "claim_token"), "<null>");
  }
  EXPECT_EQ(db_->Field(dead, "sequence"), seq_before);
  EXPECT_EQ(State(processing), "processing");
  EXPECT_NE(db_->Field(processing, "claim_token"), "<null>");
  // An empty id list matches nothing.
  Row("order.created", "dead");
  EXPECT_EQ(Moved(R"({"ids":[]})"), 0);
}

TEST_P(ReplayTest, TopicAndTopicsIntersect) {
  std::string a = Row("order.created", "dead");
  std::string b = Row("order.paid", "dead");
  std::string c = Row("user.created", "dead");
  EXPECT_EQ(Moved(R"({"topic":"order.created","topics":["order.paid"]})"), 0);
  EXPECT_EQ(Moved(R"({"topics":["order.paid","user.created"]})"), 2);
  EXPECT_EQ(State(b), "pending");
  EXPECT_EQ(State(c), "pending");
  EXPECT_EQ(State(a), "dead");
  EXPECT_EQ(Moved(R"({"topic":"order.created"})"), 1);
  EXPECT_EQ(State(a), "pending");
}

TEST_P(ReplayTest, DestinationResolvesThroughTheLiveRoutesFirstMatch) {
  std::string web1 = Row("order.created", "dead");        // order.* -> orders-web
  std::string web2 = Row("order.paid", "sent");           // order.* -> orders-web
  std::string archive = Row("order.created.v2", "dead");  // order.** -> archive
  std::string other = Row("user.created", "dead");        // ** -> fallback
  std::string active = Row("order.created", "pending");
  // With topics as well: only the intersection (never adds a topic).
  EXPECT_EQ(Moved(R"({"destination":"orders-web","topics":["order.paid","user.created"]})"), 1);
  EXPECT_EQ(State(web2), "pending");
  EXPECT_EQ(State(web1), "dead");
  EXPECT_EQ(Moved(R"({"destination":"orders-web"})"), 1);
  EXPECT_EQ(State(web1), "pending");
  EXPECT_EQ(State(archive), "dead");
  EXPECT_EQ(State(other), "dead");
  EXPECT_EQ(State(active), "pending");
  // A destination that no topic routes to moves nothing (never "all").
  EXPECT_EQ(Moved(R"({"destination":"nobody"})"), 0);
  EXPECT_EQ(State(other), "dead");
  EXPECT_EQ(Moved(R"({"destination":"archive"})"), 1);
  EXPECT_EQ(State(archive), "pending");
}

TEST_P(ReplayTest, CreatedAfterAndBeforeAreStrict) {
  std::string early = Row("t.a", "dead", "2024-01-01T00:00:00.000Z");
  std::string middle = Row("t.a", "dead", "2024-01-02T00:00:00.000Z");
  std::string late = Row("t.a", "dead", "2024-01-03T00:00:00.000Z");
  std::string middle_active = Row("t.a", "processing", "2024-01-02T00:00:00.000Z");
  EXPECT_EQ(
      Moved(R"({"createdAfter":"2024-01-01T00:00:00Z","createdBefore":"2024-01-03T00:00:00Z"})"),
      1);
  EXPECT_EQ(State(middle), "pending");
  EXPECT_EQ(State(early), "dead");
  EXPECT_EQ(State(late), "dead");
  EXPECT_EQ(State(middle_active), "processing");
  // An offset is converted to UTC: 2024-01-02T23:00:00-01:00 is 2024-01-03T00:00:00Z.
  EXPECT_EQ(Moved(R"({"createdAfter":"2024-01-02T23:00:00-01:00"})"), 0);
  EXPECT_EQ(Moved(R"({"createdAfter":"2024-01-02T22:59:59-01:00"})"), 1);
  EXPECT_EQ(State(late), "pending");
  EXPECT_EQ(Moved(R"({"createdBefore":"2024-01-01T00:00:00.001Z"})"), 1);
  EXPECT_EQ(State(early), "pending");
}

INSTANTIATE_TEST_SUITE_P(Dialects, AdminServerTest, ::testing::Values("sqlite", "postgresql"),
                         DialectName);
INSTANTIATE_TEST_SUITE_P(Dialects, ReplayTest, ::testing::Values("sqlite", "postgresql"),
                         DialectName);

// Readiness follows the database: 503 while PostgreSQL refuses connections to the outbox
// database, 200 once it accepts them again (scenario S6, readiness part).
class ReadinessDatabaseTest : public AdminStoreTest {};

void AdminSql(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r = PQexec(c, sql.c_str());
  EXPECT_TRUE(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK)
      << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

TEST_P(ReadinessDatabaseTest, Turns503WhileTheDatabaseIsDownAnd200WhenItReturns) {
  AdminServerDeps deps;
  deps.components = {{"outbox-poller", [] { return true; }}};
  StartServer(std::move(deps));
  auto cli = Data();
  cli.set_read_timeout(10, 0);
  ASSERT_EQ(cli.Get("/health/ready")->status, 200);
  std::string name = db_->config().url.substr(db_->config().url.rfind('/') + 1);
  AdminSql(pg_url_, "ALTER DATABASE " + name + " ALLOW_CONNECTIONS false");
  AdminSql(pg_url_, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" +
                        name + "' AND pid <> pg_backend_pid()");
  auto down = cli.Get("/health/ready");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(Json(down)["components"]["database"]["status"], "down");
  EXPECT_EQ(Json(down)["components"]["outbox-poller"]["status"], "up");
  AdminSql(pg_url_, "ALTER DATABASE " + name + " ALLOW_CONNECTIONS true");
  // The store reconnects on its own; poll with a deadline.
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = cli.Get("/health/ready");
    status = r ? r->status : 0;
    if (status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
}

INSTANTIATE_TEST_SUITE_P(Dialects, ReadinessDatabaseTest, ::testing::Values("postgresql"),
                         DialectName);

}  // namespace
}  // namespace queuebox::testing
