// broker_servers.h: test-side broker fixtures shared by the broker tests (header-only: the test
// binaries get the client libraries through qb_destinations; qb_testing links none).
//   MockKafkaCluster     librdkafka's in-process mock cluster on 127.0.0.1 (QB_WITH_KAFKA)
//   JetStreamTestStream  a JetStream stream created for one test and deleted after (QB_WITH_NATS)
//   PrivateNatsServer    a nats-server of one test (JetStream on) on a given loopback port, for
//                        a broker that comes up after the relay started or restarts (Stop,
//                        Start); never the shared one
//
// Thread-safety: use from the test thread.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testing/process.h"

#if defined(QB_WITH_KAFKA)
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#endif
#if defined(QB_WITH_NATS)
#include <nats/nats.h>
#endif

namespace queuebox::testing {

// `nats-server -js` on 127.0.0.1:<port> with its store in a temporary folder; stopped (SIGTERM,
// then reaped) by the destructor. Start() waits until the port accepts connections.
class PrivateNatsServer {
 public:
  explicit PrivateNatsServer(int port) : port_(port) {}
  ~PrivateNatsServer() { Stop(); }
  // Stops the server (SIGTERM, reaped); its JetStream store stays, so Start() again brings the
  // same streams back on the same port (a broker restart).
  void Stop() {
    if (process_) {
      process_->Kill(SIGTERM);
      if (!process_->Wait(std::chrono::seconds(10))) process_->Kill(SIGKILL);
      process_.reset();
    }
  }
  bool Start() {
    process_ = std::make_unique<ChildProcess>(
        NatsServerPath(),
        std::vector<std::string>{"-a", "127.0.0.1", "-p", std::to_string(port_), "-js", "-sd",
                                 dir_.File("js")},
        std::map<std::string, std::string>{}, dir_.File("nats.log"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!process_->running()) return false;
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return process_ ? process_->Log() : ""; }

  // nats-server's path on PATH (ChildProcess execs a path; Debian installs it in /usr/sbin).
  static std::string NatsServerPath() {
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "/usr/sbin:/usr/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string candidate = dirs.substr(start, end - start) + "/nats-server";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
    return "/usr/sbin/nats-server";
  }

 private:
  int port_;
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
};

#if defined(QB_WITH_KAFKA)
// `brokers` mock brokers, owned by a silent producer handle.
class MockKafkaCluster {
 public:
  explicit MockKafkaCluster(int brokers = 3) {
    char err[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    host_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    cluster_ = rd_kafka_mock_cluster_new(host_, brokers);
  }
  ~MockKafkaCluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(host_);
  }
  rd_kafka_mock_cluster_t* get() { return cluster_; }
  std::string bootstraps() { return rd_kafka_mock_cluster_bootstraps(cluster_); }

 private:
  rd_kafka_t* host_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

#endif  // QB_WITH_KAFKA

#if defined(QB_WITH_NATS)
struct StoredNatsMessage {
  std::string subject, body;
  std::map<std::string, std::string> headers;
};

// A helper connection that owns one test stream (file storage) over "<prefix>.>"; deleted by
// the destructor.
class JetStreamTestStream {
 public:
  JetStreamTestStream(const std::string& url, const std::string& name, const std::string& prefix)
      : name_(name) {
    EXPECT_EQ(natsConnection_ConnectTo(&nc_, url.c_str()), NATS_OK);
    EXPECT_EQ(natsConnection_JetStream(&js_, nc_, nullptr), NATS_OK);
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    subject_ = prefix + ".>";
    const char* subjects[] = {subject_.c_str()};
    cfg.Name = name_.c_str();
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsStreamInfo* si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    EXPECT_EQ(js_AddStream(&si, js_, &cfg, nullptr, &jerr), NATS_OK) << jerr;
    jsStreamInfo_Destroy(si);
  }
  ~JetStreamTestStream() {
    jsErrCode jerr;
    js_DeleteStream(js_, name_.c_str(), nullptr, &jerr);
    jsCtx_Destroy(js_);
    natsConnection_Destroy(nc_);
  }

  uint64_t Count() {
    jsStreamInfo* si = nullptr;
    jsErrCode jerr;
    if (js_GetStreamInfo(&si, js_, name_.c_str(), nullptr, &jerr) != NATS_OK) return 0;
    uint64_t n = si->State.Msgs;
    jsStreamInfo_Destroy(si);
    return n;
  }

  StoredNatsMessage Get(uint64_t seq) {
    natsMsg* m = nullptr;
    jsErrCode jerr;
    StoredNatsMessage s;
    if (js_GetMsg(&m, js_, name_.c_str(), seq, nullptr, &jerr) != NATS_OK) return s;
    s.subject = natsMsg_GetSubject(m);
    s.body.assign(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)));
    const char** keys = nullptr;
    int count = 0;
    if (natsMsgHeader_Keys(m, &keys, &count) == NATS_OK) {
      for (int i = 0; i < count; ++i) {
        const char* v = nullptr;
        natsMsgHeader_Get(m, keys[i], &v);
        s.headers[keys[i]] = v ? v : "";
      }
      free(static_cast<void*>(keys));
    }
    natsMsg_Destroy(m);
    return s;
  }

  natsConnection* nc() { return nc_; }

 private:
  std::string name_, subject_;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

#endif  // QB_WITH_NATS

}  // namespace queuebox::testing
