// kafka_source.h: the kafka broker source (QueueBox reference §11.3); see sources/broker_source.h
// for the lifecycle and sources/broker_intake.h for what becomes a row.
//
// One librdkafka consumer per source, a member of `groupId` subscribed to `topics`
// (enable.auto.commit=false, enable.auto.offset.store=false): replicas with one groupId share the
// partitions. Each partition is read in offset order. One thread fetches up to maxPollRecords
// records, stores them with ONE InboxIntake::Store (filtered records skipped), and only after
// that call succeeded marks the offsets past the batch as consumed and commits them
// (asynchronously; synchronously before partitions are revoked, so a rebalance hands the next
// owner what was stored, waiting at most 5 s: CommitWithin, kafka_commit.h). The source remembers per partition how far it stored: when librdkafka
// dropped an assignment as lost (a commit refused for a stale generation, as while the group
// rebalances), and with it the offsets stored and not committed, the partition given back starts
// there and that offset is committed in the assign callback (not left to a re-read that a stop
// can cut short; stopped before it is given back, the next owner reads them again, deduplicated).
// When Store fails (the database is away) every partition of the batch is sought back to its
// first record of the batch, which was not stored, and the source backs off (ReconnectDelayMs,
// capped) before fetching again: nothing is committed that was not stored, nothing is lost, and
// a record fetched twice is stored once (the inbox dedup).
//
// Records: body = the value; headers = the record headers as strings (HeaderText: UTF-8 or
// "base64:"), a null value as ""; record_key = the key (HeaderText); broker_time_ms = the record
// timestamp when it has one.
//
// Health ("kafka.<source>"): up once a broker answered; down while librdkafka reports every
// broker down (one WARN per outage, one INFO when a broker answers again; librdkafka reconnects
// with its own capped, jittered backoff) and after a fatal consumer error (the consumer is then
// rebuilt after a backoff).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/status.h"
#include "sources/broker_intake.h"
#include "sources/broker_source.h"
#include "sources/kafka/kafka_settings.h"

typedef struct rd_kafka_headers_s rd_kafka_headers_t;  // librdkafka/rdkafka.h

namespace queuebox::sources {

// One record header as librdkafka gives it: the name up to its first NUL byte (librdkafka's API
// has no name length), the value's bytes (nullopt: a null value).
struct KafkaHeaderBytes {
  std::string_view name;
  std::optional<std::string_view> value;
};

// One record as librdkafka gives it (the views borrow the record's memory).
struct KafkaRecordView {
  std::optional<std::string_view> value;  // nullopt: a null value (a tombstone)
  std::optional<std::string_view> key;
  std::vector<KafkaHeaderBytes> headers;
  std::optional<int64_t> timestamp_ms;  // when the record has one (and it is not negative)
};

// Record headers as BrokerMessage::headers: every header in record order, repeated names kept
// (the intake takes the last of a name, any letter case); the name and the value through
// HeaderText (UTF-8 without NUL, else "base64:"), as AMQP header names are; a null value "".
// No I/O.
std::vector<std::pair<std::string, std::string>> KafkaHeaderStrings(
    std::span<const KafkaHeaderBytes> headers);
// The same of librdkafka's header list (enumerated with rd_kafka_header_get_all); `headers` may
// be null (no headers).
std::vector<std::pair<std::string, std::string>> KafkaHeaderStrings(
    const rd_kafka_headers_t* headers);

// A record as BrokerIntake reads it: body = the value (a null value ""), headers as above,
// record_key = the key through HeaderText, broker_time_ms = the timestamp. No I/O.
BrokerMessage KafkaBrokerMessage(const KafkaRecordView& record);

// No I/O: Start() connects. kInvalidArgument naming sources.<name>.<key> for bad settings:
// bootstrapServers/groupId empty, topics empty or with a blank entry, autoOffsetReset not
// earliest|latest, maxPollRecords < 1, a SASL_* securityProtocol without the three sasl keys.
Result<std::unique_ptr<BrokerSource>> CreateKafkaSource(KafkaSourceSettings settings,
                                                        const BrokerSourceContext& context);

}  // namespace queuebox::sources
