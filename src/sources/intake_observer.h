// intake_observer.h: what the sources report while they take messages in, for the metrics
// (QueueBox reference §13.4). The admin's Metrics implements it, as it implements the relays'
// observers; the sources never see the metrics themselves.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace queuebox::sources {

class IntakeObserver {
 public:
  virtual ~IntakeObserver() = default;
  // `n` messages stored with outcome `status`: "new" or "duplicate"
  // (queuebox_inbox_messages_total{status}).
  virtual void OnInboxMessages(std::string_view status, int64_t n) = 0;
  // One message refused or not stored (queuebox_inbox_rejections_total{reason}): rate_limited,
  // auth_failed, body_too_large, invalid_json, extraction_failed, transform_failed,
  // invalid_message, storage_failed.
  virtual void OnInboxRejection(std::string_view reason) = 0;
  // One message the header filter of `source` dropped (queuebox_inbox_filtered_total{source}).
  virtual void OnInboxFiltered(std::string_view source) = 0;
};

}  // namespace queuebox::sources
