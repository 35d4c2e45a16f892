// broker_fixture: the broker-side setup and delivery count for bench/run_broker_bench.sh.
//
//   broker_fixture rabbitmq setup|count|delete --url AMQP_URL --exchange E --queue Q
//                  [--queue-type classic|cqv2|quorum]
//     setup: declares E (topic, durable), a durable queue Q of that type (classic: no arguments;
//     cqv2: x-queue-version 2; quorum: x-queue-type quorum) and binds Q to E with "#", so every
//     message the relay publishes (mandatory flag + confirms) is routable.
//     count: prints the queue's message count (passive declare). delete: deletes Q and E.
//   broker_fixture nats setup|count|delete --url NATS_URL --stream S --subject SUBJ
//     setup: creates JetStream stream S (file storage) over SUBJ. count: prints its message
//     count. delete: deletes S.
//   broker_fixture kafka serve --topic T --partitions N
//     Starts librdkafka's mock cluster (3 brokers on 127.0.0.1, this process), creates T, prints
//     the bootstrap list on one line, then waits for SIGTERM/SIGINT; on it prints the number of
//     records in T (sum of high watermarks) and exits.
//
// Counts go to stdout as one integer per line; errors to stderr with exit code 1.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "broker_fixture: %s\n", what.c_str());
  return 1;
}

// ---- RabbitMQ ----
bool RpcOk(amqp_connection_state_t c) {
  return amqp_get_rpc_reply(c).reply_type == AMQP_RESPONSE_NORMAL;
}

// The queue.declare arguments of a queue type (bench/rabbitmq_ceiling.c declares the same).
amqp_table_t QueueArguments(const std::string& type, amqp_table_entry_t& entry) {
  if (type == "cqv2") {
    entry.key = amqp_cstring_bytes("x-queue-version");
    entry.value.kind = AMQP_FIELD_KIND_I32;
    entry.value.value.i32 = 2;
  } else if (type == "quorum") {
    entry.key = amqp_cstring_bytes("x-queue-type");
    entry.value.kind = AMQP_FIELD_KIND_UTF8;
    entry.value.value.bytes = amqp_cstring_bytes("quorum");
  } else {
    return amqp_empty_table;
  }
  return amqp_table_t{1, &entry};
}

int Rabbit(const std::string& action, const std::string& url, const std::string& exchange,
           const std::string& queue, const std::string& queue_type) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  if (amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK) return Fail("bad AMQP url");
  std::string vhost = *info.vhost ? info.vhost : "/";
  amqp_connection_state_t c = amqp_new_connection();
  amqp_socket_t* sock = amqp_tcp_socket_new(c);
  if (amqp_socket_open(sock, info.host, info.port) != AMQP_STATUS_OK) return Fail("AMQP connect");
  if (amqp_login(c, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
          .reply_type != AMQP_RESPONSE_NORMAL) {
    return Fail("AMQP login");
  }
  amqp_channel_open(c, 1);
  int rc = 0;
  if (action == "setup") {
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes("topic"),
                          0, 1, 0, 0, amqp_empty_table);
    if (!RpcOk(c)) return Fail("exchange.declare");
    amqp_table_entry_t entry{};
    amqp_queue_declare(c, 1, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0,
                       QueueArguments(queue_type, entry));
    if (!RpcOk(c)) return Fail("queue.declare");
    amqp_queue_bind(c, 1, amqp_cstring_bytes(queue.c_str()), amqp_cstring_bytes(exchange.c_str()),
                    amqp_cstring_bytes("#"), amqp_empty_table);
    if (!RpcOk(c)) return Fail("queue.bind");
  } else if (action == "count") {
    amqp_queue_declare_ok_t* ok =
        amqp_queue_declare(c, 1, amqp_cstring_bytes(queue.c_str()), 1, 0, 0, 0, amqp_empty_table);
    if (ok == nullptr) return Fail("queue.declare passive");
    std::printf("%u\n", ok->message_count);
  } else if (action == "delete") {
    amqp_queue_delete(c, 1, amqp_cstring_bytes(queue.c_str()), 0, 0);
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(exchange.c_str()), 0);
    rc = RpcOk(c) ? 0 : Fail("delete");
  } else {
    rc = Fail("unknown action " + action);
  }
  amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(c, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(c);
  return rc;
}

// ---- NATS JetStream ----
int Nats(const std::string& action, const std::string& url, const std::string& stream,
         const std::string& subject) {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) return Fail("NATS connect");
  if (natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) return Fail("JetStream context");
  jsErrCode jerr = static_cast<jsErrCode>(0);
  int rc = 0;
  if (action == "setup") {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char* subjects[] = {subject.c_str()};
    cfg.Name = stream.c_str();
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsStreamInfo* si = nullptr;
    if (js_AddStream(&si, js, &cfg, nullptr, &jerr) != NATS_OK) {
      rc = Fail("js_AddStream: " + std::to_string(jerr));
    }
    jsStreamInfo_Destroy(si);
  } else if (action == "count") {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &jerr) != NATS_OK) {
      rc = Fail("js_GetStreamInfo: " + std::to_string(jerr));
    } else {
      std::printf("%llu\n", static_cast<unsigned long long>(si->State.Msgs));
      jsStreamInfo_Destroy(si);
    }
  } else if (action == "delete") {
    if (js_DeleteStream(js, stream.c_str(), nullptr, &jerr) != NATS_OK) {
      rc = Fail("js_DeleteStream: " + std::to_string(jerr));
    }
  } else {
    rc = Fail("unknown action " + action);
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return rc;
}

// ---- Kafka mock cluster ----
int KafkaServe(const std::string& topic, int partitions) {
  // Block the stop signals before librdkafka starts its threads, so sigwait() receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (host == nullptr) return Fail(err);
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(host, 3);
  if (cluster == nullptr) return Fail("rd_kafka_mock_cluster_new");
  if (rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1) !=
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Fail("rd_kafka_mock_topic_create");
  }
  std::string bootstraps = rd_kafka_mock_cluster_bootstraps(cluster);

  std::printf("%s\n", bootstraps.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);

  // Count with a client of the mock cluster: sum of the partitions' high watermarks.
  rd_kafka_conf_t* cconf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(cconf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_conf_set(cconf, "bootstrap.servers", bootstraps.c_str(), err, sizeof err);
  rd_kafka_t* client = rd_kafka_new(RD_KAFKA_PRODUCER, cconf, err, sizeof err);
  if (client == nullptr) return Fail(err);
  int64_t total = 0;
  int rc = 0;
  for (int p = 0; p < partitions; ++p) {
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(client, topic.c_str(), p, &lo, &hi, 10000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rc = Fail(std::string("watermarks: ") + rd_kafka_err2str(e));
      break;
    }
    total += hi - lo;
  }
  if (rc == 0) std::printf("%lld\n", static_cast<long long>(total));
  std::fflush(stdout);
  rd_kafka_destroy(client);
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(host);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"broker setup and delivery counts for run_broker_bench.sh"};
  app.require_subcommand(1);
  std::string action, url, exchange, queue, stream, subject, topic, queue_type = "classic";
  int partitions = 12;
  auto* rabbit = app.add_subcommand("rabbitmq", "exchange + bound durable queue");
  rabbit->add_option("action", action)
      ->required()
      ->check(CLI::IsMember({"setup", "count", "delete"}));
  rabbit->add_option("--url", url)->required();
  rabbit->add_option("--exchange", exchange)->required();
  rabbit->add_option("--queue", queue)->required();
  rabbit->add_option("--queue-type", queue_type)
      ->check(CLI::IsMember({"classic", "cqv2", "quorum"}));
  auto* nats = app.add_subcommand("nats", "JetStream stream");
  nats->add_option("action", action)
      ->required()
      ->check(CLI::IsMember({"setup", "count", "delete"}));
  nats->add_option("--url", url)->required();
  nats->add_option("--stream", stream)->required();
  nats->add_option("--subject", subject);
  auto* kafka = app.add_subcommand("kafka", "librdkafka mock cluster");
  kafka->add_option("action", action)->required()->check(CLI::IsMember({"serve"}));
  kafka->add_option("--topic", topic)->required();
  kafka->add_option("--partitions", partitions);
  CLI11_PARSE(app, argc, argv);
  if (*rabbit) return Rabbit(action, url, exchange, queue, queue_type);
  if (*nats) return Nats(action, url, stream, subject);
  return KafkaServe(topic, partitions);
}
