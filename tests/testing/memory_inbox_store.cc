#include "testing/memory_inbox_store.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "store/common.h"
#include "store/inbox_common.h"
#include "testing/random_uuid.h"

namespace queuebox::testing {
namespace {

// Unix ms as the ISO-8601 UTC text SQLite's timestamp columns hold (2024-01-31T10:00:00.123Z).
std::string MemoryInboxIso(int64_t ms) {
  const int64_t seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms - seconds * 1000));
  return buf;
}

// Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian).
int64_t MemoryInboxDays(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Unix ms of an instant store::ValidateInstant accepted
// (YYYY-MM-DDTHH:MM[:SS[.fff...]](Z|+HH:MM|-HH:MM)).
int64_t MemoryInboxInstantMs(const std::string& v) {
  const auto num = [&](size_t at, size_t n) { return std::stoll(v.substr(at, n)); };
  int64_t ms = (MemoryInboxDays(num(0, 4), num(5, 2), num(8, 2)) * 86400 + num(11, 2) * 3600 +
                num(14, 2) * 60) *
               1000;
  size_t i = 16;
  if (i < v.size() && v[i] == ':') {
    ms += num(i + 1, 2) * 1000;
    i += 3;
    if (i < v.size() && v[i] == '.') {
      int64_t scale = 100;
      for (++i; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, scale /= 10) {
        ms += (v[i] - '0') * scale;
      }
    }
  }
  if (i < v.size() && (v[i] == '+' || v[i] == '-')) {
    const int64_t offset = (num(i + 1, 2) * 60 + num(i + 4, 2)) * 60000;
    ms += v[i] == '+' ? -offset : offset;
  }
  return ms;
}

bool MemoryInboxPush(const MemoryInboxStore::Row& r) {
  return r.consumption == InboxConsumption::kPush;
}

// The claim order: (scheduled_at, created_at, arrival).
bool MemoryInboxClaimOrder(const MemoryInboxStore::Row* a, const MemoryInboxStore::Row* b) {
  return std::tie(a->scheduled_at_ms, a->created_at_ms, a->arrival) <
         std::tie(b->scheduled_at_ms, b->created_at_ms, b->arrival);
}

ClaimedInboxRow MemoryInboxClaimed(const MemoryInboxStore::Row& r) {
  ClaimedInboxRow c;
  c.id = r.id;
  c.source = r.source;
  c.idempotency_key = r.idempotency_key;
  c.aggregate_id = r.aggregate_id;
  c.event_type = r.event_type;
  c.correlation_id = r.correlation_id;
  c.headers = r.headers;
  c.attempt = r.attempt;
  c.claim_token = r.claim_token;
  c.created_at = MemoryInboxIso(r.created_at_ms);
  c.scheduled_at = MemoryInboxIso(r.scheduled_at_ms);
  return c;
}

}  // namespace

#define QB_MEMORY_INBOX_DOWN_CHECK() \
  if (down_) return Unavailable("in-memory inbox database is down")

MemoryInboxStore::Row* MemoryInboxStore::Find(const std::string& id) {
  for (Row& r : rows_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

bool MemoryInboxStore::Owned(const Row& r, const Fence& f, int64_t now) const {
  return r.state == kInboxStateProcessing && !f.claim_token.empty() &&
         r.claim_token == f.claim_token && r.lease_expires_at_ms.has_value() &&
         *r.lease_expires_at_ms > now;
}

// ---- Intake ----

Result<std::vector<InboxStoreOutcome>> MemoryInboxStore::Store(
    std::span<const NewInboxMessage> messages) {
  return store::StoreInboxBatch(
      messages, [this](const std::vector<const NewInboxMessage*>& batch) { return Insert(batch); });
}

// One statement: insert-or-skip on the unique (source, idempotency_key) and the id, all rows at
// one `now`, arrival in input order.
Result<std::vector<InboxStoreOutcome>> MemoryInboxStore::Insert(
    const std::vector<const NewInboxMessage*>& batch) {
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  std::vector<InboxStoreOutcome> out;
  for (const NewInboxMessage* m : batch) {
    const bool taken = std::any_of(rows_.begin(), rows_.end(), [&](const Row& r) {
      return (r.source == m->source && r.idempotency_key == m->idempotency_key) ||
             (!m->id.empty() && r.id == m->id);
    });
    if (taken) {
      out.push_back({InboxStoreOutcome::Kind::kDuplicate, "", Status::Ok()});
      continue;
    }
    Row r;
    r.id = m->id.empty() ? RandomUuid() : m->id;
    r.source = m->source;
    r.idempotency_key = m->idempotency_key;
    r.aggregate_id = m->aggregate_id;
    r.event_type = m->event_type;
    r.correlation_id = m->correlation_id;
    r.payload = m->payload;
    r.headers = m->headers;
    r.consumption = m->consumption;
    r.state = m->dead ? kInboxStateDead : kInboxStatePending;
    if (m->dead) r.last_error = m->last_error;
    r.created_at_ms = now;
    // QueueBox reference §11.5: min(publish time, now) + delay; a dead row is due now.
    r.scheduled_at_ms =
        m->dead ? now : std::min(m->publish_time_ms.value_or(now), now) + m->delay_ms;
    r.arrival = next_arrival_++;
    rows_.push_back(r);
    out.push_back({InboxStoreOutcome::Kind::kStored, r.id, Status::Ok()});
  }
  return out;
}

// ---- The relay's claims ----

std::vector<MemoryInboxStore::Row*> MemoryInboxStore::Pick(int limit, int64_t now) {
  // An aggregate is busy while one of its push rows is in `processing`; its head is its first
  // pending push row in claim order.
  std::set<std::string> busy;
  std::map<std::string, Row*> head;
  for (Row& r : rows_) {
    if (!MemoryInboxPush(r) || !r.aggregate_id.has_value()) continue;
    if (r.state == kInboxStateProcessing) busy.insert(*r.aggregate_id);
    if (r.state != kInboxStatePending) continue;
    auto [it, fresh] = head.emplace(*r.aggregate_id, &r);
    if (!fresh && MemoryInboxClaimOrder(&r, it->second)) it->second = &r;
  }
  std::vector<Row*> picked;
  for (Row& r : rows_) {
    if (!MemoryInboxPush(r) || r.state != kInboxStatePending || r.scheduled_at_ms > now) continue;
    if (r.aggregate_id.has_value() &&
        (head[*r.aggregate_id] != &r || busy.count(*r.aggregate_id) > 0)) {
      continue;
    }
    picked.push_back(&r);
  }
  std::sort(picked.begin(), picked.end(), MemoryInboxClaimOrder);
  if (picked.size() > static_cast<size_t>(limit)) picked.resize(static_cast<size_t>(limit));
  return picked;
}

Status MemoryInboxStore::CheckOneInFlight(const std::vector<Row*>& picked) const {
  if (!check_one_in_flight_) return Status::Ok();
  std::map<std::string, int> in_flight;
  for (const Row& r : rows_) {
    if (MemoryInboxPush(r) && r.aggregate_id && r.state == kInboxStateProcessing) {
      ++in_flight[*r.aggregate_id];
    }
  }
  for (const Row* r : picked) {
    if (r->aggregate_id && ++in_flight[*r->aggregate_id] > 1) {
      return Internal("a second row of aggregate '" + *r->aggregate_id + "' would be in flight");
    }
  }
  return Status::Ok();
}

Result<std::vector<ClaimedInboxRow>> MemoryInboxStore::ClaimPush(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(store::ValidateClaim(limit, lease_ms));
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  std::vector<Row*> picked = Pick(limit, now);
  QB_RETURN_IF_ERROR(CheckOneInFlight(picked));
  std::vector<ClaimedInboxRow> out;
  for (Row* r : picked) {
    r->state = kInboxStateProcessing;
    r->claimed_at_ms = now;
    r->claim_token = RandomUuid();
    r->lease_expires_at_ms = now + lease_ms;
    out.push_back(MemoryInboxClaimed(*r));
  }
  return out;
}

Result<InboxForwardDue> MemoryInboxStore::ForwardDue(int limit, const InboxForwardPlanner& plan) {
  QB_RETURN_IF_ERROR(store::ValidateClaim(limit, 1));
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  std::vector<Row*> picked = Pick(limit, now);
  std::vector<InboxForwardPlan> plans;
  std::vector<NewOutboxRow> inserts;
  for (Row* r : picked) {
    ClaimedInboxRow claimed = MemoryInboxClaimed(*r);
    claimed.claim_token.clear();
    plans.push_back(plan(claimed));
    const InboxForward& f = plans.back().forward;
    if (!plans.back().dead_error.empty()) continue;
    inserts.push_back({f.topic, r->aggregate_id, r->payload, f.headers.empty() ? "{}" : f.headers,
                       std::nullopt, f.max_attempts, std::nullopt, std::nullopt});
  }
  // The outbox rows first: a failure there changes nothing (the transaction rolls back).
  QB_RETURN_IF_ERROR(outbox_.InsertAll(inserts).status());
  InboxForwardDue out;
  out.claimed = picked.size();
  for (size_t i = 0; i < picked.size(); ++i) {
    Row& r = *picked[i];
    const bool dead = !plans[i].dead_error.empty();
    r.state = dead ? kInboxStateDead : kInboxStateProcessed;
    r.processed_at_ms = dead ? std::nullopt : std::optional<int64_t>(now);
    r.claimed_at_ms = dead ? std::nullopt : std::optional<int64_t>(now);
    r.claim_token.clear();
    r.lease_expires_at_ms.reset();
    if (dead) r.last_error = plans[i].dead_error;
    (dead ? out.dead : out.forwarded).push_back(r.id);
  }
  return out;
}

Result<std::vector<std::string>> MemoryInboxStore::Forward(std::span<const InboxForward> forwards) {
  if (forwards.empty()) return std::vector<std::string>{};
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  std::vector<Row*> owned;
  std::vector<NewOutboxRow> inserts;
  for (const InboxForward& f : forwards) {
    Row* r = Find(f.fence.id);
    if (r == nullptr || !Owned(*r, f.fence, now)) continue;
    if (std::find(owned.begin(), owned.end(), r) != owned.end()) continue;
    owned.push_back(r);
    inserts.push_back({f.topic, r->aggregate_id, r->payload, f.headers, std::nullopt,
                       f.max_attempts, std::nullopt, std::nullopt});
  }
  QB_RETURN_IF_ERROR(outbox_.InsertAll(inserts).status());
  std::vector<std::string> done;
  for (Row* r : owned) {
    r->state = kInboxStateProcessed;
    r->processed_at_ms = now;
    r->claim_token.clear();
    r->lease_expires_at_ms.reset();
    done.push_back(r->id);
  }
  return done;
}

// The fence rule of every terminal write and renewal: apply `change` to each row still owned
// through its fence and return the ids that changed.
template <typename Order, typename FenceOf, typename Change>
Result<std::vector<std::string>> MemoryInboxStore::ApplyFenced(std::span<const Order> orders,
                                                               FenceOf fence_of, Change change) {
  if (orders.empty()) return std::vector<std::string>{};
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  std::vector<std::string> ids;
  for (const auto& o : orders) {
    const Fence& f = fence_of(o);
    Row* r = Find(f.id);
    if (r == nullptr || !Owned(*r, f, now)) continue;
    change(*r, o, now);
    ids.push_back(f.id);
  }
  return ids;
}

Result<std::vector<std::string>> MemoryInboxStore::MarkDead(std::span<const DeadOrder> orders) {
  return ApplyFenced(
      orders, [](const DeadOrder& o) -> const Fence& { return o.fence; },
      [](Row& r, const DeadOrder& o, int64_t) {
        r.state = kInboxStateDead;
        r.claimed_at_ms.reset();
        r.claim_token.clear();
        r.lease_expires_at_ms.reset();
        r.last_error = o.error;
      });
}

Result<std::vector<std::string>> MemoryInboxStore::Renew(std::span<const Fence> fences,
                                                         int64_t lease_ms) {
  if (fences.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(store::ValidateClaim(1, lease_ms));
  return ApplyFenced(
      fences, [](const Fence& f) -> const Fence& { return f; },
      [lease_ms](Row& r, const Fence&, int64_t now) { r.lease_expires_at_ms = now + lease_ms; });
}

Result<int64_t> MemoryInboxStore::ReclaimExpired() {
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  int64_t n = 0;
  for (Row& r : rows_) {
    if (MemoryInboxPush(r) && r.state == kInboxStateProcessing &&
        (!r.lease_expires_at_ms.has_value() || *r.lease_expires_at_ms <= now)) {
      r.state = kInboxStatePending;
      r.claimed_at_ms.reset();
      ++n;
    }
  }
  return n;
}

// ---- Operations ----

Result<InboxStats> MemoryInboxStore::Stats() {
  QB_ASSIGN_OR_RETURN(double oldest, OldestPendingAgeSeconds());
  std::lock_guard<std::mutex> lock(mu_);
  InboxStats stats;
  for (const Row& r : rows_) ++stats.rows_by_source_state[r.source][r.state];
  stats.oldest_pending_age_seconds = oldest;
  return stats;
}

Result<double> MemoryInboxStore::OldestPendingAgeSeconds() {
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<int64_t> oldest;
  for (const Row& r : rows_) {
    if (!MemoryInboxPush(r) || r.state != kInboxStatePending) continue;
    if (!oldest || r.created_at_ms < *oldest) oldest = r.created_at_ms;
  }
  if (!oldest) return 0.0;
  return std::max(0.0, static_cast<double>(NowMs() - *oldest) / 1000.0);
}

Result<int64_t> MemoryInboxStore::Replay(const InboxReplayFilter& filter) {
  if ((filter.ids && filter.ids->empty()) || (filter.sources && filter.sources->empty())) {
    return int64_t{0};
  }
  std::optional<int64_t> after, before;
  if (filter.created_after) {
    QB_RETURN_IF_ERROR(store::ValidateInstant(*filter.created_after, "createdAfter"));
    after = MemoryInboxInstantMs(*filter.created_after);
  }
  if (filter.created_before) {
    QB_RETURN_IF_ERROR(store::ValidateInstant(*filter.created_before, "createdBefore"));
    before = MemoryInboxInstantMs(*filter.created_before);
  }
  const auto listed = [](const std::optional<std::vector<std::string>>& list,
                         const std::string& value) {
    return !list || std::find(list->begin(), list->end(), value) != list->end();
  };
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = NowMs();
  int64_t n = 0;
  for (Row& r : rows_) {
    if (r.state != kInboxStateProcessed && r.state != kInboxStateDead) continue;
    if (!listed(filter.ids, r.id) || !listed(filter.sources, r.source)) continue;
    if ((after && r.created_at_ms <= *after) || (before && r.created_at_ms >= *before)) continue;
    r.state = kInboxStatePending;
    r.attempt = 0;
    r.scheduled_at_ms = now;
    r.last_error.reset();
    r.claimed_at_ms.reset();
    r.processed_at_ms.reset();
    r.claim_token.clear();
    r.lease_expires_at_ms.reset();
    ++n;
  }
  return n;
}

Result<std::vector<DeadInboxRow>> MemoryInboxStore::ListDead(int limit) {
  if (limit <= 0) return InvalidArgument("The limit must be above 0.");
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Row*> dead;
  for (const Row& r : rows_) {
    if (r.state == kInboxStateDead) dead.push_back(&r);
  }
  std::sort(dead.begin(), dead.end(), [](const Row* a, const Row* b) {
    return std::tie(a->created_at_ms, a->arrival) > std::tie(b->created_at_ms, b->arrival);
  });
  std::vector<DeadInboxRow> out;
  for (const Row* r : dead) {
    if (out.size() >= static_cast<size_t>(limit)) break;
    out.push_back({r->id, r->source, r->idempotency_key, r->aggregate_id, r->event_type, r->attempt,
                   r->last_error.value_or(""), MemoryInboxIso(r->created_at_ms)});
  }
  return out;
}

int64_t MemoryInboxStore::Erase(const std::vector<const Row*>& victims) {
  const std::set<const Row*> gone(victims.begin(), victims.end());
  const auto before = rows_.size();
  rows_.erase(
      std::remove_if(rows_.begin(), rows_.end(), [&](const Row& r) { return gone.count(&r) > 0; }),
      rows_.end());
  return static_cast<int64_t>(before - rows_.size());
}

Result<int64_t> MemoryInboxStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                                  int batch) {
  QB_RETURN_IF_ERROR(store::ValidateInboxRetention(state, max_age_ms, "max_age_ms", batch));
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t cutoff = NowMs() - max_age_ms;
  std::vector<const Row*> old;
  for (const Row& r : rows_) {
    if (r.state == state && r.created_at_ms < cutoff) old.push_back(&r);
  }
  std::sort(old.begin(), old.end(), [](const Row* a, const Row* b) {
    return std::tie(a->created_at_ms, a->arrival) < std::tie(b->created_at_ms, b->arrival);
  });
  if (old.size() > static_cast<size_t>(batch)) old.resize(static_cast<size_t>(batch));
  return Erase(old);
}

Result<int64_t> MemoryInboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                    int batch) {
  QB_RETURN_IF_ERROR(store::ValidateInboxRetention(state, max_count, "max_count", batch));
  QB_MEMORY_INBOX_DOWN_CHECK();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Row*> rows;
  for (const Row& r : rows_) {
    if (r.state == state) rows.push_back(&r);
  }
  std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) {
    return std::tie(a->created_at_ms, a->arrival) > std::tie(b->created_at_ms, b->arrival);
  });
  std::vector<const Row*> beyond;
  for (size_t i = static_cast<size_t>(max_count);
       i < rows.size() && beyond.size() < static_cast<size_t>(batch); ++i) {
    beyond.push_back(rows[i]);
  }
  return Erase(beyond);
}

// ---- Test controls ----

std::optional<MemoryInboxStore::Row> MemoryInboxStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Row* r = Find(id);
  return r != nullptr ? std::optional<Row>(*r) : std::nullopt;
}

std::vector<MemoryInboxStore::Row> MemoryInboxStore::All() {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

bool MemoryInboxStore::Update(const std::string& id, const std::function<void(Row&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  Row* r = Find(id);
  if (r == nullptr) return false;
  change(*r);
  return true;
}

}  // namespace queuebox::testing
