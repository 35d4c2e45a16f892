// destination_contract.h: what the destination contract suite (destination_contract_test.cc)
// needs from each destination: how to make one, how to read what arrived, how to provoke a
// failure. One DestinationTarget per destination (destination_targets.h); the behaviour every
// destination shares is written once, in the suite.
//
// Thread-safety: a target is used from the test thread (the suite's publishing threads only
// call the destinations it made).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/destination.h"

namespace queuebox::testing {

// One message as it arrived, in the terms every destination shares.
struct Arrival {
  std::string id;     // the row id (X-Message-Id, x-message-id, message_id, the line's "id")
  std::string topic;  // the row topic (x-topic)
  std::string attempt;
  std::optional<std::string> key;  // unset when the destination carries no key
  std::string body;                // the bytes as they arrived (file: the line's payload, dumped)
  // The static and row headers as they arrived (names as sent); the standard ones (id, topic,
  // attempt, key, content type and the transport's own) are not in it.
  std::map<std::string, std::string> headers;
};

// A destination pointed at a server that is not there.
struct UnreachableDestination {
  std::unique_ptr<Destination> destination;  // made, not started
  std::string secret;                        // in its credentials: never in a text ("" = none)
  std::string error_prefix;                  // every failed outcome's error starts with it
  std::vector<std::string> error_parts;      // every failed outcome's error contains each
  bool health_reports_it = true;             // Health() turns kUnavailable
  std::string health_part;                   // Health().message() contains it ("" = any)
};

// What the suite knows about one destination. SetUp prepares a fresh place (a receiver, file,
// topic, exchange and queue, stream) that every destination Make returns writes to.
class DestinationTarget {
 public:
  virtual ~DestinationTarget() = default;

  // Prepares the place; may GTEST_SKIP (server not configured) or fail.
  virtual void SetUp() = 0;
  virtual void TearDown() {}

  // A started destination writing to the place, with these static headers.
  virtual std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers = {}) = 0;
  // The block a configuration gives for the place (registry factory; name, type, options).
  virtual DestinationConfig Config() = 0;
  virtual UnreachableDestination MakeUnreachable() = 0;

  // Waits (with a deadline) until `count` messages arrived; returns every arrival, in arrival
  // order (per partition for Kafka).
  virtual std::vector<Arrival> Arrivals(size_t count) = 0;
  // How many messages arrived so far, at once: after a PublishBatch returned, exact.
  virtual size_t ArrivedCount() = 0;

  // A failure that ends: after Break() a publish fails with a retry whose error contains
  // TransientErrorPart(); after Heal() the same message is delivered again.
  virtual void Break() = 0;
  virtual void Heal() = 0;
  virtual std::string TransientErrorPart() const = 0;

  // What differs between destinations, stated rather than hidden.
  virtual bool KeepsBodyBytes() const { return true; }  // file: embeds the payload as JSON
  virtual bool CarriesKey() const { return true; }      // rabbitmq: only in the routing key
  // HTTP sends a batch's messages at once: order is kept across batches (the relay claims one
  // row per key at a time, docs/guarantees.md §2), not within one.
  virtual bool KeepsOrderWithinABatch() const { return true; }
  virtual bool HonoursCancel() const { return true; }  // file: writes the batch it is given
};

}  // namespace queuebox::testing
