// The console's JSON API (/admin/api/, docs/console.md) against a real store (SQLite always,
// PostgreSQL with QB_TEST_PG_URL): admin.auth and its refusals counted, the overview's counts,
// lists with every filter and keyset pages, one message whole, replay and discard counted first
// then confirmed, and the inbox lookup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "integration/admin_test_support.h"

namespace queuebox::testing {
namespace {

using nlohmann::json;

class ConsoleApiTest : public AdminStoreTest {
 protected:
  void StartConsole() {
    config_.admin.enabled = true;
    config_.admin.auth = AdminAuthConfig{"bearer", {{"token", "t0ken"}}};
    config_.routes = {{"order.*", "orders-web", std::nullopt, ""},
                      {"**", "other", std::nullopt, ""}};
    config_.destinations["orders-web"].type = "http";
    config_.destinations["other"].type = "file";
    AdminServerDeps deps;
    deps.console = store_->console();
    deps.inbox = store_->inbox();
    deps.metrics = &metrics_;
    StartServer(std::move(deps));
  }
  json Get(const std::string& path, int expect = 200) {
    auto cli = Data();
    auto r = cli.Get(path, {{"Authorization", "Bearer t0ken"}});
    EXPECT_TRUE(r);
    if (!r) return nullptr;
    EXPECT_EQ(r->status, expect) << path << ": " << r->body;
    return Json(r);
  }
  json Post(const std::string& path, const json& body, int expect = 200) {
    auto cli = Data();
    auto r = cli.Post(path, {{"Authorization", "Bearer t0ken"}}, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return nullptr;
    EXPECT_EQ(r->status, expect) << path << ": " << r->body;
    return Json(r);
  }
  // A dead row with its error, updated `seconds_ago` before now (distinct list positions).
  std::string Dead(const std::string& topic, const std::string& error, int seconds_ago) {
    std::string id = Row(topic, "dead");
    db_->Exec("UPDATE outbox SET last_error = '" + error +
              "', updated_at = " + db_->NowPlus(-seconds_ago) + " WHERE id = '" + id + "'");
    return id;
  }
  static std::vector<std::string> Ids(const json& page) {
    std::vector<std::string> out;
    for (const json& r : page["rows"]) out.push_back(r["id"]);
    return out;
  }

  Metrics metrics_;
};

TEST_P(ConsoleApiTest, EveryRouteNeedsTheTokenAndRefusalsAreCounted) {
  StartConsole();
  auto cli = Data();
  for (const char* path : {"/admin/api/overview", "/admin/api/messages",
                           "/admin/api/messages/00000000-0000-4000-8000-000000000001",
                           "/admin/api/inbox/lookup?source=s&idempotencyKey=k"}) {
    auto r = cli.Get(path, {{"Authorization", "Bearer wrong"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  auto post = cli.Post("/admin/api/replay", R"({"ids":[]})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  EXPECT_THAT(metrics_.Render(), ::testing::HasSubstr("queuebox_admin_auth_failures_total 5"));
  // A body over admin.maxPayloadBytes is refused before auth, as on /admin/replay.
  auto big = cli.Post("/admin/api/discard", std::string(70000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(Get("/admin/api/overview")["outbox"]["rows"]["pending"], 0);
}

TEST_P(ConsoleApiTest, TheOverviewCountsRowsPerStateAndListsDestinations) {
  Row("order.created", "pending");
  Row("order.created", "pending");
  Row("order.created", "sent");
  Row("order.created", "dead");
  Row("order.created", "processing");
  StartConsole();
  metrics_.OnMessages("sent", 3);
  metrics_.OnCircuitState("orders-web", 1);
  json o = Get("/admin/api/overview");
  EXPECT_EQ(o["outbox"]["rows"], json::parse(R"({"dead":1,"pending":2,"processing":1,"sent":1})"));
  EXPECT_EQ(o["outbox"]["estimated"], json::array());
  EXPECT_GE(o["outbox"]["oldestPendingAgeSeconds"].get<double>(), 0.0);
  EXPECT_EQ(o["inbox"]["rows"]["pending"], 0);
  ASSERT_EQ(o["perMinute"].size(), 15u);
  EXPECT_EQ(o["perMinute"].back()["sent"], 3);
  EXPECT_EQ(o["destinations"], json::parse(R"([{"name":"orders-web","type":"http",
      "circuit":"open"},{"name":"other","type":"file","circuit":"closed"}])"));
  EXPECT_EQ(o["replicas"], json::array());
  EXPECT_TRUE(o["capture"].is_null());
}

TEST_P(ConsoleApiTest, ListsFilterAndPageNewestFirst) {
  std::vector<std::string> dead;
  for (int i = 0; i < 5; ++i) dead.push_back(Dead("order.created", "HTTP 500", 100 - i));
  std::string t1 = Dead("user.created", "connect: Timeout after 5 s", 10);
  std::string t2 = Dead("user.created", "timeout", 5);
  Row("order.created", "pending");
  StartConsole();
  // Pages of 3 follow each other with no row twice, newest first.
  std::vector<std::string> seen;
  std::string next;
  for (int page = 0; page < 4; ++page) {
    json p =
        Get("/admin/api/messages?state=dead&limit=3" + (next.empty() ? "" : "&cursor=" + next));
    for (const std::string& id : Ids(p)) seen.push_back(id);
    if (p["next"].is_null()) break;
    next = httplib::detail::encode_query_param(p["next"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{t2, t1, dead[4], dead[3], dead[2], dead[1], dead[0]}));
  EXPECT_EQ(Ids(Get("/admin/api/messages?state=dead&error=TIMEOUT")),
            (std::vector<std::string>{t2, t1}));
  EXPECT_EQ(Ids(Get("/admin/api/messages?topic=user.created")).size(), 2u);
  json by_destination = Get("/admin/api/messages?state=dead&destination=orders-web&limit=10");
  EXPECT_EQ(by_destination["rows"].size(), 5u);
  EXPECT_EQ(by_destination["rows"][0]["destination"], "orders-web");
  EXPECT_EQ(by_destination["rows"][0]["lastError"], "HTTP 500");
  EXPECT_EQ(Get("/admin/api/messages?state=dead&createdAfter=2999-01-01T00:00:00Z")["rows"].size(),
            0u);
  EXPECT_EQ(Get("/admin/api/messages?state=pending")["rows"].size(), 1u);
  EXPECT_EQ(Get("/admin/api/messages?state=nope", 400)["error"],
            "Invalid request: 'state' of the outbox is one of pending, processing, sent, dead");
  EXPECT_EQ(Get("/admin/api/messages?cursor=x", 400)["error"],
            "Invalid request: 'cursor' is not a cursor this API gave");
}

TEST_P(ConsoleApiTest, OneMessageShowsPayloadRedactedHeadersAttemptsAndItsKeysBacklog) {
  NewOutboxRow r;
  r.topic = "order.created";
  r.key = "k-1";
  r.payload = R"({"html":"<script>alert(1)</script>"})";
  r.headers = R"({"Authorization":"Bearer abc","x-trace":"t-1"})";
  auto id = store_->Insert(r);
  ASSERT_TRUE(id.ok());
  r.headers.reset();
  ASSERT_TRUE(store_->Insert(r).ok());  // waits behind the first
  db_->Exec("UPDATE outbox SET state = 'dead', attempt = 2, last_error = 'HTTP 503' WHERE id = '" +
            *id + "'");
  for (const char* attempt : {"(1, 'retry', 503)", "(2, 'dead', 503)"}) {
    std::string values(attempt);
    db_->Exec("INSERT INTO outbox_attempts (message_id, attempt, outcome, answer) VALUES ('" + *id +
              "', " + values.substr(1, values.size() - 2) + ")");
  }
  StartConsole();
  json m = Get("/admin/api/messages/" + *id);
  EXPECT_EQ(m["payload"], json::parse(r.payload));
  EXPECT_EQ(m["headers"], json::parse(R"({"Authorization":"[REDACTED]","x-trace":"t-1"})"));
  EXPECT_EQ(m["key"], "k-1");
  EXPECT_EQ(m["state"], "dead");
  EXPECT_EQ(m["waitingBehind"], 1);
  ASSERT_EQ(m["attempts"].size(), 2u);
  EXPECT_EQ(m["attempts"][0]["outcome"], "retry");
  EXPECT_EQ(m["attempts"][1]["outcome"], "dead");
  EXPECT_EQ(m["attempts"][1]["answer"], "503");
  Get("/admin/api/messages/00000000-0000-4000-8000-000000000009", 404);
}

TEST_P(ConsoleApiTest, ReplayAndDiscardCountFirstThenActOnConfirmation) {
  std::vector<std::string> orders;
  for (int i = 0; i < 3; ++i) orders.push_back(Dead("order.created", "HTTP 500", 30 - i));
  std::string user = Dead("user.created", "boom", 5);
  std::string pending = Row("user.created", "pending");
  StartConsole();
  json filter = {{"filter", {{"destination", "orders-web"}}}};
  EXPECT_EQ(Post("/admin/api/replay", filter), json::parse(R"({"matching":3,"confirmed":false})"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE state = 'dead'"), "4");
  filter["confirm"] = true;
  EXPECT_EQ(Post("/admin/api/replay", filter), json::parse(R"({"moved":3,"confirmed":true})"));
  for (const std::string& id : orders) EXPECT_EQ(db_->Field(id, "state"), "pending");

  json discard = {{"ids", {user, pending}}};
  EXPECT_EQ(Post("/admin/api/discard", discard)["matching"], 1);
  discard["confirm"] = true;
  EXPECT_EQ(Post("/admin/api/discard", discard), json::parse(R"({"deleted":1,"confirmed":true})"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE id = '" + user + "'"), "0");
  EXPECT_EQ(db_->Field(pending, "state"), "pending");
  EXPECT_EQ(Post("/admin/api/discard", {{"filter", {{"state", "sent"}}}}, 400)["error"],
            "Invalid request: only dead rows are discarded");
  EXPECT_EQ(Post("/admin/api/replay", {{"ids", {"nope"}}}, 400)["error"],
            "Invalid request: 'ids' must be a list of UUIDs");
}

TEST_P(ConsoleApiTest, TheInboxLookupFindsTheRowAndTheOutboxRowItBecame) {
  NewInboxMessage in;
  in.source = "stripe";
  in.idempotency_key = "evt_1";
  in.payload = R"({"type":"charge"})";
  auto stored = store_->inbox()->Store(std::span<const NewInboxMessage>(&in, 1));
  ASSERT_TRUE(stored.ok());
  const std::string inbox_id = (*stored)[0].id;
  NewOutboxRow out;
  out.topic = "order.paid";
  out.payload = in.payload;
  out.headers = json{{"x-inbox-id", inbox_id}, {"x-source", "stripe"}}.dump();
  auto outbox_id = store_->Insert(out);
  ASSERT_TRUE(outbox_id.ok());
  StartConsole();
  json found = Get("/admin/api/inbox/lookup?source=stripe&idempotencyKey=evt_1");
  EXPECT_EQ(found["id"], inbox_id);
  EXPECT_EQ(found["source"], "stripe");
  EXPECT_EQ(found["forwardedTo"]["id"], *outbox_id);
  EXPECT_EQ(found["forwardedTo"]["destination"], "orders-web");
  Get("/admin/api/inbox/lookup?source=stripe&idempotencyKey=evt_2", 404);
  json inbox = Get("/admin/api/messages?table=inbox&source=stripe");
  EXPECT_EQ(Ids(inbox), std::vector<std::string>{inbox_id});
  EXPECT_EQ(Get("/admin/api/messages/" + inbox_id + "?table=inbox")["forwardedTo"]["id"],
            *outbox_id);
}

// The inbox screens' reads and actions: a page filtered by source, state and error text, one row
// whole (secret headers redacted), replay and discard of dead rows by ids and by filter.
TEST_P(ConsoleApiTest, InboxRowsAreListedShownReplayedAndDiscarded) {
  std::vector<NewInboxMessage> in(3);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].source = i < 2 ? "stripe" : "github";
    in[i].idempotency_key = "evt_" + std::to_string(i);
    in[i].payload = R"({"html":"\"><img src=x onerror=alert(1)>"})";
    in[i].headers = R"({"X-Api-Key":"s3cret","x-trace":"t-1"})";
    in[i].dead = i != 1;
    in[i].last_error = in[i].dead ? "The topic template of source 'x' rendered empty" : "";
  }
  auto stored = store_->inbox()->Store(in);
  ASSERT_TRUE(stored.ok());
  const std::string dead = (*stored)[0].id, pending = (*stored)[1].id, other = (*stored)[2].id;
  StartConsole();
  EXPECT_EQ(Ids(Get("/admin/api/messages?table=inbox&source=stripe&state=dead&error=TEMPLATE")),
            std::vector<std::string>{dead});
  EXPECT_EQ(Ids(Get("/admin/api/messages?table=inbox&source=stripe&limit=1")).size(), 1u);
  EXPECT_EQ(Get("/admin/api/messages?table=inbox&topic=x", 400)["error"],
            "Invalid request: 'topic' and 'destination' filter the outbox");
  json m = Get("/admin/api/messages/" + dead + "?table=inbox");
  EXPECT_EQ(m["payload"], json::parse(in[0].payload));
  EXPECT_EQ(m["headers"], json::parse(R"({"X-Api-Key":"[REDACTED]","x-trace":"t-1"})"));
  EXPECT_EQ(m["idempotencyKey"], "evt_0");
  EXPECT_TRUE(m["forwardedTo"].is_null());

  json replay = {{"table", "inbox"}, {"ids", {dead, pending}}};
  EXPECT_EQ(Post("/admin/api/replay", replay)["matching"], 1);  // the pending row is not counted
  replay["confirm"] = true;
  EXPECT_EQ(Post("/admin/api/replay", replay), json::parse(R"({"moved":1,"confirmed":true})"));
  EXPECT_EQ(db_->Scalar("SELECT state FROM inbox WHERE id = '" + dead + "'"), "pending");
  json discard = {{"table", "inbox"}, {"filter", {{"source", "github"}}}};
  EXPECT_EQ(Post("/admin/api/discard", discard),
            json::parse(R"({"matching":1,"confirmed":false})"));
  discard["confirm"] = true;
  EXPECT_EQ(Post("/admin/api/discard", discard), json::parse(R"({"deleted":1,"confirmed":true})"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox WHERE id = '" + other + "'"), "0");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox"), "2");
}

TEST_P(ConsoleApiTest, ThePageIsEmbeddedWithAStrictPolicyAndNoInlineScript) {
  StartConsole();
  auto cli = Data();
  auto page = cli.Get("/admin/console/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Content-Security-Policy"),
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
            "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  EXPECT_FALSE(page->has_header("Set-Cookie"));
  EXPECT_THAT(page->body, ::testing::HasSubstr(R"(data-field="token")"));
  EXPECT_THAT(page->body, ::testing::HasSubstr(R"(<script src="console.js" defer></script>)"));
  EXPECT_THAT(page->body, ::testing::Not(::testing::HasSubstr("<script>")));
  EXPECT_THAT(page->body, ::testing::Not(::testing::HasSubstr("http")));  // nothing external
  auto script = cli.Get("/admin/console/console.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_THAT(script->body, ::testing::Not(::testing::HasSubstr("innerHTML")));
  EXPECT_EQ(cli.Get("/admin/console/console.css")->status, 200);
  EXPECT_EQ(cli.Get("/admin/console/other.js")->status, 404);
  EXPECT_EQ(cli.Get("/admin/console")->status, 302);
}

INSTANTIATE_TEST_SUITE_P(Dialects, ConsoleApiTest, ::testing::Values("sqlite", "postgresql"),
                         DialectName);

}  // namespace
}  // namespace queuebox::testing
