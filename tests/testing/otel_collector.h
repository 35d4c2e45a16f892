// otel_collector.h: the OTLP collector stand-in (tests/judges/otel/collector.js) for the tracing
// tests: node on a free loopback port, which decodes each export with the OpenTelemetry
// project's own protobuf definitions and appends one JSON line per span (traceId, spanId,
// parentSpanId, traceState, name, kind, attributes, status, resource, auth). Header-only; a test
// target that includes it is named tracing* (tests/CMakeLists.txt gives it QB_NODE and
// QB_OTEL_COLLECTOR_JS).
#pragma once

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/broker_testing.h"
#include "testing/process.h"

namespace queuebox::testing {

// The collector on a free port; Spans() reads what it decoded so far.
class OtelCollector {
 public:
  explicit OtelCollector(int status = 200) {
    process_ = std::make_unique<ChildProcess>(
        QB_NODE,
        std::vector<std::string>{QB_OTEL_COLLECTOR_JS, "--port-file", dir_.File("port"), "--out",
                                 dir_.File("spans.jsonl"), "--status", std::to_string(status)},
        std::map<std::string, std::string>{}, dir_.File("collector.log"));
    WaitUntil([&] { return std::ifstream(dir_.File("port")).good(); }, std::chrono::seconds(20));
    std::ifstream in(dir_.File("port"));
    in >> port_;
  }
  std::string Endpoint() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces";
  }
  std::vector<nlohmann::json> Spans() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_.File("spans.jsonl"));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  int port() const { return port_; }

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace queuebox::testing
