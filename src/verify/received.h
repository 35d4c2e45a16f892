// received.h: `queuebox verify --received FILE`, the deliveries `queuebox receive` recorded (one
// JSON line each: id, key, topic, attempt, time) against the outbox rows of the window.
#pragma once

#include <string>
#include <vector>

#include "verify/checks.h"

namespace queuebox::verify {

// received: every row sent in the window was received; duplicates: deliveries of a window row
// beyond its first (counted, never broken: delivery is at-least-once); received-order: per key,
// the first receipts follow the sequence (broken under strict ordering, a warning under sequence
// ordering, where overlapping writers are delivered in commit order). A line that is not a JSON
// object with an "id" (cut short when the receiver was killed) is skipped and counted; a receipt
// of a row outside the window is counted only. kNotFound when the file cannot be read.
Result<std::vector<CheckResult>> CheckReceived(const CheckContext& context);

}  // namespace queuebox::verify
