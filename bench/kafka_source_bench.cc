// kafka_source_bench: records/s from Kafka into the inbox through the kafka source (issue 15).
//
//   kafka_source_bench --db-url URL [--records N] [--partitions P] [--max-poll-records M]
//
// Starts librdkafka's mock cluster (3 brokers on 127.0.0.1, this process), creates a topic of P
// partitions and produces N JSON records {"id": "r<i>", ...} (not timed). Then, on the migrated
// database at URL (libpq URI or sqlite:<file>; its inbox must be empty):
//   new        one kafka source (group g-new) reads the N records into N new rows
//   duplicate  a second source (group g-dup, same source name) reads them again: N duplicates
// Each case is timed from Start() to the moment the last record is settled (its outcome counted:
// queuebox_inbox_messages_total), and printed as one JSON object on stdout.
//
//   kafka_source_bench --db-url URL --e2e-binary QUEUEBOX --sink-url http://127.0.0.1:P ...
//
// End to end instead: the queuebox binary (a kafka source, the inbox relay, an http destination
// at the sink, e.g. bench_receiver) runs against the empty database; timed from its start to the
// moment every record is a `sent` outbox row. Each record carries "ts" (its produce time, Unix
// microseconds) for bench_receiver's latency.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "admin/metrics.h"
#include "core/log.h"
#include "e2e_run.h"
#include "sources/kafka/kafka_source.h"
#include "store/open_store.h"

namespace {

using Clock = std::chrono::steady_clock;

int Fail(const std::string& what) {
  std::fprintf(stderr, "kafka_source_bench: %s\n", what.c_str());
  return 1;
}

// queuebox_inbox_messages_total{status} of `metrics` (0 when not exported yet).
int64_t Counted(queuebox::Metrics& metrics, const std::string& status) {
  const std::string series = "queuebox_inbox_messages_total{status=\"" + status + "\"} ";
  const std::string text = metrics.Render();
  size_t at = text.find(series);
  if (at == std::string::npos) return 0;
  return static_cast<int64_t>(std::stod(text.substr(at + series.size())));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"records/s from Kafka (mock cluster) into the inbox"};
  std::string db_url;
  int64_t records = 100000;
  int partitions = 4;
  int max_poll = 500;
  app.add_option("--db-url", db_url, "libpq URI or sqlite:<file>")->required();
  app.add_option("--records", records, "records produced");
  app.add_option("--partitions", partitions, "partitions of the topic");
  app.add_option("--max-poll-records", max_poll, "maxPollRecords: records per stored batch");
  std::string e2e_binary, sink_url;
  int http_port = 18611;
  app.add_option("--e2e-binary", e2e_binary, "queuebox binary: measure kafka -> inbox -> HTTP");
  app.add_option("--sink-url", sink_url, "base URL of the HTTP sink (--e2e-binary)");
  app.add_option("--http-port", http_port, "queuebox data port (--e2e-binary)");
  CLI11_PARSE(app, argc, argv);
  queuebox::log::Init("json", "warn");

  char err[512];
  rd_kafka_conf_t* host_conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(host_conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* host = rd_kafka_new(RD_KAFKA_PRODUCER, host_conf, err, sizeof err);
  if (host == nullptr) return Fail(err);
  rd_kafka_mock_cluster_t* mock = rd_kafka_mock_cluster_new(host, 3);
  const std::string bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
  const std::string topic = "bench.orders";
  if (rd_kafka_mock_topic_create(mock, topic.c_str(), partitions, 3) !=
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Fail("topic create");
  }

  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "linger.ms", "20", err, sizeof err);
  rd_kafka_conf_set(conf, "queue.buffering.max.messages", "1000000", err, sizeof err);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (producer == nullptr) return Fail(err);
  for (int64_t i = 0; i < records; ++i) {
    std::string v = nlohmann::json{{"id", "r" + std::to_string(i)},
                                   {"type", "order.created"},
                                   {"ts", std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count()},
                                   {"data", {{"amount", i}, {"currency", "eur"}}}}
                        .dump();
    std::vector<rd_kafka_vu_t> vus(3);
    vus[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vus[0].u.cstr = topic.c_str();
    vus[1].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[1].u.mem.ptr = v.data();
    vus[1].u.mem.size = v.size();
    vus[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vus[2].u.i = RD_KAFKA_MSG_F_COPY;
    while (rd_kafka_error_t* e = rd_kafka_produceva(producer, vus.data(), vus.size())) {
      rd_kafka_error_destroy(e);
      rd_kafka_poll(producer, 50);  // a full local queue: serve reports, then again
    }
    rd_kafka_poll(producer, 0);
  }
  if (rd_kafka_flush(producer, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR) return Fail("flush");
  rd_kafka_destroy(producer);

  queuebox::DatabaseConfig db;
  db.url = db_url;
  db.pool_size = 4;
  auto store = queuebox::OpenStore(db);
  if (!store.ok()) return Fail(store.status().ToString());
  auto migrated = (*store)->Migrate(std::nullopt);
  if (!migrated.ok()) return Fail(migrated.status().ToString());

  nlohmann::json out = {{"records", records},
                        {"partitions", partitions},
                        {"maxPollRecords", max_poll},
                        {"db", db_url.rfind("sqlite:", 0) == 0 ? "sqlite" : "postgresql"}};
  if (!e2e_binary.empty()) {
    std::ostringstream text;
    text << "database: {type: postgresql, url: \"" << db_url << "\", poolSize: 10}\n"
         << "server: {address: 127.0.0.1, httpPort: " << http_port << "}\n"
         << "http: {blockPrivateAddresses: false}\n"
         << "logging: {level: warn}\n"
         << "sources:\n  orders:\n    type: kafka\n    bootstrapServers: \"" << bootstraps
         << "\"\n    topics: [" << topic
         << "]\n    groupId: g-e2e\n    maxPollRecords: " << max_poll << "\n"
         << "destinations:\n  sink: {type: http, baseUrl: \"" << sink_url << "\"}\n"
         << "routes:\n  - {topicPattern: orders, destination: sink}\n";
    queuebox::bench::E2eTimes t =
        queuebox::bench::RunQueueBoxUntilSent(e2e_binary, text.str(), **store, records);
    if (!t.ok) return Fail(t.error);
    out["e2e"] = {{"seconds_from_start", t.seconds_from_start},
                  {"seconds_from_first_sent", t.seconds_from_first_sent},
                  {"messages_per_s", static_cast<double>(records) / t.seconds_from_first_sent}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  for (const std::string c : {"new", "duplicate"}) {
    queuebox::KafkaSourceSettings s;
    s.name = "orders";
    s.bootstrap_servers = bootstraps;
    s.topics = {topic};
    s.group_id = "g-" + c;
    s.max_poll_records = max_poll;
    queuebox::Metrics metrics;
    queuebox::sources::BrokerSourceContext ctx;
    ctx.intake = (*store)->inbox();
    ctx.observer = &metrics;
    auto source = queuebox::sources::CreateKafkaSource(s, ctx);
    if (!source.ok()) return Fail(source.status().ToString());
    const auto start = Clock::now();
    if (!(*source)->Start().ok()) return Fail("start");
    Clock::time_point first{};
    while (Counted(metrics, c) < records) {
      if (first == Clock::time_point{} && Counted(metrics, c) > 0) first = Clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto end = Clock::now();
    (*source)->Stop();
    const double total = std::chrono::duration<double>(end - start).count();
    // From the first settled batch: the group join (seconds on the mock) left out.
    const double flowing = std::chrono::duration<double>(end - first).count();
    out[c] = {{"seconds_from_start", total},
              {"seconds_from_first_batch", flowing},
              {"records_per_s", static_cast<double>(records) / flowing}};
  }
  std::printf("%s\n", out.dump().c_str());
  rd_kafka_mock_cluster_destroy(mock);
  rd_kafka_destroy(host);
  return 0;
}
