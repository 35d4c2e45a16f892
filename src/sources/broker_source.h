// broker_source.h: broker sources (QueueBox reference §11.3): each `sources.<name>` of type
// rabbitmq, kafka or nats is a BrokerSource that consumes on its own thread(s) into the inbox
// and acknowledges a message only after its row (or its filtered/duplicate outcome) committed.
//
// Lifecycle: Create (no I/O) → Start (returns at once; connects in the background, reconnecting
// with capped jittered backoff, core/backoff.h ReconnectDelayMs, and at most one WARN per outage)
// → Stop (no new fetches; what is fetched and not stored is left unacknowledged, so the broker
// redelivers it; joins the threads). A broker that is down at start does not stop the relay:
// the source reports unhealthy and keeps trying, as broker destinations do.
//
// Thread-safety: Start/Stop from the controlling thread; healthy() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "sources/intake_observer.h"
#include "sources/source_transforms.h"

namespace queuebox::sources {

class BrokerSource {
 public:
  virtual ~BrokerSource() = default;
  virtual Status Start() = 0;
  virtual void Stop() = 0;
  // The health component, "<type>.<source>" (QueueBox reference §13.3): "rabbitmq.orders".
  virtual std::string component() const = 0;
  // True while connected and consuming (the component reports up).
  virtual bool healthy() const = 0;
};

// What a broker source is built with. Borrowed pointers must outlive Stop().
struct BrokerSourceContext {
  InboxIntake* intake = nullptr;       // required
  IntakeObserver* observer = nullptr;  // optional
  // The source stage and key expressions (optional): pass to BrokerIntake::Create.
  const SourceTransforms* transforms = nullptr;
  int max_error_body_bytes = 2048;
};

// One BrokerSource per entry of config.sources whose kind consumes on its own threads (http
// sources are skipped), in name order, built through the registry (sources/registry.h).
// kInvalidArgument naming sources.<name>.<key> for a block that does not bind;
// kFailedPrecondition naming sources.<name>.type for a kind this build was compiled without.
Result<std::vector<std::unique_ptr<BrokerSource>>> CreateBrokerSources(
    const Config& config, const BrokerSourceContext& context);

}  // namespace queuebox::sources
