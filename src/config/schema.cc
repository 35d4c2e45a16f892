// schema.cc: the option tables (QueueBox reference §5.5, §6, §11.1, §12.2, §13.2). Each row is
// the one declaration of its option: key, type, default, range, description and binding.
#include "config/schema.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <utility>

#include "auth/auth_schemes.h"
#include "core/transform_options.h"
#include "destinations/registry.h"
#include "sources/registry.h"
#include "store/columns.h"
#include "store/inbox_columns.h"

namespace queuebox::cfg {
namespace {

OptionTable<ServerConfig> ServerOptions() {
  using S = ServerConfig;
  return {
      opt::Int("httpPort", &S::http_port, 8080, "Port of the data HTTP server").Range(1, 65535),
      opt::Int("managementPort", &S::management_port, nullptr,
               "Moves /health*, /metrics and /admin/* to this port; must differ from httpPort")
          .Range(1, 65535),
      opt::Text("address", &S::address, "0.0.0.0",
                "Interface both ports bind to: every IPv4 interface by default (QueueBox's "
                "behaviour); 127.0.0.1 keeps them on this host, :: every IPv6 interface"),
  };
}

// database.columnMapping.outbox.<setting>: one row per column of the store's column list.
OptionTable<OutboxColumns> OutboxColumnOptions() {
  OptionTable<OutboxColumns> t;
  for (const store::OutboxColumnField& f : store::OutboxColumnFields()) {
    t.Add(opt::Text(f.setting, f.member, f.name, "Column name in the outbox table").Identifier());
  }
  return t;
}

// database.columnMapping.inbox.<setting>: one row per column of the store's inbox column list.
OptionTable<InboxColumns> InboxColumnOptions() {
  OptionTable<InboxColumns> t;
  for (const store::InboxColumnField& f : store::InboxColumnFields()) {
    t.Add(opt::Text(f.setting, f.member, f.name, "Column name in the inbox table").Identifier());
  }
  return t;
}

OptionTable<DatabaseConfig> DatabaseOptions() {
  using S = DatabaseConfig;
  OptionTable<S> t = {
      opt::Choice("type", &S::type, {"postgresql", "sqlite", "sqlserver"}, nullptr,
                  "Database kind. Unset: the URL decides (postgresql://, postgres://, "
                  "jdbc:postgresql:// are PostgreSQL; a file path or sqlite: is the embedded "
                  "SQLite). Set, it must agree with the URL. sqlserver is refused by this build"),
      opt::Text("url", &S::url, nullptr,
                "PostgreSQL: a postgresql:// or postgres:// URI, or jdbc:postgresql://. SQLite: a "
                "file path or sqlite:<path>. Not a secret (no file:); its password is masked in "
                "printouts")
          .Required(),
      opt::Text("username", &S::username, nullptr, "PostgreSQL role; overrides the URL's user"),
      opt::Secret("password", &S::password, "PostgreSQL password; overrides the URL's password"),
      opt::Int("poolSize", &S::pool_size, 10, "Connections per replica (PostgreSQL)").Min(1),
      opt::Millis("connectionTimeoutMs", &S::connection_timeout_ms, 30000,
                  "Wait for a free pooled connection")
          .Min(1),
      opt::Millis("startupTimeoutMs", &S::startup_timeout_ms, 60000,
                  "Wait for the database at start (retried with backoff, also when the connection "
                  "drops while migrating), then exit")
          .Min(1),
      opt::Flag("migrate", &S::migrate, true,
                "Apply the bundled migrations at start; must be false with a renamed table or "
                "column"),
      opt::Text("outboxTableName", &S::outbox_table, "outbox", "Name of the outbox table")
          .Identifier(),
      opt::Text("inboxTableName", &S::inbox_table, "inbox", "Name of the inbox table").Identifier(),
  };
  t.Nest("columnMapping.outbox", &S::columns, OutboxColumnOptions());
  t.Nest("columnMapping.inbox", &S::inbox_columns, InboxColumnOptions());
  return t;
}

OptionTable<CaptureConnectionConfig> CaptureConnectionOptions() {
  using S = CaptureConnectionConfig;
  return {
      opt::Text("hostname", &S::hostname, nullptr,
                "Capture's host instead of database.url's (required when the URL names several)"),
      opt::Int("port", &S::port, nullptr, "Capture's port instead of database.url's")
          .Range(1, 65535),
      opt::Text("database", &S::database, nullptr, "Capture's database instead of database.url's"),
      opt::Text("username", &S::username, nullptr,
                "Capture's role instead of database.username (needs REPLICATION and SELECT)"),
      opt::Secret("password", &S::password, "Capture's password instead of database.password"),
      opt::Flag("encrypt", &S::encrypt, true, "SQL Server only; unused on PostgreSQL"),
      opt::Flag("trustServerCertificate", &S::trust_server_certificate, false,
                "SQL Server only; unused on PostgreSQL"),
  };
}

OptionTable<CaptureConfig> CaptureOptions() {
  using S = CaptureConfig;
  OptionTable<S> t = {
      opt::Choice("mode", &S::mode, {"polling", "postgres-logical", "sqlserver-cdc"}, "polling",
                  "What wakes delivery: polling, or the database's change stream "
                  "(postgres-logical; sqlserver-cdc is not in this build); must match "
                  "database.type"),
      opt::Flag("enabled", &S::enabled, false,
                "This replica owns capture (one replica per identity); needs mode other than "
                "polling"),
      opt::Text("identity", &S::identity, "queuebox",
                "Name of the capture owner, ^[a-z][a-z0-9_]{0,62}$"),
      opt::Text("stateDirectory", &S::state_directory, "",
                "Durable directory of the capture state (identity, offsets.dat); required when "
                "enabled"),
      opt::Text("schema", &S::schema, nullptr, "Schema of the outbox table (unset: public)")
          .Identifier(),
      opt::Text("publication", &S::publication, "queuebox_outbox",
                "PostgreSQL publication of the outbox table; never created by QueueBox"),
      opt::Text("slot", &S::slot, "queuebox_outbox",
                "PostgreSQL logical replication slot; created on the first start, never dropped"),
      opt::Millis("reconciliationIntervalMs", &S::reconciliation_interval_ms, 1000,
                  "Longest wait of the poller in capture mode (the next due time or lease "
                  "deadline is waited for when nearer)")
          .Min(1),
      opt::Int("slotRetentionWarnBytes", &S::slot_retention_warn_bytes, int64_t{1} << 30,
               "QueueBox C++ only: WAL bytes the slot may retain before a warning (log and "
               "queuebox_capture_slot_retained_bytes)")
          .Min(0),
  };
  t.Nest("connection", &S::connection, CaptureConnectionOptions());
  return t;
}

OptionTable<OutboxConfig> OutboxOptions() {
  using S = OutboxConfig;
  OptionTable<S> t = {
      opt::Millis("pollIntervalMs", &S::poll_interval_ms, 100,
                  "Wait between claims when the last claim found nothing")
          .Min(1),
      opt::Int("batchSize", &S::batch_size, 100, "Rows claimed per claim").Min(1),
      opt::Int("concurrency", &S::concurrency, 8, "Messages in flight per replica").Min(1),
      opt::Millis("retryBaseDelayMs", &S::retry_base_delay_ms, 1000,
                  "Backoff base: base x 2^attempt plus up to 25% jitter, at most 60 s")
          .Min(0),
      opt::Int("maxAttempts", &S::max_attempts, 5, "max_attempts stamped on rows QueueBox creates")
          .Min(1),
      opt::Millis("claimTimeoutMs", &S::claim_timeout_ms, 300000,
                  "Lease of a claim; renewed every third of it while in flight")
          .Min(1),
      opt::Millis("pendingGaugeIntervalMs", &S::pending_gauge_interval_ms, 5000,
                  "Minimum interval between pending-gauge queries")
          .Min(0),
      opt::Millis("shutdownTimeoutMs", &S::shutdown_timeout_ms, 30000,
                  "Wait for in-flight messages at shutdown")
          .Min(1),
      opt::Flag("notify.enabled", &S::notify, false,
                "Wake up on PostgreSQL LISTEN/NOTIFY; polling stays the source of truth"),
      opt::Flag("keyAffinity.enabled", &S::key_affinity, true,
                "PostgreSQL: replicas split the keys between them (a heartbeat in "
                "queuebox_relay_replicas), so adding replicas adds throughput; off: every "
                "replica claims every key"),
      opt::Flag("attemptHistory.enabled", &S::attempt_history, true,
                "Record every delivery attempt (and failed inbox forward) in outbox_attempts, "
                "written with its outcome; retention removes it with its row"),
      opt::Choice("ordering", &S::ordering, {"sequence", "strict"}, "sequence",
                  "Per-key order. sequence: a key's committed rows in sequence order; strict: "
                  "also never a row while a lower sequence of its key may still commit "
                  "(PostgreSQL; SQLite's writers are serialised, so strict is sequence there)"),
  };
  t.Nest("capture", &S::capture, CaptureOptions());
  return t;
}

OptionTable<InboxRelayConfig> InboxRelayOptions() {
  using S = InboxRelayConfig;
  return {
      opt::Flag("enabled", &S::enabled, true,
                "Forward push rows of the inbox into the outbox; false leaves them in the inbox"),
      opt::Millis("pollIntervalMs", &S::poll_interval_ms, 100,
                  "Wait between relay cycles when the last one found nothing")
          .Min(1),
      opt::Int("batchSize", &S::batch_size, 100,
               "Inbox rows claimed and forwarded per cycle (one claim, one forward statement)")
          .Min(1),
      opt::Int("workers", &S::workers, 4,
               "Forward workers per replica, each forwarding one lane of the inbox at a time "
               "(PostgreSQL has 4 lanes, so at most 4 count; SQLite forwards with one)")
          .Range(1, 64),
      opt::Millis("claimTimeoutMs", &S::claim_timeout_ms, 300000,
                  "Lease of a claimed inbox row; an expired claim returns to pending")
          .Range(1, INT_MAX),
      opt::Millis("pendingGaugeIntervalMs", &S::pending_gauge_interval_ms, 5000,
                  "Minimum interval between queries of queuebox_inbox_oldest_pending_age_seconds")
          .Min(0),
      opt::Int("maxAttempts", &S::max_attempts, nullptr,
               "max_attempts of the outbox rows the relay writes; default outbox.maxAttempts")
          .Min(1),
  };
}

OptionTable<InboxConfig> InboxOptions() {
  using S = InboxConfig;
  OptionTable<S> t = {
      opt::Text("basePath", &S::base_path, "/inbox",
                "Prefix of every HTTP source's route (path /stripe answers /inbox/stripe)"),
      opt::Int("maxBodyBytes", &S::max_body_bytes, 1048576,
               "Largest request body on every data-port route; a larger one gets 413 (a declared "
               "length before reading, a chunked body while reading)")
          .Min(1),
  };
  t.Nest("relay", &S::relay, InboxRelayOptions());
  return t;
}

OptionTable<HttpConfig> HttpOptions() {
  return {
      opt::Int("maxErrorBodyBytes", &HttpConfig::max_error_body_bytes, 2048,
               "Bytes of a failed response body kept in last_error (redacted)")
          .Min(1),
      opt::Flag("blockPrivateAddresses", &HttpConfig::block_private_addresses, false,
                "At start, refuse an http destination whose baseUrl or auth tokenUrl host "
                "resolves to a loopback, link-local, site-local, any-local or fc00::/7 address"),
  };
}

OptionTable<AdminConfig> AdminOptions() {
  using S = AdminConfig;
  return {
      opt::Flag("enabled", &S::enabled, false, "Register the /admin/* routes"),
      opt::TypedBlock("auth", &S::auth, AuthVariants(),
                      "Authentication of the admin routes (described below)"),
      opt::Flag("insecure", &S::insecure, false,
                "Allow admin routes without auth (a local test only)"),
      opt::Int("maxPayloadBytes", &S::max_payload_bytes, 65536,
               "Largest admin request body; larger gets 413")
          .Range(1, INT_MAX),
      opt::Millis("maxTransformTimeoutMs", &S::max_transform_timeout_ms, 1000,
                  "Upper bound of the timeoutMs a POST /admin/transform/test request asks for")
          .Min(1),
  };
}

// retention.outbox and retention.inbox.
OptionTable<RetentionPolicy> RetentionPolicyOptions() {
  using S = RetentionPolicy;
  return {
      opt::Choice("policy", &S::policy, {"AGE", "COUNT", "DISABLED"}, "DISABLED",
                  "AGE deletes rows older than maxAge; COUNT keeps the maxCount newest per state"),
      opt::Duration("maxAge", &S::max_age_ms, nullptr,
                    "Age after which finished rows go (outbox: sent/dead by updated_at; inbox: "
                    "processed/dead by created_at); required by AGE"),
      opt::Int("maxCount", &S::max_count, nullptr,
               "Rows kept per finished state (outbox by updated_at, inbox by created_at); "
               "required by COUNT")
          .Min(1),
      opt::Duration("cleanupInterval", &S::cleanup_interval_ms, "1h", "Wait between runs"),
      opt::Int("batchSize", &S::batch_size, 1000, "Rows deleted per statement").Min(1),
  };
}

OptionTable<RetentionConfig> RetentionOptions() {
  OptionTable<RetentionConfig> t = {
      opt::Flag("enabled", &RetentionConfig::enabled, false, "Run the retention loop"),
  };
  t.Nest("outbox", &RetentionConfig::outbox, RetentionPolicyOptions());
  t.Nest("inbox", &RetentionConfig::inbox, RetentionPolicyOptions());
  return t;
}

OptionTable<LoggingConfig> LoggingOptions() {
  using S = LoggingConfig;
  return {
      opt::Choice("format", &S::format, {"json", "text"}, "json",
                  "One JSON object per line, or plain text"),
      opt::Choice("level", &S::level, {"debug", "info", "warn", "error"}, "info",
                  "Lowest level written"),
  };
}

OptionTable<OtlpConfig> OtlpOptions() {
  using S = OtlpConfig;
  return {
      opt::Text("endpoint", &S::endpoint, nullptr,
                "OTLP/HTTP traces URL of a collector, e.g. http://127.0.0.1:4318/v1/traces "
                "(protobuf); unset: spans are not exported"),
      opt::TextMap("headers", &S::headers, "Headers of every export request (e.g. auth)"),
      opt::Millis("timeoutMs", &S::timeout_ms, 5000, "Longest wait for one export request").Min(1),
      opt::Int("queueSize", &S::queue_size, 4096,
               "Spans waiting for export at most; more are dropped and counted")
          .Min(1),
      opt::Int("batchSize", &S::batch_size, 512, "Spans per export request at most").Min(1),
      opt::Millis("exportIntervalMs", &S::export_interval_ms, 1000,
                  "Longest wait before a partial batch is sent")
          .Min(1),
  };
}

OptionTable<TelemetryConfig> TelemetryOptions() {
  using S = TelemetryConfig;
  OptionTable<S> t = {
      opt::Flag("enabled", &S::enabled, false,
                "W3C trace context on every delivery and spans of the inbox and the relay"),
      opt::Flag("startTraces", &S::start_traces, true,
                "A message without a valid traceparent starts a new trace"),
      opt::Text("serviceName", &S::service_name, "queuebox", "Resource service.name of the spans"),
  };
  t.Nest("otlp", &S::otlp, OtlpOptions());
  return t;
}

// A section whose rows bind into the Config member `member`.
template <typename T>
Section MakeSection(std::string name, std::string summary, T Config::*member,
                    const OptionTable<T>& rows) {
  Section s{std::move(name), std::move(summary), {}};
  s.options.Nest("", member, rows);
  return s;
}

std::vector<Section> BuildSections() {
  std::vector<Section> out;
  out.push_back(MakeSection("server",
                            "The HTTP servers of the relay (health, metrics, admin routes).",
                            &Config::server, ServerOptions()));
  out.push_back(MakeSection("database", "Where the outbox and inbox tables live.",
                            &Config::database, DatabaseOptions()));
  out.push_back(MakeSection("outbox", "The relay loop: claiming, retrying and stopping.",
                            &Config::outbox, OutboxOptions()));
  out.push_back(
      MakeSection("inbox",
                  "The inbox: the HTTP sources' routes (see `sources` below) and the relay "
                  "that forwards push rows to the outbox.",
                  &Config::inbox, InboxOptions()));
  out.push_back(
      MakeSection("http", "Settings shared by HTTP destinations.", &Config::http, HttpOptions()));
  out.push_back(MakeSection("admin", "The admin routes (replay). `admin.auth` is described below.",
                            &Config::admin, AdminOptions()));
  out.push_back(MakeSection("retention",
                            "Deletion of old finished rows: sent and dead outbox rows, processed "
                            "and dead inbox rows.",
                            &Config::retention, RetentionOptions()));
  out.push_back(
      MakeSection("logging", "Log lines on standard output.", &Config::logging, LoggingOptions()));
  out.push_back(MakeSection("telemetry", "Tracing: W3C trace context and OTLP span export.",
                            &Config::telemetry, TelemetryOptions()));
  return out;
}

}  // namespace

const char kAdminGuardMessage[] =
    "The admin routes are enabled with no authentication. Set 'admin.auth' to a bearer token, an "
    "API key, or an HMAC signature. Set 'admin.insecure' to true only for a local test, or set "
    "'admin.enabled' to false.";

const std::vector<Section>& RootSections() {
  static const std::vector<Section>* const sections = new std::vector<Section>(BuildSections());
  return *sections;
}

const OptionTable<Config>& RootOptions() {
  static const OptionTable<Config>* const table = [] {
    auto* t = new OptionTable<Config>();
    for (const Section& s : RootSections()) t->Append(s.name, s.options);
    return t;
  }();
  return *table;
}

const std::vector<OptionSpec>& RootTable() { return RootOptions().specs(); }

const std::vector<std::string>& ReservedRootKeys() {
  static const std::vector<std::string>* const keys =
      new std::vector<std::string>{"routes", "destinations", "sources"};
  return *keys;
}

const OptionTable<RouteConfig>& RouteOptions() {
  using S = RouteConfig;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Text("topicPattern", &S::topic_pattern, nullptr,
                "Glob on the whole topic: `*` one segment without a dot, `**` any text; not "
                "blank, no `***`")
          .Required(),
      opt::Text("destination", &S::destination, nullptr, "Name of a destination").Required(),
      opt::Text("routingKeyTemplate", &S::routing_key_template, nullptr,
                "RabbitMQ routing key / Kafka record key, e.g. `{{ topic }}`"),
      opt::Text("routingKeyMissingFieldDefault", &S::routing_key_missing_field_default, "",
                "Rendered for a placeholder whose value is missing"),
      opt::Block("transform", &S::transform, TransformOptions(),
                 "JSONata rewrite of the delivered body for this route's rows (described "
                 "below); the row keeps its payload"),
  };
  return *table;
}

const OptionTable<CircuitBreakerConfig>& CircuitBreakerOptions() {
  using S = CircuitBreakerConfig;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Flag("enabled", &S::enabled, true,
                "Outages (connection refused, DNS, connect timeout, TLS, broker down, HTTP "
                "429/502/503/504) release the row without spending an attempt and count toward "
                "opening the breaker. false: every failure spends an attempt (QueueBox)"),
      opt::Int("failureThreshold", &S::failure_threshold, 3,
               "Consecutive outage outcomes that open the breaker")
          .Min(1),
      opt::Millis("openMs", &S::open_ms, 5000,
                  "How long the breaker stays open (a longer Retry-After wins, up to 10 min); "
                  "released rows are due again after it")
          .Min(1),
      opt::Int("halfOpenProbes", &S::half_open_probes, 1,
               "Rows published after the open time to test recovery")
          .Min(1),
  };
  return *table;
}

const OptionTable<RateLimitConfig>& RateLimitOptions() {
  using S = RateLimitConfig;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Int("messagesPerSecond", &S::messages_per_second, nullptr,
               "Messages a second this destination gets, per replica")
          .Range(1, 1000000)
          .Required(),
      opt::Int("burst", &S::burst, nullptr,
               "Messages sent at once after a quiet spell (tokens kept); unset: "
               "messagesPerSecond")
          .Range(1, 1000000),
  };
  return *table;
}

const OptionTable<DestinationConfig>& DestinationCommonOptions() {
  static const OptionTable<DestinationConfig>* const table = new OptionTable<DestinationConfig>{
      opt::TextMap("headers", &DestinationConfig::headers,
                   "Static headers on every message; a row header of the same name wins"),
      opt::Block("transform", &DestinationConfig::transform, TransformOptions(),
                 "JSONata rewrite of the delivered body, after the route's transform "
                 "(described below); the row keeps its payload"),
      opt::Block("circuitBreaker", &DestinationConfig::circuit_breaker, CircuitBreakerOptions(),
                 "What an outage of this destination does (described below); absent: the "
                 "defaults, enabled"),
      opt::Block("rateLimit", &DestinationConfig::rate_limit, RateLimitOptions(),
                 "Token bucket of this destination, per replica (each replica has its own); rows "
                 "beyond it wait pending until their turn and spend no attempt"),
  };
  return *table;
}

const std::vector<Variant>& DestinationVariants() {
  static const std::vector<Variant>* const variants = [] {
    auto* v = new std::vector<Variant>();
    for (const DestinationType& t : BuiltinDestinationTypes()) {
      v->push_back(Variant{t.type, t.options, t.validate, nullptr});
    }
    return v;
  }();
  return *variants;
}

const std::vector<Variant>& SourceVariants() {
  static const std::vector<Variant>* const variants = [] {
    auto* v = new std::vector<Variant>();
    for (const sources::SourceKind& k : sources::BuiltinSourceKinds()) {
      v->push_back(Variant{k.type, k.options, k.validate, nullptr});
    }
    return v;
  }();
  return *variants;
}

std::string KnownTypes(const std::vector<Variant>& variants) {
  std::vector<std::string> names;
  for (const Variant& v : variants) names.push_back(v.type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace queuebox::cfg
