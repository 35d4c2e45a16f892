// rabbitmq_settings.h: the rabbitmq source kind's settings and option table (QueueBox reference
// §11.3, §12.2), built whether or not the consumer is (sources/rabbitmq/rabbitmq_source.h), so a
// rabbitmq block always validates.
//
// Thread-safety: the table is built once and immutable.
#pragma once

#include <string>

#include "queuebox/config.h"
#include "sources/registry.h"
#include "sources/source_keys.h"

namespace queuebox {

// type: rabbitmq (QueueBox reference §11.3): consumes one queue; ack after the row commits.
struct RabbitmqSourceSettings {
  std::string name;            // sources.<name>
  std::string queue_name;      // queueName, required
  std::string connection_url;  // connectionUrl: amqp://user:pass@host:port/vhost, required
  int prefetch_count = 10;     // prefetchCount: basic.qos, unacknowledged deliveries at most
  bool declare_queue = false;  // declareQueue: true declares a durable queue; false: must exist
  BrokerSourceKeys broker;
};

}  // namespace queuebox

namespace queuebox::sources {

const OptionTable<RabbitmqSourceSettings>& RabbitmqSourceOptions();
// The registry entry; `create` is null when this build has no rabbitmq consumer.
SourceKind RabbitmqSourceKind(SourceFactory<RabbitmqSourceSettings> create);
// Binds a validated source block; kInvalidArgument when it is of another kind.
Result<RabbitmqSourceSettings> BindRabbitmqSource(const SourceConfig& source);

}  // namespace queuebox::sources
