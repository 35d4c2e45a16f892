// nats_source_bench: messages/s from a NATS JetStream durable into the inbox (issue 15,
// bench/README.md "NATS source").
//
//   nats_source_bench --nats nats://127.0.0.1:54229 --url
//   postgresql://postgres@127.0.0.1:54329/postgres
//                     [--messages 50000] [--batch 100,500] [--replicas 1] [--duplicates 0]
//                     [--ack-all] [--batches-per-store 4]
//                     [--e2e-binary build/apps/queuebox/queuebox --sink-url http://127.0.0.1:P]
//
// With --e2e-binary: instead of the sources in this process, `queuebox run` with one nats source
// (batchSize --batch), the inbox relay and an http destination at --sink-url drains the stream,
// timed until every outbox row is sent (NATS -> inbox -> outbox -> HTTP).
//
// For each batch size: a fresh database migrated with the bundled migrations, a fresh stream
// (file storage) holding --messages JSON messages ({"id": "m-<i>"}; with --duplicates D, every
// D-th message repeats the previous id, so the inbox's dedup drops it), then --replicas nats
// sources on one durable drain it. The clock runs from Start() until every message is counted
// as stored or duplicate (the sources' own counters) and the durable has nothing pending. Prints
// one JSON line per run.
#include <libpq-fe.h>
#include <nats/nats.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "admin/metrics.h"
#include "e2e_run.h"
#include "queuebox/store.h"
#include "sources/nats/nats_source.h"
#include "store/open_store.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) std::fprintf(stderr, "%s\n  in: %.200s\n", PQresultErrorMessage(r), sql.c_str());
  PQclear(r);
  return ok;
}

std::string WithDatabase(const std::string& admin_url, const std::string& db) {
  std::string base = admin_url, query;
  if (auto q = base.find('?'); q != std::string::npos) {
    query = base.substr(q);
    base.resize(q);
  }
  const auto slash = base.find('/', base.find("//") + 2);
  return (slash == std::string::npos ? base : base.substr(0, slash)) + "/" + db + query;
}

// The value of a counter line `name` in a Prometheus exposition (0 when absent).
int64_t Counter(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + name.size() + 2));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("nats_source_bench");
  std::string nats_url, url;
  int messages = 50000, replicas = 1, duplicates = 0, per_store = 4;
  bool ack_all = false;
  std::vector<int> batches = {100, 500};
  app.add_option("--nats", nats_url, "nats:// URL of a JetStream server")->required();
  app.add_option("--url", url, "admin libpq URL (CREATE DATABASE)")->required();
  app.add_option("--messages", messages);
  app.add_option("--batch", batches)->delimiter(',');
  app.add_option("--replicas", replicas);
  app.add_option("--duplicates", duplicates);
  app.add_option("--batches-per-store", per_store,
                 "Most fetched batches one store takes while the previous one runs (1: none)");
  app.add_flag("--ack-all", ack_all,
               "Make the durable ack-all first (the source then acks a batch's last message)");
  std::string e2e_binary, sink_url;
  int http_port = 18633;
  app.add_option("--e2e-binary", e2e_binary, "queuebox binary: measure nats -> inbox -> HTTP");
  app.add_option("--sink-url", sink_url, "base URL of the HTTP sink (--e2e-binary)");
  app.add_option("--http-port", http_port, "queuebox data port (--e2e-binary)");
  CLI11_PARSE(app, argc, argv);

  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  if (natsConnection_ConnectTo(&nc, nats_url.c_str()) != NATS_OK ||
      natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) {
    std::fprintf(stderr, "cannot connect to %s\n", nats_url.c_str());
    return 1;
  }
  PGconn* admin = PQconnectdb(url.c_str());
  if (PQstatus(admin) != CONNECTION_OK) {
    std::fprintf(stderr, "%s", PQerrorMessage(admin));
    return 1;
  }
  int run = 0;
  for (int batch : batches) {
    const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(++run);
    const std::string db = "qb_nats_src_bench_" + tag, stream = "QBBENCH_" + tag,
                      subject = "qbbench." + tag;
    Exec(admin, "DROP DATABASE IF EXISTS " + db);
    if (!Exec(admin, "CREATE DATABASE " + db)) return 1;
    queuebox::DatabaseConfig dc;
    dc.type = "postgresql";
    dc.url = WithDatabase(url, db);
    dc.pool_size = 4 * replicas;
    auto store = queuebox::OpenStore(dc);
    if (!store.ok() || !(*store)->Migrate(std::nullopt).ok()) {
      std::fprintf(stderr, "cannot open or migrate %s\n", db.c_str());
      return 1;
    }

    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const std::string all = subject + ".>";
    const char* subjects[] = {all.c_str()};
    cfg.Name = stream.c_str();
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsErrCode jerr;
    if (js_AddStream(nullptr, js, &cfg, nullptr, &jerr) != NATS_OK) {
      std::fprintf(stderr, "cannot create stream %s (%d)\n", stream.c_str(), jerr);
      return 1;
    }
    const std::string to = subject + ".order";
    for (int i = 0; i < messages; ++i) {
      int id = (duplicates > 0 && i % duplicates == duplicates - 1) ? i - 1 : i;
      std::string body = "{\"id\":\"m-" + std::to_string(id) + "\",\"n\":" + std::to_string(i) +
                         ",\"type\":\"order.created\"}";
      if (js_PublishAsync(js, to.c_str(), body.data(), static_cast<int>(body.size()), nullptr) !=
          NATS_OK) {
        std::fprintf(stderr, "publish failed\n");
        return 1;
      }
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 60000;
    if (js_PublishAsyncComplete(js, &po) != NATS_OK) {
      std::fprintf(stderr, "publish did not complete\n");
      return 1;
    }

    if (ack_all) {
      jsConsumerConfig cc;
      jsConsumerConfig_Init(&cc);
      cc.Durable = "bench";
      cc.AckPolicy = js_AckAll;
      if (js_AddConsumer(nullptr, js, stream.c_str(), &cc, nullptr, &jerr) != NATS_OK) {
        std::fprintf(stderr, "cannot create the ack-all durable (%d)\n", jerr);
        return 1;
      }
    }
    if (!e2e_binary.empty()) {
      std::ostringstream yml;
      yml << "database: {type: postgresql, url: \"" << dc.url << "\"}\n"
          << "server: {address: 127.0.0.1, httpPort: " << http_port << "}\n"
          << "logging: {level: warn}\n"
          << "sources:\n  orders:\n    type: nats\n    servers: \"" << nats_url
          << "\"\n    stream: " << stream << "\n    durable: e2e\n    batchSize: " << batch << "\n"
          << "destinations:\n  sink: {type: http, baseUrl: \"" << sink_url << "\"}\n"
          << "routes:\n  - {topicPattern: orders, destination: sink}\n";
      queuebox::bench::E2eTimes t =
          queuebox::bench::RunQueueBoxUntilSent(e2e_binary, yml.str(), **store, messages);
      if (!t.ok) {
        std::fprintf(stderr, "e2e: %s\n", t.error.c_str());
        return 1;
      }
      std::printf(
          "{\"e2e\":\"nats -> inbox -> outbox -> http\",\"batch\":%d,\"messages\":%d,"
          "\"seconds_from_start\":%.3f,\"seconds_from_first_sent\":%.3f,"
          "\"messages_per_s\":%.0f}\n",
          batch, messages, t.seconds_from_start, t.seconds_from_first_sent,
          messages / t.seconds_from_start);
      std::fflush(stdout);
      store->reset();
      js_DeleteStream(js, stream.c_str(), nullptr, &jerr);
      Exec(admin, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
      continue;
    }
    queuebox::Metrics metrics;
    std::vector<std::unique_ptr<queuebox::sources::BrokerSource>> sources;
    for (int r = 0; r < replicas; ++r) {
      queuebox::NatsSourceSettings s;
      s.name = "bench";
      s.servers = nats_url;
      s.stream = stream;
      s.durable = "bench";
      s.batch_size = batch;
      s.max_batches_per_store = per_store;
      queuebox::sources::BrokerSourceContext ctx;
      ctx.intake = (*store)->inbox();
      ctx.observer = &metrics;
      auto made = queuebox::sources::CreateNatsSource(s, ctx);
      if (!made.ok()) {
        std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
        return 1;
      }
      sources.push_back(std::move(made).value());
    }
    const auto start = Clock::now();
    for (auto& s : sources) (void)s->Start();
    int64_t stored = 0, dup = 0;
    while (true) {
      std::string text = metrics.Render();
      stored = Counter(text, "queuebox_inbox_messages_total{status=\"new\"}");
      dup = Counter(text, "queuebox_inbox_messages_total{status=\"duplicate\"}");
      if (stored + dup >= messages) break;
      if (Clock::now() - start > std::chrono::minutes(10)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    for (auto& s : sources) s->Stop();
    std::printf(
        "{\"batch\":%d,\"batches_per_store\":%d,\"ack\":\"%s\",\"replicas\":%d,\"messages\":%d,"
        "\"stored\":%lld,"
        "\"duplicates\":%lld,"
        "\"seconds\":%.3f,\"messages_per_s\":%.0f}\n",
        batch, per_store, ack_all ? "all" : "explicit", replicas, messages,
        static_cast<long long>(stored), static_cast<long long>(dup), secs,
        static_cast<double>(stored + dup) / secs);
    std::fflush(stdout);
    sources.clear();
    store->reset();
    js_DeleteStream(js, stream.c_str(), nullptr, &jerr);
    Exec(admin, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  }
  PQfinish(admin);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return 0;
}
