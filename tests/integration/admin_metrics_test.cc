// GET /metrics against docs/metrics.md in both directions (every documented metric is scraped
// after a relay-like sequence of events, every scraped queuebox_* family is documented), and the
// readiness part of scenario S11: a backlog nobody delivers is visible as a 503 and as growing
// pending gauges read from the database.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "admin/retention.h"
#include "integration/admin_test_support.h"
#include "testing/fake_destination.h"
#include "testing/source_dir.h"

namespace queuebox::testing {
namespace {

std::set<std::string> DocumentedMetrics() {
  std::ifstream in(std::string(QUEUEBOX_SOURCE_DIR) + "/docs/metrics.md");
  EXPECT_TRUE(in.good()) << "docs/metrics.md is missing";
  std::set<std::string> names;
  std::string line;
  std::regex row(R"(^\| `(queuebox(_[a-z0-9_]+)?|hikaricp_[a-z0-9_]+)` \|)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) names.insert(m[1]);
  }
  return names;
}

// Families from "# TYPE <name> <type>" and sample names (which add _sum/_count to summaries).
std::set<std::string> ScrapedFamilies(const std::string& body) {
  std::set<std::string> names;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

bool HasSample(const std::string& body, const std::string& family) {
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    if (name == family || name == family + "_sum" || name == family + "_count") return true;
  }
  return false;
}

double Sample(const std::string& body, const std::string& name) {
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

using MetricsDocTest = AdminStoreTest;

TEST_P(MetricsDocTest, ScrapeAndDocsListTheSameMetrics) {
  Metrics metrics("0.1.0");
  metrics.StartPendingRefresher(store_.get(), std::chrono::milliseconds(50));
  // The pool families exist where the store has a pool (PostgreSQL), as `queuebox run` wires it.
  const bool pooled = store_->PoolStats().has_value();
  if (pooled) {
    OutboxStore* store = store_.get();
    metrics.ExportConnectionPool("queuebox", [store] { return *store->PoolStats(); });
  }
  FakeDestination web("web", "http");
  // What the relay reports over a few cycles.
  metrics.OnPollCycle(true);
  metrics.OnQueueDepth("web", 1);
  metrics.OnPublish(web, true, 0.01);
  metrics.OnHttpResponse(200);
  metrics.OnMessages("sent", 1);
  metrics.OnProcessingDuration(0.02);
  metrics.OnQueueDepth("web", 1);
  metrics.OnPublish(web, false, 0.2);
  metrics.OnHttpResponse(503);
  metrics.OnMessages("failed", 1);
  metrics.OnMessages("dead", 1);
  metrics.OnQueueDepth("web", -2);
  metrics.OnReclaimed(1);
  metrics.OnClaimsLost(1);
  metrics.OnProcessError();
  metrics.OnCircuitState("web", 1);  // its circuit breaker opened
  metrics.OnThrottled("web", 0.25);   // its rows waited for rateLimit tokens
  // What the inbox relay and the sources report.
  metrics.OnInboxMessages("new", 1);
  metrics.OnInboxForwarded(1);
  metrics.OnInboxRelayError();
  metrics.OnInboxClaimsLost(1);
  metrics.OnInboxOldestPendingAge(2.5);
  RetentionConfig retention;
  retention.enabled = true;
  retention.outbox.policy = "AGE";
  retention.outbox.max_age_ms = 3600000;
  RetentionService cleanup(store_.get(), retention, &metrics);
  ASSERT_TRUE(cleanup.RunOnce().ok());

  metrics.SetCaptureProbe([] { return Metrics::CaptureReading{true, 3, 4096}; });
  metrics.SetTelemetryProbe([] { return Metrics::TelemetryReading{5, 3, 2, 1}; });

  StopsServer stop_first{this};
  AdminServerDeps deps;
  deps.metrics = &metrics;
  StartServer(std::move(deps));
  auto r = Data().Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  std::set<std::string> documented = DocumentedMetrics();
  ASSERT_GE(documented.size(), 19u);
  for (const auto& name : documented) {
    if (!pooled && name.rfind("hikaricp_", 0) == 0) continue;
    EXPECT_TRUE(HasSample(r->body, name)) << name << " is documented but has no sample";
  }
  EXPECT_THAT(r->body, ::testing::HasSubstr("\nqueuebox{version=\"0.1.0\"} 1\n"));
  for (const auto& family : ScrapedFamilies(r->body)) {
    if (family.rfind("queuebox", 0) != 0 && family.rfind("hikaricp_", 0) != 0) continue;
    EXPECT_TRUE(documented.count(family)) << family << " is scraped but not in docs/metrics.md";
  }
  EXPECT_EQ(Sample(r->body, "queuebox_capture_streaming"), 1);
  EXPECT_EQ(Sample(r->body, "queuebox_capture_wakeups_total"), 3);
  EXPECT_EQ(Sample(r->body, "queuebox_capture_slot_retained_bytes"), 4096);
  EXPECT_EQ(Sample(r->body, "queuebox_telemetry_export_failures_total"), 1);
  EXPECT_EQ(Sample(r->body, "queuebox_destination_throttled_seconds_total{destination=\"web\"}"),
            0.25);
  EXPECT_THAT(r->body,
              ::testing::HasSubstr("queuebox_telemetry_spans_total{outcome=\"dropped\"} 2"));
  metrics.StopPendingRefresher();
}

// S11 (readiness part): rows pile up for a destination nobody delivers to; the poller is not
// cycling. Readiness says 503 with outbox-poller down and the pending gauges grow.
TEST_P(MetricsDocTest, AStalledBacklogIsVisible) {
  Metrics metrics;
  metrics.StartPendingRefresher(store_.get(), std::chrono::milliseconds(20));
  StopsServer stop_first{this};
  AdminServerDeps deps;
  deps.metrics = &metrics;
  deps.components = {
      {"outbox-poller", [&metrics] { return metrics.SecondsSinceLastPollCycle() < 30; }}};
  StartServer(std::move(deps));
  auto cli = Data();
  Row("order.created", "pending", "2024-01-01T00:00:00.000Z");
  Row("order.created", "pending");
  auto ready = cli.Get("/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(Json(ready)["components"]["outbox-poller"]["status"], "down");
  EXPECT_EQ(Json(ready)["components"]["database"]["status"], "up");

  auto scrape_until = [&](double pending) {
    std::string body;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      body = cli.Get("/metrics")->body;
      if (Sample(body, "queuebox_outbox_messages_pending") == pending) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return body;
  };
  std::string first = scrape_until(2);
  EXPECT_EQ(Sample(first, "queuebox_outbox_messages_pending"), 2);
  // The oldest row was created on 2024-01-01: its age on the database clock is > 30 days.
  double age = Sample(first, "queuebox_outbox_oldest_pending_age_seconds");
  EXPECT_GT(age, 30.0 * 86400);
  Row("order.created", "pending");
  std::string second = scrape_until(3);
  EXPECT_EQ(Sample(second, "queuebox_outbox_messages_pending"), 3);
  EXPECT_GE(Sample(second, "queuebox_outbox_oldest_pending_age_seconds"), age);

  // Once the poller cycles, outbox-poller is up again.
  metrics.OnPollCycle(true);
  EXPECT_EQ(cli.Get("/health/ready")->status, 200);
  metrics.StopPendingRefresher();
}

INSTANTIATE_TEST_SUITE_P(Dialects, MetricsDocTest, ::testing::Values("sqlite", "postgresql"),
                         DialectName);

}  // namespace
}  // namespace queuebox::testing
