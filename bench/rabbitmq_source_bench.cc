// rabbitmq_source_bench: messages/s from a RabbitMQ queue into the PostgreSQL inbox through the
// rabbitmq source (bench/README.md, "RabbitMQ source"; issue 15 goal: 10,000 msg/s).
//
//   rabbitmq_source_bench --pg-url postgresql://postgres@127.0.0.1:54329/postgres
//                         --amqp-url amqp://guest:guest@127.0.0.1:56729/
//                         [--messages 50000] [--prefetch 10,100,500] [--duplicates 10]
//
// For each prefetch: a fresh database migrated by the store, a fresh durable queue holding
// --messages persistent messages (payload {"id": "k-<i>", "n": i}; every --duplicates-th message
// repeats the previous id, so the dedup runs), then one rabbitmq source drains the backlog into
// the inbox (the inbox relay is not running). Prints one JSON line per run: deliveries/s from the
// first Store to the last, stored batches, rows. The publish rate is printed too (not the goal).
#if defined(QB_WITH_RABBITMQ)
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_run.h"
#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/store.h"
#include "sources/rabbitmq/rabbitmq_source.h"
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

// Counts what the source hands to the store, and when.
class CountingIntake final : public queuebox::InboxIntake {
 public:
  explicit CountingIntake(queuebox::InboxIntake* inner) : inner_(inner) {}
  queuebox::Result<std::vector<queuebox::InboxStoreOutcome>> Store(
      std::span<const queuebox::NewInboxMessage> messages) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_) first_ = Clock::now();
    }
    const auto began = Clock::now();
    auto r = inner_->Store(messages);
    if (r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      in_store_ += std::chrono::duration<double>(Clock::now() - began).count();
      stored_ += static_cast<int64_t>(messages.size());
      ++batches_;
      last_ = Clock::now();
    }
    return r;
  }
  int64_t stored() {
    std::lock_guard<std::mutex> lock(mu_);
    return stored_;
  }
  int64_t batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  // Time spent inside Store (the rest is the broker, the conversion and the acks).
  double store_seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_store_;
  }
  double seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_ ? std::chrono::duration<double>(last_ - *first_).count() : 0;
  }

 private:
  queuebox::InboxIntake* inner_;
  std::mutex mu_;
  int64_t stored_ = 0, batches_ = 0;
  double in_store_ = 0;
  std::optional<Clock::time_point> first_;
  Clock::time_point last_;
};

// The bench's own connection: declares, fills and deletes the queue.
class Publisher {
 public:
  explicit Publisher(const std::string& url) {
    std::vector<char> buf(url.begin(), url.end());
    buf.push_back('\0');
    amqp_connection_info info;
    amqp_parse_url(buf.data(), &info);
    std::string vhost = *info.vhost ? info.vhost : "/";
    c_ = amqp_new_connection();
    ok_ = amqp_socket_open(amqp_tcp_socket_new(c_), info.host, info.port) == AMQP_STATUS_OK &&
          amqp_login(c_, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                     info.password)
                  .reply_type == AMQP_RESPONSE_NORMAL;
    if (ok_) {
      amqp_channel_open(c_, 1);
      ok_ = amqp_get_rpc_reply(c_).reply_type == AMQP_RESPONSE_NORMAL;
    }
  }
  ~Publisher() {
    amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c_);
  }
  bool ok() const { return ok_; }
  bool Declare(const std::string& queue) {
    amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0, amqp_empty_table);
    return amqp_get_rpc_reply(c_).reply_type == AMQP_RESPONSE_NORMAL;
  }
  bool Publish(const std::string& queue, const std::string& body) {
    amqp_basic_properties_t props;
    std::memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
    props.delivery_mode = 2;
    props.content_type = amqp_cstring_bytes("application/json");
    return amqp_basic_publish(c_, 1, amqp_empty_bytes, amqp_cstring_bytes(queue.c_str()), 0, 0,
                              &props, amqp_bytes_t{body.size(), const_cast<char*>(body.data())}) ==
           AMQP_STATUS_OK;
  }
  // Ready messages (a passive declare; also waits until every publish reached the queue).
  int64_t Ready(const std::string& queue) {
    auto* ok =
        amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue.c_str()), 1, 1, 0, 0, amqp_empty_table);
    return ok != nullptr ? ok->message_count : -1;
  }
  void Delete(const std::string& queue) {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(queue.c_str()), 0, 0);
  }

 private:
  amqp_connection_state_t c_ = nullptr;
  bool ok_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("rabbitmq_source_bench");
  std::string pg_url, amqp_url;
  int messages = 50000, duplicates = 10;
  std::vector<int> prefetches = {10, 100, 500};
  app.add_option("--pg-url", pg_url, "admin libpq URL (CREATE DATABASE)")->required();
  app.add_option("--amqp-url", amqp_url, "RabbitMQ")->required();
  app.add_option("--messages", messages);
  app.add_option("--prefetch", prefetches)->delimiter(',');
  app.add_option("--duplicates", duplicates, "every n-th message repeats the previous id; 0: none");
  std::string e2e_binary, sink_url;
  int http_port = 18634;
  app.add_option("--e2e-binary", e2e_binary,
                 "queuebox binary: measure rabbitmq -> inbox -> outbox -> HTTP instead");
  app.add_option("--sink-url", sink_url, "base URL of the HTTP sink (--e2e-binary)");
  app.add_option("--http-port", http_port, "queuebox data port (--e2e-binary)");
  CLI11_PARSE(app, argc, argv);

  PGconn* admin = PQconnectdb(pg_url.c_str());
  if (PQstatus(admin) != CONNECTION_OK) {
    std::fprintf(stderr, "%s", PQerrorMessage(admin));
    return 1;
  }
  Publisher publisher(amqp_url);
  if (!publisher.ok()) {
    std::fprintf(stderr, "cannot connect to RabbitMQ\n");
    return 1;
  }
  for (const int prefetch : prefetches) {
    const std::string tag = std::to_string(getpid()) + "_" + std::to_string(prefetch);
    const std::string db = "qb_rmq_src_bench_" + tag, queue = "qb.rmq-src-bench." + tag;
    if (!Exec(admin, "CREATE DATABASE " + db)) return 1;
    queuebox::DatabaseConfig dbc;
    dbc.url = WithDatabase(pg_url, db);
    auto store = queuebox::OpenStore(dbc);
    if (!store.ok() || !(*store)->Migrate(std::nullopt).ok()) {
      std::fprintf(stderr, "store: %s\n",
                   store.ok() ? "migrate failed" : store.status().message().c_str());
      return 1;
    }
    if (!publisher.Declare(queue)) return 1;
    const auto publish_start = Clock::now();
    int64_t distinct = 0;
    for (int i = 0; i < messages; ++i) {
      const bool repeat = duplicates > 0 && i > 0 && i % duplicates == 0;
      if (!repeat) ++distinct;
      const int id = repeat ? i - 1 : i;
      if (!publisher.Publish(
              queue, "{\"id\":\"k-" + std::to_string(id) + "\",\"n\":" + std::to_string(i) + "}")) {
        return 1;
      }
    }
    while (publisher.Ready(queue) < messages)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double publish_s = std::chrono::duration<double>(Clock::now() - publish_start).count();

    if (!e2e_binary.empty()) {
      std::ostringstream yml;
      yml << "database: {type: postgresql, url: \"" << dbc.url << "\"}\n"
          << "server: {address: 127.0.0.1, httpPort: " << http_port << "}\n"
          << "logging: {level: warn}\n"
          << "sources:\n  orders:\n    type: rabbitmq\n    connectionUrl: \"" << amqp_url
          << "\"\n    queueName: " << queue << "\n    prefetchCount: " << prefetch << "\n"
          << "destinations:\n  sink: {type: http, baseUrl: \"" << sink_url << "\"}\n"
          << "routes:\n  - {topicPattern: orders, destination: sink}\n";
      queuebox::bench::E2eTimes t =
          queuebox::bench::RunQueueBoxUntilSent(e2e_binary, yml.str(), **store, distinct);
      store->reset();
      publisher.Delete(queue);
      Exec(admin, "DROP DATABASE " + db + " WITH (FORCE)");
      if (!t.ok) {
        std::fprintf(stderr, "e2e: %s\n", t.error.c_str());
        return 1;
      }
      std::ostringstream line;
      line << "{\"e2e\": \"rabbitmq -> inbox -> outbox -> http\", \"prefetch\": " << prefetch
           << ", \"messages\": " << messages << ", \"distinct\": " << distinct
           << ", \"seconds_from_start\": " << t.seconds_from_start
           << ", \"seconds_from_first_sent\": " << t.seconds_from_first_sent
           << ", \"msgs_per_s\": " << static_cast<int64_t>(messages / t.seconds_from_start) << "}";
      std::printf("%s\n", line.str().c_str());
      std::fflush(stdout);
      continue;
    }
    CountingIntake intake((*store)->inbox());
    queuebox::RabbitmqSourceSettings s;
    s.name = "bench";
    s.queue_name = queue;
    s.connection_url = amqp_url;
    s.prefetch_count = prefetch;
    queuebox::sources::BrokerSourceContext ctx;
    ctx.intake = &intake;
    auto source = queuebox::sources::CreateRabbitmqSource(s, ctx);
    if (!source.ok() || !(*source)->Start().ok()) {
      std::fprintf(stderr, "source did not start\n");
      return 1;
    }
    const auto start = Clock::now();
    while (intake.stored() < messages && Clock::now() - start < std::chrono::minutes(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    (*source)->Stop();
    const double seconds = intake.seconds();
    PGconn* conn = PQconnectdb(dbc.url.c_str());
    PGresult* r = PQexec(conn, "SELECT count(*) FROM inbox");
    const std::string rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "-1";
    PQclear(r);
    PQfinish(conn);
    store->reset();
    publisher.Delete(queue);
    Exec(admin, "DROP DATABASE " + db);
    std::ostringstream line;
    line << "{\"prefetch\": " << prefetch << ", \"messages\": " << messages
         << ", \"distinct\": " << distinct << ", \"rows\": " << rows
         << ", \"stored_deliveries\": " << intake.stored() << ", \"batches\": " << intake.batches()
         << ", \"seconds\": " << seconds << ", \"store_seconds\": " << intake.store_seconds()
         << ", \"msgs_per_s\": "
         << (seconds > 0 ? static_cast<int64_t>(static_cast<double>(intake.stored()) / seconds) : 0)
         << ", \"publish_msgs_per_s\": " << static_cast<int64_t>(messages / publish_s) << "}";
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
  }
  PQfinish(admin);
  return 0;
}

#else
#include <cstdio>
int main() {
  std::fprintf(stderr, "rabbitmq_source_bench: built without RabbitMQ (QUEUEBOX_WITH_RABBITMQ)\n");
  return 1;
}
#endif
