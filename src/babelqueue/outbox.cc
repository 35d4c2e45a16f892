// outbox.cc: Outbox writer, OutboxRelay and InMemoryOutboxStore (see outbox.h).
#include "babelqueue/outbox.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace babelqueue {

Result<std::string> Outbox::Write(const Envelope& envelope) {
  QB_ASSIGN_OR_RETURN(std::string encoded, Encode(envelope));
  const std::string_view queue =
      envelope.meta.queue.empty() ? std::string_view(kDefaultQueue) : envelope.meta.queue;
  return store_.Save(encoded, queue);
}

OutboxRelay::OutboxRelay(Transport& transport, OutboxStore& store, RelayOptions options)
    : transport_(transport), store_(store), options_(std::move(options)) {
  if (options_.batch_size <= 0) options_.batch_size = 100;
  if (options_.backoff_step_ms <= 0) options_.backoff_step_ms = 50;
  if (options_.backoff_cap_ms <= 0) options_.backoff_cap_ms = 5000;
  if (!options_.sleeper) {
    options_.sleeper = [](int64_t ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
  }
}

int64_t OutboxRelay::BackoffFor(int prior_attempts) const {
  const int64_t steps = std::max<int64_t>(1, int64_t{prior_attempts} + 1);
  return std::min(options_.backoff_step_ms * steps, options_.backoff_cap_ms);
}

RelayResult OutboxRelay::Flush() {
  RelayResult result;
  Result<std::vector<OutboxRecord>> rows = store_.FetchUnpublished(options_.batch_size);
  if (!rows.ok()) {
    result.status = rows.status();
    return result;
  }
  std::vector<std::string> published;
  for (const OutboxRecord& row : *rows) {
    Status sent = transport_.Publish(row.queue, row.body);
    if (sent.ok()) {
      published.push_back(row.id);
      continue;
    }
    Status marked = store_.MarkFailed(row.id, sent.message());
    if (!marked.ok()) {
      result.published = 0;  // nothing of this pass was marked
      result.status = marked;
      return result;
    }
    ++result.failed;
    options_.sleeper(BackoffFor(row.attempts));
  }
  if (!published.empty()) {
    Status marked = store_.MarkPublished(published);
    if (!marked.ok()) {
      result.status = marked;
      return result;
    }
  }
  result.published = static_cast<int>(published.size());
  return result;
}

RelayResult OutboxRelay::Drain(int max_passes) {
  const int ceiling = max_passes > 0 ? max_passes : kDefaultDrainCeiling;
  RelayResult total;
  for (int pass = 0; pass < ceiling; ++pass) {
    RelayResult r = Flush();
    total.published += r.published;
    total.failed += r.failed;
    if (!r.status.ok()) {
      total.status = r.status;
      return total;
    }
    if (r.published == 0) break;
  }
  return total;
}

// ---- InMemoryOutboxStore ----

Result<std::string> InMemoryOutboxStore::Save(std::string_view encoded, std::string_view queue) {
  std::lock_guard lock(mu_);
  Row row;
  row.record.id = "ob-" + std::to_string(++sequence_);
  row.record.body = std::string(encoded);
  row.record.queue = std::string(queue);
  rows_.push_back(std::move(row));
  return rows_.back().record.id;
}

Result<std::vector<OutboxRecord>> InMemoryOutboxStore::FetchUnpublished(int limit) {
  std::lock_guard lock(mu_);
  std::vector<OutboxRecord> out;
  for (const Row& row : rows_) {
    if (static_cast<int>(out.size()) >= limit) break;
    if (!row.published) out.push_back(row.record);
  }
  return out;
}

Status InMemoryOutboxStore::MarkPublished(const std::vector<std::string>& ids) {
  std::lock_guard lock(mu_);
  for (const std::string& id : ids) {
    if (const int i = IndexOf(id); i >= 0) rows_[static_cast<size_t>(i)].published = true;
  }
  return Status::Ok();
}

Status InMemoryOutboxStore::MarkFailed(const std::string& id, std::string_view error) {
  std::lock_guard lock(mu_);
  if (const int i = IndexOf(id); i >= 0) {
    Row& row = rows_[static_cast<size_t>(i)];
    ++row.record.attempts;
    row.last_error = std::string(error);
  }
  return Status::Ok();
}

int InMemoryOutboxStore::IndexOf(const std::string& id) const {
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].record.id == id) return static_cast<int>(i);
  }
  return -1;
}

int InMemoryOutboxStore::PendingCount() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(
      std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return !r.published; }));
}

int InMemoryOutboxStore::AttemptsOf(const std::string& id) const {
  std::lock_guard lock(mu_);
  const int i = IndexOf(id);
  return i < 0 ? 0 : rows_[static_cast<size_t>(i)].record.attempts;
}

std::string InMemoryOutboxStore::LastErrorOf(const std::string& id) const {
  std::lock_guard lock(mu_);
  const int i = IndexOf(id);
  return i < 0 ? std::string() : rows_[static_cast<size_t>(i)].last_error;
}

}  // namespace babelqueue
