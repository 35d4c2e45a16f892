// nats_source.h: the nats broker source (QueueBox reference §11.3); see sources/broker_source.h
// for the lifecycle and sources/broker_intake.h for what becomes a row.
//
// JetStream only, built on nats.c 3.4. The stream must exist (QueueBox never creates one): a
// missing stream is an error naming it, the source reports unhealthy and keeps retrying. The
// durable is a PULL consumer shared by every replica configured with the same name: created when
// missing (filterSubject, ackWaitMs, explicit acks, deliver all), bound when present (its own
// configuration then wins; a push consumer of that name is refused).
//
// Consumption: one thread fetches up to batchSize messages (natsSubscription_Fetch), converts
// them (headers: last value per name, HeaderText; Nats-Msg-Id, in any letter case when that exact
// name is absent, the message id; the JetStream
// stored time the broker time), stores the batch with ONE InboxIntake::Store (on a thread of
// its own, while the next batch is fetched; stores run one after the other, in stream order) and
// then acknowledges every message of it (filtered, duplicates and store-rejected ones too; one ack
// per message for an explicit-ack consumer, the last message's ack for an ack-all consumer).
// When Store fails (database away) every message of the batch is NAKed (redelivered at once) and
// the source backs off before the next fetch. A crash leaves the batch unacknowledged: JetStream
// redelivers it after ackWait and the inbox's unique key drops what was stored already.
//
// Connection: the nats destination's options (destinations/nats/nats_connect.h); nats.c
// reconnects forever with capped jittered backoff, and a source that never connected retries
// with the same backoff. One WARN per outage (broker or database), one INFO when it ends;
// healthy() is false while the connection or the consumer is down.
#pragma once

#include <nats/nats.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "queuebox/status.h"
#include "sources/broker_source.h"
#include "sources/nats/nats_settings.h"

namespace queuebox::sources {

// A NATS message's headers as BrokerMessage::headers, read exactly (destinations/nats/
// nats_headers.h: by exact name, an empty value as empty): one pair per name (names are
// case-sensitive; in the order names first appear), the last value of the name (QueueBox
// reference §11.3); names and values through HeaderText (UTF-8 without NUL, else "base64:").
// No I/O.
std::vector<std::pair<std::string, std::string>> NatsHeaderStrings(natsMsg* msg);

// No I/O: Start() connects. kInvalidArgument naming sources.<name>.<key> for bad settings
// (servers, stream, durable, batchSize, ackWaitMs, credentials).
Result<std::unique_ptr<BrokerSource>> CreateNatsSource(NatsSourceSettings settings,
                                                       const BrokerSourceContext& context);

}  // namespace queuebox::sources
