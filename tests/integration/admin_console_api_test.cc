// The console's JSON API (/admin/api/, docs/console.md) against a real store (SQLite always,
// PostgreSQL with QB_TEST_PG_URL): admin.auth and its refusals counted, the overview's counts,
// the sent and dead per minute summed over replicas (queuebox_console_activity), lists with every
// filter and keyset pages, one message whole, replay and discard counted first then confirmed,
// and the inbox lookup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "admin/activity_recorder.h"
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

  // The overview's sum of `what` ("sent", "dead") over its minutes.
  static int64_t Total(const json& overview, const char* what) {
    int64_t n = 0;
    for (const json& m : overview["perMinute"]) n += m[what].get<int64_t>();
    return n;
  }
  // The database clock's minute (minutes since the epoch).
  int64_t DbMinute() {
    const std::string sql = GetParam() == "postgresql"
                                ? "SELECT floor(extract(epoch FROM clock_timestamp()) / 60)::bigint"
                                : "SELECT CAST(strftime('%s', 'now') AS INTEGER) / 60";
    return std::stoll(db_->Query(sql)[0][0]);
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
  ActivityRecorder recorder(metrics_.activity_window(), *store_->console());
  ASSERT_TRUE(recorder.RecordNow().ok());
  metrics_.OnCircuitState("orders-web", 1);
  json o = Get("/admin/api/overview");
  EXPECT_EQ(o["outbox"]["rows"], json::parse(R"({"dead":1,"pending":2,"processing":1,"sent":1})"));
  EXPECT_EQ(o["outbox"]["estimated"], json::array());
  EXPECT_GE(o["outbox"]["oldestPendingAgeSeconds"].get<double>(), 0.0);
  EXPECT_EQ(o["inbox"]["rows"]["pending"], 0);
  ASSERT_EQ(o["perMinute"].size(), 15u);
  EXPECT_EQ(Total(o, "sent"), 3);
  EXPECT_EQ(o["perMinuteScope"], "cluster");
  EXPECT_EQ(o["destinations"], json::parse(R"([{"name":"orders-web","type":"http",
      "circuit":"open"},{"name":"other","type":"file","circuit":"closed"}])"));
  EXPECT_EQ(o["replicas"], json::array());
  EXPECT_TRUE(o["capture"].is_null());
}

// On a big table with statistics (PostgreSQL: ANALYZE's reltuples; SQLite: sqlite_stat1) the
// bulk state is the estimate less the exact counts of the others, and is named as estimated.
TEST_P(ConsoleApiTest, OnABigTableTheSentCountIsTheEstimateLessTheOthers) {
  Row("order.created", "pending");
  Row("order.created", "pending");
  Row("order.created", "dead");
  const bool pg = GetParam() == "postgresql";
  db_->Exec(std::string("INSERT INTO outbox (topic, payload, state) ") +
            (pg ? "SELECT 'bulk', '{}', 'sent' FROM generate_series(1, 12000)"
                : "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000) "
                  "SELECT 'bulk', '{}', 'sent' FROM n"));
  db_->Exec(pg ? "ANALYZE outbox" : "ANALYZE");
  StartConsole();
  json o = Get("/admin/api/overview");
  EXPECT_EQ(o["outbox"]["rows"],
            json::parse(R"({"dead":1,"pending":2,"processing":0,"sent":12000})"));
  EXPECT_EQ(o["outbox"]["estimated"], json::parse(R"(["sent"])"));
  EXPECT_GE(o["outbox"]["oldestPendingAgeSeconds"].get<double>(), 0.0);
}

// Two stores on one database are two replicas: each records its own counts; the overview of
// either sums them by minute, and the minutes of a replica that stopped still count.
TEST_P(ConsoleApiTest, TheOverviewSumsEveryReplicasCountsPerMinute) {
  StartConsole();
  json empty = Get("/admin/api/overview");
  ASSERT_EQ(empty["perMinute"].size(), 15u);
  EXPECT_EQ(Total(empty, "sent") + Total(empty, "dead"), 0);
  EXPECT_EQ(empty["perMinuteScope"], "cluster");
  const int64_t before = DbMinute();
  metrics_.OnMessages("sent", 3);
  metrics_.OnMessages("dead", 1);
  ActivityRecorder here(metrics_.activity_window(), *store_->console());
  ASSERT_TRUE(here.RecordNow().ok());
  {
    std::unique_ptr<OutboxStore> other_store = db_->Open();
    Metrics other_metrics;
    ActivityRecorder other(other_metrics.activity_window(), *other_store->console());
    EXPECT_NE(other.replica_id(), here.replica_id());
    other_metrics.OnMessages("sent", 4);
    other_metrics.OnMessages("dead", 2);
    other_metrics.OnMessages("retry", 9);  // neither sent nor dead: not counted
    ASSERT_TRUE(other.RecordNow().ok());
    EXPECT_TRUE(other.RecordNow().ok());  // nothing new: nothing written
    auto seen = other_store->console()->Activity(15);
    ASSERT_TRUE(seen.ok()) << seen.status().ToString();
    int64_t sent = 0;
    for (const ConsoleMinute& m : *seen) sent += m.sent;
    EXPECT_EQ(sent, 7);
  }  // the other replica stops; its minute stays
  const int64_t after = DbMinute();
  EXPECT_EQ(db_->Query("SELECT count(*) FROM queuebox_console_activity")[0][0], "2");
  json o = Get("/admin/api/overview");
  ASSERT_EQ(o["perMinute"].size(), 15u);
  EXPECT_EQ(Total(o, "sent"), 7);
  EXPECT_EQ(Total(o, "dead"), 3);
  if (before == after) {  // both recorded in one minute: one entry holds the sums
    EXPECT_EQ(
        o["perMinute"].back()["sent"].get<int64_t>() + o["perMinute"][13]["sent"].get<int64_t>(),
        7);
  }
  // This replica's later counts add to its own row of the minute.
  metrics_.OnMessages("sent", 5);
  ASSERT_TRUE(here.RecordNow().ok());
  EXPECT_EQ(Total(Get("/admin/api/overview"), "sent"), 12);
}

TEST_P(ConsoleApiTest, OldMinutesArePrunedAndBadCountsRefused) {
  const int64_t now = DbMinute();
  db_->Exec(
      "INSERT INTO queuebox_console_activity (outbox_table, minute, replica_id, sent, dead) "
      "VALUES ('outbox', " +
      std::to_string(now - 61) + ", 'gone', 10, 0), ('outbox', " + std::to_string(now - 10) +
      ", 'gone', 20, 1), ('other_outbox', " + std::to_string(now - 1) + ", 'x', 40, 0)");
  ConsoleQueries& console = *store_->console();
  ASSERT_TRUE(console.RecordActivity("r1", 1, 0).ok());
  EXPECT_EQ(db_->Query("SELECT count(*) FROM queuebox_console_activity WHERE minute < " +
                       std::to_string(now - 60))[0][0],
            "0");
  auto minutes = console.Activity(15);
  ASSERT_TRUE(minutes.ok()) << minutes.status().ToString();
  ASSERT_EQ(minutes->size(), 15u);
  int64_t sent = 0, dead = 0;
  for (const ConsoleMinute& m : *minutes) sent += m.sent, dead += m.dead;
  EXPECT_EQ(sent, 21);  // another outbox table's replicas are not counted
  EXPECT_EQ(dead, 1);
  EXPECT_EQ(minutes->back().unix_minute - minutes->front().unix_minute, 14);
  EXPECT_EQ(console.RecordActivity("r1", -1, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(console.RecordActivity("", 1, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(console.Activity(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(console.Activity(61).status().code(), StatusCode::kInvalidArgument);
}

// A schema without V24: the overview still answers, with this replica's own counts; the
// recorder keeps the counts it could not write and writes them once the table is back.
TEST_P(ConsoleApiTest, WithoutTheActivityTableTheOverviewShowsThisReplica) {
  db_->Exec("DROP TABLE queuebox_console_activity");
  StartConsole();
  metrics_.OnMessages("sent", 2);
  ActivityRecorder recorder(metrics_.activity_window(), *store_->console());
  EXPECT_FALSE(recorder.RecordNow().ok());
  json o = Get("/admin/api/overview");
  EXPECT_EQ(o["perMinuteScope"], "replica");
  ASSERT_EQ(o["perMinute"].size(), 15u);
  EXPECT_EQ(o["perMinute"].back()["sent"], 2);
  EXPECT_EQ(o["outbox"]["rows"]["pending"], 0);
  db_->Exec(
      "CREATE TABLE queuebox_console_activity (outbox_table TEXT NOT NULL, minute BIGINT "
      "NOT NULL, replica_id TEXT NOT NULL, sent BIGINT NOT NULL DEFAULT 0, dead BIGINT NOT "
      "NULL DEFAULT 0, PRIMARY KEY (outbox_table, minute, replica_id))");
  metrics_.OnMessages("sent", 1);
  ASSERT_TRUE(recorder.RecordNow().ok());
  json back = Get("/admin/api/overview");
  EXPECT_EQ(back["perMinuteScope"], "cluster");
  EXPECT_EQ(Total(back, "sent"), 3);
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

// An error-text filter reads at most 10,000 rows per page: the page after them holds no match and
// a `next` that searches on; following it finds the oldest row, and replay by that filter finds it.
TEST_P(ConsoleApiTest, AnErrorSearchReadsAWindowPerPageAndItsNextSearchesOn) {
  const std::string needle = Dead("order.created", "TLS: certificate has expired", 3600);
  const bool pg = GetParam() == "postgresql";
  db_->Exec(std::string("INSERT INTO outbox (topic, payload, state, last_error) ") +
            (pg ? "SELECT 'bulk', '{}', 'dead', 'HTTP 500' FROM generate_series(1, 10000)"
                : "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) "
                  "SELECT 'bulk', '{}', 'dead', 'HTTP 500' FROM n"));
  StartConsole();
  json first = Get("/admin/api/messages?state=dead&error=CERTIFICATE");
  EXPECT_EQ(first["rows"].size(), 0u);
  EXPECT_EQ(first["searched"], 10000);
  ASSERT_TRUE(first["next"].is_string());
  json second = Get("/admin/api/messages?state=dead&error=CERTIFICATE&cursor=" +
                    httplib::detail::encode_query_param(first["next"].get<std::string>()));
  EXPECT_EQ(Ids(second), std::vector<std::string>{needle});
  EXPECT_EQ(second["searched"], 1);
  EXPECT_TRUE(second["next"].is_null());
  // Without an error filter there is no window, and no `searched`.
  EXPECT_FALSE(Get("/admin/api/messages?state=dead&limit=1").contains("searched"));
  json filter = {{"filter", {{"error", "certificate"}}}, {"confirm", true}};
  EXPECT_EQ(Post("/admin/api/replay", filter), json::parse(R"({"moved":1,"confirmed":true})"));
  EXPECT_EQ(db_->Field(needle, "state"), "pending");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE state = 'dead'"), "10000");
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
