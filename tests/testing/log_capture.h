// log_capture.h: the relay's log lines written while a LogCapture lives (log::SetSinkForTesting),
// for tests that check what is logged (one WARN per outage, no secret in any line).
//
// Lines are the JSON lines the relay writes (log format "json"). One capture at a time per
// process: the constructor replaces the sink and the destructor removes it.
// Thread-safety: lines may be written from any thread; the accessors lock. The sink owns the
// lines it writes to (a shared_ptr), so a thread that took the sink just before the destructor ran
// writes to live memory.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"

namespace queuebox::testing {

class LogCapture {
 public:
  // `debug`: the DEBUG lines too (log level debug while the capture lives, info after).
  explicit LogCapture(bool debug = false) : debug_(debug) {
    if (debug_) log::Init("json", "debug");
    log::SetSinkForTesting([lines = lines_](std::string_view line) {
      std::lock_guard<std::mutex> lock(lines->mu);
      lines->all.emplace_back(line);
    });
  }
  ~LogCapture() {
    log::SetSinkForTesting(nullptr);
    if (debug_) log::Init("json", "info");
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> Lines() const {
    std::lock_guard<std::mutex> lock(lines_->mu);
    return lines_->all;
  }
  // Every line, each followed by a newline (for failure messages).
  std::string All() const {
    std::string out;
    for (const std::string& line : Lines()) out += line + "\n";
    return out;
  }
  // Lines holding every one of `parts`.
  int Count(std::initializer_list<std::string_view> parts) const {
    int n = 0;
    for (const std::string& line : Lines()) {
      bool all = true;
      for (std::string_view part : parts) all = all && line.find(part) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
  int Count(std::string_view text) const { return Count({text}); }
  bool Has(std::string_view text) const { return Count(text) > 0; }
  // The lines whose "message" field is `message`, parsed.
  std::vector<nlohmann::json> WithMessage(const std::string& message) const {
    std::vector<nlohmann::json> out;
    for (const std::string& line : Lines()) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("message", "") == message) out.push_back(j);
    }
    return out;
  }
  // Fails the test for each line holding one of `secrets`.
  void ExpectNoneContains(const std::vector<std::string>& secrets) const {
    for (const std::string& line : Lines()) {
      for (const std::string& secret : secrets) {
        EXPECT_EQ(line.find(secret), std::string::npos) << "'" << secret << "' logged: " << line;
      }
    }
  }

 private:
  struct Captured {
    std::mutex mu;
    std::vector<std::string> all;
  };
  const bool debug_;
  const std::shared_ptr<Captured> lines_ = std::make_shared<Captured>();
};

}  // namespace queuebox::testing
