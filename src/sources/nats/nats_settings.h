// nats_settings.h: the nats source kind's settings and option table (QueueBox reference §11.3,
// §12.2), built whether or not the consumer is (sources/nats/nats_source.h), so a nats block always
// validates.
//
// Thread-safety: the table is built once and immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "queuebox/config.h"
#include "sources/registry.h"
#include "sources/source_keys.h"

namespace queuebox {

// type: nats (QueueBox reference §11.3): a JetStream durable pull consumer on an existing stream.
struct NatsSourceSettings {
  std::string name;
  std::string servers;                        // comma list of nats:// URLs, required
  std::string stream;                         // required; never created by QueueBox
  std::string durable;                        // required; replicas with one name share the work
  std::optional<std::string> filter_subject;  // filterSubject
  int64_t ack_wait_ms = 30000;                // ackWaitMs: redelivery after a crash
  int batch_size = 100;                       // batchSize: messages per fetch
  // Not a configuration key: the most fetched batches one inbox store takes while the previous
  // store runs (1 = a store per fetch; bench/nats_source_bench.cc compares).
  int max_batches_per_store = 4;
  std::optional<std::string> username;
  std::optional<std::string> password;  // secret
  std::optional<std::string> token;     // secret
  BrokerSourceKeys broker;
};

}  // namespace queuebox

namespace queuebox::sources {

const OptionTable<NatsSourceSettings>& NatsSourceOptions();
// The registry entry; `create` is null when this build has no nats consumer.
SourceKind NatsSourceKind(SourceFactory<NatsSourceSettings> create);
// Binds a validated source block; kInvalidArgument when it is of another kind.
Result<NatsSourceSettings> BindNatsSource(const SourceConfig& source);

}  // namespace queuebox::sources
