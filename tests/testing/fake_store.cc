#include "testing/fake_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

namespace queuebox::testing {
namespace {

std::string NewUuid() {
  static std::mutex mu;
  static std::mt19937_64 gen(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  uint64_t a = gen(), b = gen();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

}  // namespace

int64_t FakeStore::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         skew_ms_.load();
}

FakeStore::Row* FakeStore::Find(const std::string& id) {
  for (auto& r : rows_) {
    if (r.row.id == id) return &r;
  }
  return nullptr;
}

bool FakeStore::Owned(const Row& r, const Fence& f) const {
  return r.state == "processing" && !f.claim_token.empty() && r.row.claim_token == f.claim_token &&
         r.lease_expires_at_ms > NowMs();
}

#define QB_FAKE_DOWN_CHECK()                              \
  if (down_) return Unavailable("fake database is down"); \
  ++statements_

Status FakeStore::Ping() {
  if (down_) return Unavailable("fake database is down");
  return Status::Ok();
}

Result<std::vector<OutboxRow>> FakeStore::Claim(int limit, int64_t lease_ms) {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowMs();
  std::vector<Row*> candidates;
  for (auto& r : rows_) {
    if (r.state != "pending" || r.scheduled_at_ms > now) continue;
    if (r.row.ordered()) {
      bool blocked = false;
      for (auto& p : rows_) {
        if (p.row.key == r.row.key && p.row.sequence < r.row.sequence &&
            (p.state == "pending" || p.state == "processing")) {
          blocked = true;
          break;
        }
      }
      if (blocked) continue;
    }
    candidates.push_back(&r);
  }
  std::sort(candidates.begin(), candidates.end(), [](Row* a, Row* b) {
    return std::tie(a->scheduled_at_ms, a->row.sequence) <
           std::tie(b->scheduled_at_ms, b->row.sequence);
  });
  std::vector<OutboxRow> out;
  for (Row* r : candidates) {
    if (static_cast<int>(out.size()) >= limit) break;
    r->state = "processing";
    r->row.claim_token = NewUuid();
    r->lease_expires_at_ms = now + lease_ms;
    r->updated_at_ms = now;
    out.push_back(r->row);
  }
  return out;
}

// The fence rule shared by every terminal write and renewal: apply `change` to each row still
// owned through its fence and return the ids that changed (one "statement" per batch).
template <typename Order, typename FenceOf, typename Change>
Result<std::vector<std::string>> FakeStore::ApplyFenced(std::span<const Order> orders,
                                                        FenceOf fence_of, Change change) {
  if (orders.empty()) return std::vector<std::string>{};
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ids;
  for (const auto& o : orders) {
    const Fence& f = fence_of(o);
    Row* r = Find(f.id);
    if (r == nullptr || !Owned(*r, f)) continue;
    change(*r, o);
    ids.push_back(f.id);
  }
  return ids;
}

Result<std::vector<std::string>> FakeStore::MarkSent(std::span<const Fence> fences) {
  return ApplyFenced(
      fences, [](const Fence& f) -> const Fence& { return f; },
      [this](Row& r, const Fence&) {
        r.state = "sent";
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::ScheduleRetry(std::span<const RetryOrder> orders) {
  return ApplyFenced(
      orders, [](const RetryOrder& o) -> const Fence& { return o.fence; },
      [this](Row& r, const RetryOrder& o) {
        r.state = "pending";
        r.row.attempt += 1;
        r.scheduled_at_ms = NowMs() + o.delay_ms;
        r.last_error = o.error;
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::MarkDead(std::span<const DeadOrder> orders) {
  return ApplyFenced(
      orders, [](const DeadOrder& o) -> const Fence& { return o.fence; },
      [this](Row& r, const DeadOrder& o) {
        r.state = "dead";
        r.last_error = o.error;
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::Renew(std::span<const Fence> fences, int64_t lease_ms) {
  return ApplyFenced(
      fences, [](const Fence& f) -> const Fence& { return f; },
      [this, lease_ms](Row& r, const Fence&) { r.lease_expires_at_ms = NowMs() + lease_ms; });
}

Result<int64_t> FakeStore::ReclaimExpired() {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (auto& r : rows_) {
    if (r.state == "processing" && r.lease_expires_at_ms <= NowMs()) {
      r.state = "pending";
      r.updated_at_ms = NowMs();
      ++n;
    }
  }
  return n;
}

Result<std::string> FakeStore::Insert(const NewOutboxRow& in) {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  Row r;
  r.row.id = in.id.value_or(NewUuid());
  r.row.topic = in.topic;
  r.row.key = in.key;
  r.row.payload = in.payload;
  r.row.headers = in.headers.value_or("{}");
  r.row.aggregate_type = in.aggregate_type;
  r.row.max_attempts = in.max_attempts.value_or(5);
  r.row.sequence = next_sequence_++;
  r.scheduled_at_ms = NowMs() + in.delay_ms.value_or(0);
  r.updated_at_ms = NowMs();
  rows_.push_back(r);
  return r.row.id;
}

Result<OutboxStats> FakeStore::Stats() {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  OutboxStats s;
  for (auto& r : rows_) {
    s.rows_by_state[r.state]++;
    if (r.state == "dead") s.dead_by_topic[r.row.topic]++;
  }
  return s;
}

Result<std::vector<std::string>> FakeStore::DistinctTopics() {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> t;
  for (auto& r : rows_) {
    if (std::find(t.begin(), t.end(), r.row.topic) == t.end()) t.push_back(r.row.topic);
  }
  return t;
}

Result<int64_t> FakeStore::Replay(const ReplayFilter& filter) {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (auto& r : rows_) {
    if (r.state != "sent" && r.state != "dead") continue;
    if (filter.ids &&
        std::find(filter.ids->begin(), filter.ids->end(), r.row.id) == filter.ids->end()) {
      continue;
    }
    if (filter.topics && std::find(filter.topics->begin(), filter.topics->end(), r.row.topic) ==
                             filter.topics->end()) {
      continue;
    }
    r.state = "pending";
    r.row.attempt = 0;
    r.scheduled_at_ms = NowMs();
    r.last_error.clear();
    ++n;
  }
  return n;
}

Result<std::vector<DeadRow>> FakeStore::ListDead(int limit) {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeadRow> out;
  for (auto& r : rows_) {
    if (r.state == "dead" && static_cast<int>(out.size()) < limit) {
      out.push_back({r.row.id, r.row.topic, r.row.key, r.row.attempt, r.last_error, ""});
    }
  }
  return out;
}

Result<int64_t> FakeStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                           int batch) {
  if (state != "sent" && state != "dead") return InvalidArgument("Cannot delete active work");
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  std::erase_if(rows_, [&](const Row& r) {
    bool del = n < batch && r.state == state && r.updated_at_ms < NowMs() - max_age_ms;
    if (del) ++n;
    return del;
  });
  return n;
}

Result<int64_t> FakeStore::DeleteBeyondCount(const std::string& state, int64_t, int) {
  if (state != "sent" && state != "dead") return InvalidArgument("Cannot delete active work");
  return Internal("FakeStore does not implement COUNT retention");
}

FakeStore::Row FakeStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Row* r = Find(id);
  return r != nullptr ? *r : Row{};
}

std::vector<FakeStore::Row> FakeStore::All() {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

}  // namespace queuebox::testing
