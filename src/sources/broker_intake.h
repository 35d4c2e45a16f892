// broker_intake.h: what every broker source (RabbitMQ, Kafka, NATS JetStream) does with a
// message between the broker and the inbox (QueueBox reference §9.3, §9.4, §11.2, §11.3, §11.5):
// the intake pipeline (sources/intake.h) under the store-dead policy, with the brokers' key
// precedence, and counting a stored batch's outcomes.
//
// A consumer converts each delivery into a BrokerMessage (headers already as strings: see
// HeaderText), asks Receive() for the row, stores the fetched batch with ONE InboxIntake::Store
// call, and acknowledges the batch only after that call succeeded (filtered messages too).
//
// Thread-safety: a built BrokerIntake is immutable; Receive and Count may run on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "sources/intake.h"
#include "sources/intake_observer.h"
#include "sources/source_keys.h"
#include "sources/source_transforms.h"

namespace queuebox::sources {

// One delivery as the broker gave it: headers in broker order (a later value of the same name,
// any letter case, wins), the broker's id, record key, correlation property and time.
using BrokerMessage = Arrival;

// A header value as QueueBox stores it: the bytes when they are UTF-8 (and hold no NUL), else
// "base64:" + base64 of the bytes.
std::string HeaderText(std::string_view bytes);

class BrokerIntake {
 public:
  // `kind` is "rabbitmq", "kafka" or "nats" (which fallbacks apply). kInvalidArgument naming
  // sources.<name>.<key> for a path or filter that does not compile (config validation already
  // refuses those; this is the last guard).
  // `transforms` (the source stage and key expressions; null: none) and `observer` (null: not
  // counted) are borrowed and must outlive the intake.
  static Result<BrokerIntake> Create(std::string kind, std::string source_name,
                                     const BrokerSourceKeys& keys,
                                     const SourceTransforms* transforms = nullptr,
                                     IntakeObserver* observer = nullptr);

  // The row for `message`; nullopt when the header filter drops it (acknowledge it, no row).
  // A fault stores a dead row (sources/intake.h); key precedence (§9.4):
  //   idempotency key: header attributeHeaders.idempotencyKey, idempotencyKeyExpression,
  //     idempotencyKeyPath(s), message_id (rabbitmq, nats) / record_key (kafka), then
  //     BodyDigestKey(body);
  //   aggregate id: aggregateIdExpression, aggregateIdPath(s), header attributeHeaders.aggregateId,
  //     record_key (kafka);
  //   event type: eventTypeExpression, eventTypePath(s), header attributeHeaders.eventType when
  //     eventTypeFromHeader;
  //   correlation id: header X-Correlation-Id, correlation_property, a new UUID (sanitised);
  //   publish time: scheduledAtHeader, scheduledAtPath(s), then broker_time_ms
  //   (only when scheduledAtHeader/Path is configured; an unparsable one is ignored with a WARN).
  std::optional<NewInboxMessage> Receive(BrokerMessage message) const;

  // Counts a stored batch's outcomes into queuebox_inbox_messages_total{status=new|duplicate}
  // and queuebox_inbox_rejections_total{reason}; `filtered` drops into
  // queuebox_inbox_filtered_total{source}. `observer` may be null.
  void Count(IntakeObserver* observer, std::span<const InboxStoreOutcome> outcomes,
             int64_t filtered) const;

  const std::string& source() const;

 private:
  explicit BrokerIntake(std::shared_ptr<const Intake> intake) : intake_(std::move(intake)) {}
  std::shared_ptr<const Intake> intake_;
};

}  // namespace queuebox::sources
