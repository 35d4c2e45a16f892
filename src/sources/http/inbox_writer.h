// inbox_writer.h: group commit of received messages into the inbox. Requests that arrive while a
// Store call runs are queued and stored together by the next call (one statement, one commit for
// the batch; InboxIntake::Store), so the commit cost is shared instead of paid per request.
// `writers` threads call Store concurrently (1 for SQLite, which has one writer; a few for
// PostgreSQL).
//
// A batch that fails as a whole with kUnavailable (the database is away) fails every message in
// it: nothing was written. Any other failure of a batch of several messages is retried one
// message at a time, so a message the database refuses fails alone.
//
// Thread-safety: Submit from any thread; `done` runs on a writer thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "queuebox/inbox.h"
#include "queuebox/status.h"

namespace queuebox::sources {

class InboxWriter {
 public:
  using Done = std::function<void(Result<InboxStoreOutcome>)>;

  // `intake` is borrowed and must outlive Stop(). writers >= 1; max_batch >= 1.
  InboxWriter(InboxIntake* intake, int writers, int max_batch);
  ~InboxWriter();
  InboxWriter(const InboxWriter&) = delete;
  InboxWriter& operator=(const InboxWriter&) = delete;

  // Queues `message`; `done` receives its outcome (or the batch's error).
  void Submit(NewInboxMessage message, Done done);

  // Stores what is queued, then joins the writers. Later Submits fail with kUnavailable.
  void Stop();

  // Batches stored and messages in them so far (for the benchmark's figures).
  int64_t batches() const;
  int64_t messages() const;

 private:
  struct Item {
    NewInboxMessage message;
    Done done;
  };
  void Loop();
  void StoreBatch(std::vector<Item>& batch);

  InboxIntake* intake_;
  const int max_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t batches_ = 0, messages_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace queuebox::sources
