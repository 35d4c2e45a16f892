// components.h: the parts of `queuebox run` (QueueBox reference §13.6 start-up, §13.7 shutdown),
// each with a small lifecycle: a name, start, stop and the /health/ready entries it answers for.
// BuildComponents makes them through one builder each, in start order:
//   http-sources      the webhook routes' group-committing writer (stopped after the server)
//   admin-server      the ports first: a port another process holds stops the start before a row
//                     is claimed
//   outbox-relay      outbox-poller, one entry per broker destination, circuit.<destination>
//   inbox-relay       inbox-relay
//   insert-listener   LISTEN/NOTIFY wake-ups (outbox.notify.enabled)
//   change-capture    outbox-capture (advisory)
//   retention         retention-service
//   pending-gauges    the refresher of the pending gauges
//   <type>.<source>   each broker source, consuming last
//   service-manager   READY=1; on stop STOPPING=1 and the HTTP drain (503), the first step of
//                     shutdown
// Run starts the list in order and stops it in reverse; a start that fails stops what started.
//
// Thread-safety: built, started and stopped from the controlling thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "admin/activity_recorder.h"
#include "admin/admin_server.h"
#include "admin/metrics.h"
#include "admin/retention.h"
#include "commands.h"
#include "core/inbox_relay.h"
#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/relay.h"
#include "queuebox/status.h"
#include "queuebox/store.h"
#include "sources/broker_source.h"
#include "sources/http/http_source.h"
#include "sources/source_transforms.h"
#include "sources/waking_intake.h"
#include "store/change_capture.h"
#include "store/open_store.h"
#include "telemetry/tracer.h"

namespace queuebox::app {

struct Component {
  std::string name;
  std::function<Status()> start;        // empty: nothing to start
  std::function<void()> stop;           // empty: nothing to stop; only after start succeeded
  std::vector<HealthComponent> health;  // its /health/ready entries
};

// What the builders read and make. Owns every object a component refers to; outlives the list.
struct Plant {
  Plant(const Config& c, const RunOptions& o) : config(c), options(o) {}

  const Config& config;
  const RunOptions& options;
  Metrics metrics;
  // Made before the builders run (run.cc): the store, its inbox (null: no inbox table), the
  // replica set (null: no key affinity), the destinations and the transforms.
  std::unique_ptr<OutboxStore> store;
  InboxStore* inbox = nullptr;
  ReplicaMembership* replicas = nullptr;
  // outbox.attemptHistory.enabled, and the store has its table (OutboxStore::EnableAttemptHistory).
  bool attempt_history = false;
  std::map<std::string, std::unique_ptr<Destination>> destinations;
  std::shared_ptr<const DeliveryTransforms> delivery_transforms;
  std::unique_ptr<sources::SourceTransforms> source_transforms;
  // Made by the builders.
  std::shared_ptr<telemetry::Tracer> tracer;  // telemetry.enabled; made first
  std::unique_ptr<Relay> relay;
  std::unique_ptr<InboxRelay> inbox_relay;
  std::unique_ptr<sources::WakingIntake> intake;
  std::unique_ptr<sources::WebhookSources> webhooks;
  std::vector<std::unique_ptr<sources::BrokerSource>> broker_sources;
  std::unique_ptr<InsertListener> listener;
  std::unique_ptr<ChangeCapture> capture;
  std::unique_ptr<RetentionService> retention;
  std::unique_ptr<ActivityRecorder> activity;  // the store has console reads
  std::unique_ptr<AdminServer> admin;
  int64_t abandoned = 0;  // publishes the outbox relay left running when it stopped
};

// The components in start order (see above). No I/O but what the objects do when created.
Result<std::vector<Component>> BuildComponents(Plant& plant);

// Starts `list` in order; on a failure stops the started ones in reverse and returns it.
Status StartComponents(std::vector<Component>& list);
// Stops `list` in reverse order.
void StopComponents(std::vector<Component>& list);

}  // namespace queuebox::app
