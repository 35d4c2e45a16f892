// config.h: the whole QueueBox C++ configuration as plain values (QueueBox reference §12). The
// relay and the components read it; src/config (config/load.h) loads and validates it from YAML
// and QUEUEBOX_* environment variables.
//
// Thread-safety: a loaded Config is immutable and may be shared.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/store.h"

namespace queuebox {

struct ServerConfig {
  int http_port = 8080;                // server.httpPort
  std::optional<int> management_port;  // server.managementPort
  // server.address: the interface the ports bind; every IPv4 interface by default, as QueueBox
  // (container probes, scrapes and port mappings reach it). 127.0.0.1 keeps them local.
  std::string address = "0.0.0.0";
};

// outbox.capture.connection.* (QueueBox reference §12.2): the capture connection's overrides of
// database.url's host, port and database and of database.username / database.password; unset:
// those. encrypt and trustServerCertificate are SQL Server's (accepted, unused on PostgreSQL).
struct CaptureConnectionConfig {
  std::optional<std::string> hostname;
  std::optional<int> port;
  std::optional<std::string> database;
  std::optional<std::string> username;
  std::optional<std::string> password;  // secret
  bool encrypt = true;
  bool trust_server_certificate = false;
};

// outbox.capture.* (QueueBox reference Appendix A, §12.2; docs/capture.md): change capture wakes
// delivery from the database's log; SQL stays the truth.
struct CaptureConfig {
  std::string mode = "polling";  // polling | postgres-logical | sqlserver-cdc (not in this build)
  bool enabled = false;          // this replica owns capture (mode must not be polling)
  std::string identity = "queuebox";
  std::string state_directory;        // required when enabled
  std::optional<std::string> schema;  // of the outbox table; unset: public
  std::string publication = "queuebox_outbox";
  std::string slot = "queuebox_outbox";
  int64_t reconciliation_interval_ms = 1000;  // the poller's longest wait in capture mode
  // QueueBox C++ only: the WAL (bytes) the slot may retain before a warning.
  int64_t slot_retention_warn_bytes = int64_t{1} << 30;
  CaptureConnectionConfig connection;
};

struct OutboxConfig {
  int64_t poll_interval_ms = 100;            // outbox.pollIntervalMs
  int batch_size = 100;                      // outbox.batchSize
  int concurrency = 8;                       // outbox.concurrency: messages in flight per replica
  int64_t retry_base_delay_ms = 1000;        // outbox.retryBaseDelayMs
  int max_attempts = 5;                      // outbox.maxAttempts
  int64_t claim_timeout_ms = 300000;         // outbox.claimTimeoutMs: the lease
  int64_t pending_gauge_interval_ms = 5000;  // outbox.pendingGaugeIntervalMs
  int64_t shutdown_timeout_ms = 30000;       // outbox.shutdownTimeoutMs
  bool notify = false;                       // outbox.notify.enabled: LISTEN/NOTIFY wake-up (PG)
  // outbox.keyAffinity.enabled: replicas split the keys (PG; ReplicaMembership::EnableKeyAffinity).
  bool key_affinity = true;
  // outbox.attemptHistory.enabled: every attempt recorded in outbox_attempts
  // (OutboxStore::EnableAttemptHistory; docs/schema.md).
  bool attempt_history = true;
  // outbox.ordering: "sequence" (a key's rows in sequence order among the committed ones) or
  // "strict" (also never past a lower sequence that may still commit; docs/claim.md).
  std::string ordering = "sequence";
  CaptureConfig capture;  // outbox.capture.*
};

// inbox.relay.* (QueueBox reference §11.6, §12.2): the relay that forwards push rows of the inbox
// into the outbox.
struct InboxRelayConfig {
  bool enabled = true;                       // inbox.relay.enabled
  int64_t poll_interval_ms = 100;            // wait between cycles that found nothing
  int batch_size = 100;                      // rows claimed (and forwarded) per cycle
  int workers = 4;                           // forward workers (one lane each at a time)
  int64_t claim_timeout_ms = 300000;         // the lease of a claimed inbox row
  int64_t pending_gauge_interval_ms = 5000;  // queuebox_inbox_oldest_pending_age_seconds refresh
  std::optional<int> max_attempts;           // max_attempts of the outbox rows; unset: outbox's
};

// inbox.* (QueueBox reference §12.2).
struct InboxConfig {
  InboxRelayConfig relay;
  std::string base_path = "/inbox";  // inbox.basePath: prefix of every HTTP source's path
  int64_t max_body_bytes = 1048576;  // inbox.maxBodyBytes: 413 above it, on every data-port route
};

struct HttpConfig {
  int max_error_body_bytes = 2048;       // http.maxErrorBodyBytes
  bool block_private_addresses = false;  // http.blockPrivateAddresses: start-up check of hosts
};

// A JSONata transform block (QueueBox reference §8): routes[i].transform,
// destinations.<name>.transform and sources.<name>.transform.
struct TransformConfig {
  std::string expression;         // JSONata; compiled at start
  int64_t timeout_ms = 100;       // wall-clock limit of one evaluation
  int max_depth = 100;            // evaluation depth limit (jsonata's frames)
  std::string on_error = "Fail";  // Fail | Skip | Dead (exact case)
};

struct RouteConfig {
  std::string topic_pattern;                        // glob: * one segment, ** anything
  std::string destination;                          // a key of destinations
  std::optional<std::string> routing_key_template;  // RabbitMQ routing key / Kafka record key
  std::string routing_key_missing_field_default;    // default ""
  std::optional<TransformConfig> transform = std::nullopt;  // rewrites the delivered body
};

// destinations.<name>.circuitBreaker: what the relay does when the destination is out (an
// outcome of kind kUnavailable, destination.h). Enabled (the default): the row is released with
// its attempt unchanged; `failure_threshold` consecutive outages open the breaker, and while it
// is open the destination's rows are released at once without a publish, due again after
// `open_ms`; after `open_ms` it lets `half_open_probes` rows through: a probe that is not an
// outage closes it, an outage opens it again. Disabled: every failure spends an attempt
// (QueueBox's behaviour).
struct CircuitBreakerConfig {
  bool enabled = true;
  int failure_threshold = 3;  // consecutive outage outcomes that open the breaker; >= 1
  int64_t open_ms = 5000;     // open time (a longer Retry-After wins, up to 10 min); released
                              // rows are due again after it
  int half_open_probes = 1;   // rows published to test recovery; >= 1
  bool operator==(const CircuitBreakerConfig&) const = default;
};

// destinations.<name>.rateLimit: a token bucket of this destination, per replica (each replica
// has its own). Rows beyond it wait pending, spending no attempt.
struct RateLimitConfig {
  std::optional<int64_t> messages_per_second;  // tokens added a second; >= 1 (required)
  std::optional<int64_t> burst;                // tokens kept at most; unset: messages_per_second
  bool operator==(const RateLimitConfig&) const = default;
};

struct DestinationConfig {
  std::string name;                            // destinations.<name>
  std::string type;                            // http | file | kafka | rabbitmq | nats
  std::map<std::string, std::string> headers;  // static headers (row headers win)
  // Every key of the block, validated against the type's option table, defaults filled,
  // secrets resolved, durations in ms. Read by the destination's factory.
  nlohmann::json options = nlohmann::json::object();
  // Rewrites the delivered body after the route's transform (QueueBox reference §8).
  std::optional<TransformConfig> transform = std::nullopt;
  // Outage handling; unset: the defaults of CircuitBreakerConfig (enabled).
  std::optional<CircuitBreakerConfig> circuit_breaker = std::nullopt;
  std::optional<RateLimitConfig> rate_limit = std::nullopt;  // no limit when unset
};

// admin.auth and sources.<name>.auth: `type` and the block's other keys, validated and with
// defaults filled. RequestAuth::Create (src/auth/request_auth.h) binds them into the scheme's
// settings (src/auth/auth_schemes.h).
struct AdminAuthConfig {
  std::string type;  // bearer | api-key | hmac
  nlohmann::json options = nlohmann::json::object();
};

struct AdminConfig {
  bool enabled = false;
  std::optional<AdminAuthConfig> auth;
  bool insecure = false;
  int64_t max_payload_bytes = 65536;
  int64_t max_transform_timeout_ms = 1000;  // upper bound of POST /admin/transform/test timeoutMs
};

// sources.<name>: `type` and the source's other keys, validated against the kind's option table
// with defaults filled (durations in ms, secrets resolved). The source kind's factory binds them
// (src/sources/registry.h), as a destination's factory binds DestinationConfig::options.
struct SourceConfig {
  std::string name;  // sources.<name>; stored in the inbox `source` column
  std::string type;  // http (the default when unset) | rabbitmq | kafka | nats
  nlohmann::json options = nlohmann::json::object();
};

struct RetentionPolicy {
  std::string policy = "DISABLED";  // AGE | COUNT | DISABLED
  std::optional<int64_t> max_age_ms;
  std::optional<int64_t> max_count;
  int64_t cleanup_interval_ms = 3600000;  // 1h
  int batch_size = 1000;
};

struct RetentionConfig {
  bool enabled = false;
  RetentionPolicy outbox;  // sent and dead rows, aged by updated_at
  RetentionPolicy inbox;   // processed and dead rows, aged by created_at (the receipt time)
};

struct LoggingConfig {
  std::string format = "json";  // logging.format: json | text
  std::string level = "info";   // logging.level
};

// telemetry.otlp: where the spans go (docs/operations.md, "Tracing").
struct OtlpConfig {
  std::optional<std::string> endpoint;         // OTLP/HTTP traces URL; unset: no export
  std::map<std::string, std::string> headers;  // sent with every export request (auth)
  int64_t timeout_ms = 5000;                   // one export request
  int queue_size = 4096;                       // spans held for export at most
  int batch_size = 512;                        // spans per export request at most
  int64_t export_interval_ms = 1000;           // longest wait before a partial batch goes
};

// telemetry: W3C trace context propagation and spans (off by default).
struct TelemetryConfig {
  bool enabled = false;      // telemetry.enabled
  bool start_traces = true;  // telemetry.startTraces: a message without a context starts one
  std::string service_name = "queuebox";  // telemetry.serviceName (resource service.name)
  OtlpConfig otlp;
};

// Where a loaded configuration came from (QueueBox reference §12.1): printed by check-config
// and logged at start. Not an option.
struct ConfigOrigin {
  std::string file;     // the YAML file read; empty when none
  int variables = 0;    // QUEUEBOX_* variables that set a key
  std::string skipped;  // a file named by QUEUEBOX_CONFIG_FILE that does not exist; else empty
};

struct Config {
  ServerConfig server;
  DatabaseConfig database;
  OutboxConfig outbox;
  InboxConfig inbox;
  HttpConfig http;
  std::vector<RouteConfig> routes;
  std::map<std::string, DestinationConfig> destinations;
  AdminConfig admin;
  RetentionConfig retention;
  LoggingConfig logging;
  TelemetryConfig telemetry;
  ConfigOrigin origin;
  std::map<std::string, SourceConfig> sources;  // sources.<name> (QueueBox reference §11)
};

}  // namespace queuebox
