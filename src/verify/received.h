// received.h: `queuebox verify --received FILE`, the deliveries `queuebox receive` recorded (one
// JSON line each: id, key, topic, attempt, time) against the outbox rows of the window.
#pragma once

#include <string>
#include <vector>

#include "verify/checks.h"

namespace queuebox::verify {

// One recorded delivery.
struct Receipt {
  std::string id, key;
};

// The receipts of a file, in file order; a line that is not a JSON object with an "id" (a line
// cut short when the receiver was killed) is skipped and counted in `skipped`. kNotFound when the
// file cannot be read.
Result<std::vector<Receipt>> ReadReceipts(const std::string& path, int64_t* skipped);

// received: every row sent in the window was received; duplicates: deliveries beyond the first
// (counted, never broken: delivery is at-least-once); received-order: per key, the first
// receipts follow the sequence (broken under strict ordering, a warning under sequence ordering,
// where overlapping writers are delivered in commit order).
Result<std::vector<CheckResult>> CheckReceived(const CheckContext& context);

}  // namespace queuebox::verify
