#include "testing/fake_store.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "testing/random_uuid.h"

namespace queuebox::testing {
namespace {

bool Unfinished(const FakeStore::Row& r) { return r.state == "pending" || r.state == "processing"; }

// The SQL stores' checks and messages (store/common.h ValidateClaim).
Status ValidateClaim(int limit, int64_t lease_ms) {
  if (limit <= 0) {
    return InvalidArgument("The claim limit must be above 0, got " + std::to_string(limit) + ".");
  }
  if (lease_ms <= 0 || lease_ms > 2147483647) {
    return InvalidArgument("The lease must be 1.." + std::to_string(2147483647) + " ms, got " +
                           std::to_string(lease_ms) + ".");
  }
  return Status::Ok();
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

Status FakeStore::RefuseWhileDown() {
  {
    std::lock_guard<std::mutex> lock(refused_mu_);
    ++refused_;
  }
  refused_cv_.notify_all();
  return Unavailable("fake database is down");
}

bool FakeStore::WaitForRefused(int64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(refused_mu_);
  return refused_cv_.wait_for(lock, timeout, [&] { return refused_ >= n; });
}

bool FakeStore::Owned(const Row& r, const Fence& f) const {
  return r.state == "processing" && !f.claim_token.empty() && r.row.claim_token == f.claim_token &&
         r.lease_expires_at_ms.has_value() && *r.lease_expires_at_ms > NowMs();
}

#define QB_FAKE_DOWN_CHECK()           \
  if (down_) return RefuseWhileDown(); \
  ++statements_

Result<std::vector<OutboxRow>> FakeStore::Claim(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  // A key's head is its lowest sequence among pending and processing rows.
  std::map<std::string, int64_t> head_of;
  for (const Row& r : rows_) {
    if (!r.row.ordered() || !Unfinished(r)) continue;
    auto [it, fresh] = head_of.emplace(*r.row.key, r.row.sequence);
    if (!fresh) it->second = std::min(it->second, r.row.sequence);
  }
  std::vector<Row*> candidates;
  for (Row& r : rows_) {
    if (r.state != "pending" || r.scheduled_at_ms > now) continue;
    if (r.row.ordered() && head_of[*r.row.key] != r.row.sequence) continue;
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
    r->row.claim_token = RandomUuid();
    r->claimed_at_ms = now;
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
        r.row.claim_token.clear();
        r.lease_expires_at_ms.reset();
      });
}

Result<std::vector<std::string>> FakeStore::ScheduleRetry(std::span<const RetryOrder> orders) {
  return ApplyFenced(
      orders, [](const RetryOrder& o) -> const Fence& { return o.fence; },
      [this](Row& r, const RetryOrder& o) {
        r.state = "pending";
        r.row.attempt += 1;
        r.scheduled_at_ms = NowMs() + std::max<int64_t>(0, o.delay_ms);
        r.claimed_at_ms.reset();
        r.row.claim_token.clear();
        r.lease_expires_at_ms.reset();
        r.last_error = o.error;
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::Release(std::span<const ReleaseOrder> orders) {
  return ApplyFenced(
      orders, [](const ReleaseOrder& o) -> const Fence& { return o.fence; },
      [this](Row& r, const ReleaseOrder& o) {
        r.state = "pending";
        r.scheduled_at_ms = NowMs() + std::max<int64_t>(0, o.delay_ms);
        r.claimed_at_ms.reset();
        r.row.claim_token.clear();
        r.lease_expires_at_ms.reset();
        r.last_error = o.error;
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::MarkDead(std::span<const DeadOrder> orders) {
  return ApplyFenced(
      orders, [](const DeadOrder& o) -> const Fence& { return o.fence; },
      [this](Row& r, const DeadOrder& o) {
        r.state = "dead";
        r.claimed_at_ms.reset();
        r.row.claim_token.clear();
        r.lease_expires_at_ms.reset();
        r.last_error = o.error;
        r.updated_at_ms = NowMs();
      });
}

Result<std::vector<std::string>> FakeStore::Renew(std::span<const Fence> fences, int64_t lease_ms) {
  if (!fences.empty()) QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  return ApplyFenced(
      fences, [](const Fence& f) -> const Fence& { return f; },
      [this, lease_ms](Row& r, const Fence&) { r.lease_expires_at_ms = NowMs() + lease_ms; });
}

Result<int64_t> FakeStore::ReclaimExpired() {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  const int64_t now = NowMs();
  for (auto& r : rows_) {
    if (r.state == "processing" &&
        (!r.lease_expires_at_ms.has_value() || *r.lease_expires_at_ms <= now)) {
      r.state = "pending";
      r.claimed_at_ms.reset();
      r.updated_at_ms = now;
      ++n;
    }
  }
  return n;
}

Result<int64_t> FakeStore::NextWakeDelayMs(int64_t max_wait_ms) {
  if (max_wait_ms < 1) return InvalidArgument("NextWakeDelayMs: max_wait_ms must be at least 1");
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  int64_t wait = max_wait_ms;
  for (const auto& r : rows_) {
    std::optional<int64_t> due;
    if (r.state == "pending") due = r.scheduled_at_ms;
    if (r.state == "processing") due = r.lease_expires_at_ms;
    if (due && *due > now) wait = std::min(wait, *due - now);
  }
  return std::max<int64_t>(1, wait);
}

Result<std::string> FakeStore::Insert(const NewOutboxRow& in) {
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  QB_RETURN_IF_ERROR(Refused(std::span<const NewOutboxRow>(&in, 1)));
  return InsertLocked(in, NowMs());
}

Result<std::vector<std::string>> FakeStore::InsertAll(std::span<const NewOutboxRow> rows) {
  if (rows.empty()) return std::vector<std::string>{};
  QB_FAKE_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  QB_RETURN_IF_ERROR(Refused(rows));
  const int64_t now = NowMs();
  std::vector<std::string> ids;
  for (const NewOutboxRow& in : rows) ids.push_back(InsertLocked(in, now));
  return ids;
}

Status FakeStore::Refused(std::span<const NewOutboxRow> rows) const {
  for (const NewOutboxRow& in : rows) {
    if (!refused_topic_.empty() && in.topic == refused_topic_) {
      return Internal("an insert of topic '" + in.topic + "' was refused");
    }
  }
  return Status::Ok();
}

std::string FakeStore::InsertLocked(const NewOutboxRow& in, int64_t now) {
  Row r;
  r.row.id = in.id.value_or(RandomUuid());
  r.row.topic = in.topic;
  r.row.key = in.key;
  r.row.payload = in.payload;
  r.row.headers = in.headers.value_or("{}");
  r.row.aggregate_type = in.aggregate_type;
  r.row.max_attempts = in.max_attempts.value_or(5);
  r.row.sequence = next_sequence_++;
  r.created_at_ms = now;
  r.scheduled_at_ms = now + in.delay_ms.value_or(0);
  r.updated_at_ms = now;
  rows_.push_back(r);
  return r.row.id;
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

bool FakeStore::Update(const std::string& id, const std::function<void(Row&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  Row* r = Find(id);
  if (r == nullptr) return false;
  change(*r);
  return true;
}

}  // namespace queuebox::testing
