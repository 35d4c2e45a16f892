#include "sources/http/inbox_writer.h"

#include <algorithm>
#include <utility>

namespace queuebox::sources {

InboxWriter::InboxWriter(InboxIntake* intake, int writers, int max_batch)
    : intake_(intake), max_batch_(std::max(1, max_batch)) {
  for (int i = 0; i < std::max(1, writers); ++i) threads_.emplace_back([this] { Loop(); });
}

InboxWriter::~InboxWriter() { Stop(); }

void InboxWriter::Submit(NewInboxMessage message, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(Item{std::move(message), std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(Unavailable("the inbox writer is stopped"));
}

void InboxWriter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

int64_t InboxWriter::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

int64_t InboxWriter::messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

void InboxWriter::Loop() {
  while (true) {
    std::vector<Item> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      while (!queue_.empty() && static_cast<int>(batch.size()) < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      ++batches_;
      messages_ += static_cast<int64_t>(batch.size());
    }
    StoreBatch(batch);
  }
}

void InboxWriter::StoreBatch(std::vector<Item>& batch) {
  // Moved, not copied: the items keep only their `done` from here on.
  std::vector<NewInboxMessage> messages;
  messages.reserve(batch.size());
  for (Item& item : batch) messages.push_back(std::move(item.message));
  Result<std::vector<InboxStoreOutcome>> stored = intake_->Store(messages);
  if (stored.ok() && stored->size() == batch.size()) {
    for (size_t i = 0; i < batch.size(); ++i) batch[i].done((*stored)[i]);
    return;
  }
  Status error = stored.ok()
                     ? Internal("the inbox store answered " + std::to_string(stored->size()) +
                                " outcomes for " + std::to_string(batch.size()) + " messages")
                     : stored.status();
  if (batch.size() == 1 || error.code() == StatusCode::kUnavailable) {
    for (Item& item : batch) item.done(error);
    return;
  }
  // One message the database refuses must not fail the others: store each alone.
  for (size_t i = 0; i < batch.size(); ++i) {
    Result<std::vector<InboxStoreOutcome>> one =
        intake_->Store(std::span<const NewInboxMessage>(&messages[i], 1));
    if (one.ok() && one->size() == 1) {
      batch[i].done((*one)[0]);
    } else {
      batch[i].done(one.ok() ? Internal("the inbox store answered no outcome") : one.status());
    }
  }
}

}  // namespace queuebox::sources
