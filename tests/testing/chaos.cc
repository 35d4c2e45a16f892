#include "testing/chaos.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "testing/http_receiver.h"

namespace queuebox::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string WithTimeout(const std::string& url) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "connect_timeout=2";
}

// A connection, or nullptr when the database does not answer.
PGconn* Open(const std::string& url) {
  PGconn* c = PQconnectdb(WithTimeout(url).c_str());
  if (PQstatus(c) == CONNECTION_OK) return c;
  PQfinish(c);
  return nullptr;
}

std::string Seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

std::optional<int64_t> QueryInt(const std::string& url, const std::string& sql) {
  PGconn* c = Open(url);
  if (c == nullptr) return std::nullopt;
  PGresult* r = PQexec(c, sql.c_str());
  std::optional<int64_t> out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
    out = std::stoll(PQgetvalue(r, 0, 0));
  }
  PQclear(r);
  PQfinish(c);
  return out;
}

bool ExecSql(const std::string& url, const std::string& sql) {
  PGconn* c = Open(url);
  if (c == nullptr) {
    ADD_FAILURE() << "cannot connect to " << url;
    return false;
  }
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  EXPECT_TRUE(ok) << PQerrorMessage(c) << " in " << sql;
  PQclear(r);
  PQfinish(c);
  return ok;
}

RowProducer::RowProducer(ProducerOptions options) : options_(std::move(options)) {
  for (int t = 0; t < options_.threads; ++t) threads_.emplace_back([this, t] { Produce(t); });
}

RowProducer::~RowProducer() { Stop(); }

void RowProducer::Join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void RowProducer::Stop() {
  stop_ = true;
  Join();
}

void RowProducer::Produce(int thread) {
  std::vector<int> keys;
  for (int k = thread; k < options_.keys; k += options_.threads) keys.push_back(k);
  if (keys.empty()) return;
  const int share = options_.max_rows / options_.threads +
                    (thread < options_.max_rows % options_.threads ? 1 : 0);
  // Each thread paces itself to its part of the rate.
  const auto interval =
      options_.rows_per_second > 0
          ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                static_cast<double>(options_.threads) / options_.rows_per_second))
          : Clock::duration::zero();
  std::vector<int> next_n(keys.size(), 0);
  PGconn* conn = nullptr;
  auto next_at = Clock::now();
  for (int i = 0; !stop_ && (options_.max_rows == 0 || i < share); ++i) {
    const size_t slot = static_cast<size_t>(i) % keys.size();
    const std::string key = "key-" + std::to_string(keys[slot]);
    const std::string sql = "INSERT INTO outbox (topic, key, payload) VALUES ('" + options_.topic +
                            "', '" + key + "', '{\"key\": \"" + key +
                            "\", \"n\": " + std::to_string(next_n[slot]) + "}')";
    bool done = false;
    while (!done && !stop_) {
      if (conn == nullptr && (conn = Open(options_.url)) == nullptr) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the server restarts
        continue;
      }
      PGresult* r = PQexec(conn, sql.c_str());
      done = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (done) break;
      if (PQstatus(conn) == CONNECTION_OK) {
        ADD_FAILURE() << "insert failed: " << PQerrorMessage(conn) << " in " << sql;
        stop_ = true;
        break;
      }
      PQfinish(conn);
      conn = nullptr;
      ++reconnects_;
    }
    if (!done) break;
    ++next_n[slot];
    ++inserted_;
    if (interval > Clock::duration::zero()) {
      next_at += interval;
      std::this_thread::sleep_until(next_at);  // pacing, not synchronisation
    }
  }
  PQfinish(conn);
}

ReplicaSet::ReplicaSet(std::string binary, std::string config, std::string log_dir, int count)
    : binary_(std::move(binary)), config_(std::move(config)), log_dir_(std::move(log_dir)) {
  current_.resize(static_cast<size_t>(count));
  current_logs_.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < current_.size(); ++i) StartOne(i);
}

ReplicaSet::~ReplicaSet() = default;  // ~ChildProcess kills and reaps

void ReplicaSet::StartOne(size_t slot) {
  current_logs_[slot] = log_dir_ + "/replica" + std::to_string(started_++) + ".log";
  current_[slot] = std::make_unique<ChildProcess>(
      binary_, std::vector<std::string>{"--config", config_, "run"},
      std::map<std::string, std::string>{
          {"QUEUEBOX_SERVER_HTTPPORT", std::to_string(UnusedLoopbackPort())}},
      current_logs_[slot]);
}

void ReplicaSet::KillAndReplace(size_t index) {
  if (!current_[index]->running()) {
    exited_early_.push_back(current_logs_[index] + ":\n" + current_[index]->Log());
  }
  current_[index]->Kill(SIGKILL);
  current_[index]->Wait(std::chrono::seconds(10));
  StartOne(index);
}

size_t ReplicaSet::KillOneAndReplace(std::mt19937& random) {
  size_t index = std::uniform_int_distribution<size_t>(0, current_.size() - 1)(random);
  KillAndReplace(index);
  return index;
}

std::vector<std::optional<int>> ReplicaSet::StopAll(std::chrono::seconds timeout) {
  for (auto& r : current_) r->Kill(SIGTERM);
  std::vector<std::optional<int>> codes;
  for (auto& r : current_) {
    codes.push_back(r->Wait(timeout));
    if (!codes.back()) r->Kill(SIGKILL);
  }
  return codes;
}

std::string ReplicaSet::LogTails(size_t bytes) const {
  std::string out;
  for (size_t i = 0; i < current_.size(); ++i) {
    std::string log = current_[i]->Log();
    if (log.size() > bytes) log = log.substr(log.size() - bytes);
    out += "--- " + current_logs_[i] + "\n" + log + "\n";
  }
  return out;
}

std::string ChaosReport::Timeline() const {
  std::string out;
  for (const auto& line : timeline) out += line + "\n";
  return out;
}

ChaosReport RunChaos(ReplicaSet& replicas, std::chrono::seconds duration,
                     std::vector<ChaosEvent> events, std::mt19937& random) {
  ChaosReport report;
  std::mutex mu;
  const auto start = Clock::now();
  auto note = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    report.timeline.push_back(Seconds(Clock::now() - start) + " " + line);
  };
  std::thread timed([&] {
    for (auto& e : events) {
      std::this_thread::sleep_until(start + e.at);  // the schedule itself
      Status st = e.action();
      note(e.name + ": " + (st.ok() ? "ok" : st.ToString()));
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        report.failures.push_back(e.name + ": " + st.ToString());
      }
    }
  });
  std::uniform_int_distribution<int> pause_ms(1000, 3000);
  auto next = start + std::chrono::milliseconds(pause_ms(random));
  while (next < start + duration) {
    std::this_thread::sleep_until(next);  // the schedule itself
    size_t index = replicas.KillOneAndReplace(random);
    ++report.kills;
    note("SIGKILL replica slot " + std::to_string(index) + ", replaced");
    next += std::chrono::milliseconds(pause_ms(random));
  }
  timed.join();
  return report;
}

std::vector<OutboxRowRef> ReadRows(const std::string& url, const std::string& topic) {
  std::vector<OutboxRowRef> rows;
  PGconn* c = Open(url);
  if (c == nullptr) {
    ADD_FAILURE() << "cannot connect to " << url;
    return rows;
  }
  PGresult* r = PQexec(c, ("SELECT id, coalesce(key, ''), sequence FROM outbox WHERE topic = '" +
                           topic + "' ORDER BY sequence")
                              .c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(c);
  for (int i = 0; i < PQntuples(r); ++i) {
    rows.push_back(
        {PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), topic, std::stoll(PQgetvalue(r, i, 2))});
  }
  PQclear(r);
  PQfinish(c);
  return rows;
}

std::string DeliveryCheck::Summary() const {
  std::ostringstream out;
  out << rows << " rows, " << deliveries << " deliveries, " << received_rows << " rows received, "
      << duplicates << " duplicates (at most " << max_copies << " copies of a row), "
      << missing.size() << " missing, " << unknown << " unknown ids, " << order_violations.size()
      << " first deliveries out of key order";
  for (size_t i = 0; i < missing.size() && i < 5; ++i) out << "\n  missing " << missing[i];
  for (size_t i = 0; i < order_violations.size() && i < 5; ++i) {
    out << "\n  " << order_violations[i];
  }
  return out.str();
}

DeliveryCheck CheckDeliveries(const std::vector<OutboxRowRef>& rows,
                              const std::vector<std::string>& delivered_ids) {
  DeliveryCheck check;
  check.rows = rows.size();
  check.deliveries = delivered_ids.size();
  std::unordered_map<std::string, size_t> first;  // id -> position of its first delivery
  std::unordered_map<std::string, size_t> copies;
  std::unordered_map<std::string, bool> known;
  for (const auto& r : rows) known[r.id] = true;
  for (size_t i = 0; i < delivered_ids.size(); ++i) {
    const std::string& id = delivered_ids[i];
    if (!known.count(id)) {
      ++check.unknown;
      continue;
    }
    first.emplace(id, i);
    check.max_copies = std::max(check.max_copies, ++copies[id]);
  }
  check.received_rows = first.size();
  check.duplicates = check.deliveries - check.unknown - check.received_rows;
  std::map<std::string, std::pair<int64_t, size_t>> last;  // key -> (sequence, first position)
  for (const auto& r : rows) {                             // in sequence order
    auto f = first.find(r.id);
    if (f == first.end()) {
      check.missing.push_back(r.id);
      continue;
    }
    if (r.key.empty()) continue;
    auto [it, fresh] = last.emplace(r.key, std::make_pair(r.sequence, f->second));
    if (!fresh) {
      if (f->second < it->second.second) {
        check.order_violations.push_back(r.key + ": sequence " + std::to_string(r.sequence) +
                                         " first delivered before sequence " +
                                         std::to_string(it->second.first));
      }
      it->second = {r.sequence, f->second};
    }
  }
  return check;
}

void WriteReceivedRecord(const std::string& path, const std::vector<OutboxRowRef>& rows,
                         const std::vector<std::string>& delivered_ids) {
  std::unordered_map<std::string, const OutboxRowRef*> by_id;
  for (const auto& r : rows) by_id[r.id] = &r;
  std::ofstream out(path);
  for (const auto& id : delivered_ids) {
    nlohmann::json line = {{"id", id}, {"attempt", nullptr}, {"time", "-"}};
    auto it = by_id.find(id);
    line["key"] = it != by_id.end() ? nlohmann::json(it->second->key) : nlohmann::json(nullptr);
    line["topic"] = it != by_id.end() ? nlohmann::json(it->second->topic) : nlohmann::json(nullptr);
    out << line.dump() << "\n";
  }
}

}  // namespace queuebox::testing
