// pull_test_support.h: the inbox table for the pull tests (tests/contract/pull_*_test.cc) and the
// pull SQL files of the repository (sql/pull/<dialect>/*.sql), read from the source tree.
//
// Until the inbox migrations are on main, the table comes from the fixture DDL below, written from
// the reference's final inbox table (PostgreSQL: reference §3.3, every column, the unique
// (source, idempotency_key) and the nine indexes; SQLite: the same columns in the types the
// outbox mirror uses: UUID and time as text, times ISO-8601 UTC with milliseconds).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace queuebox::testing {

// The text of sql/pull/<dialect>/<name>.sql exactly as the repository holds it.
inline std::string ReadPullSql(std::string_view dialect, std::string_view name) {
  const std::string path = std::string(QUEUEBOX_SOURCE_DIR) + "/sql/pull/" + std::string(dialect) +
                           "/" + std::string(name) + ".sql";
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces every "{T}" of `text` with `table`.
inline std::string WithInboxTable(std::string text, std::string_view table) {
  for (size_t at = text.find("{T}"); at != std::string::npos; at = text.find("{T}", at)) {
    text.replace(at, 3, table);
    at += table.size();
  }
  return text;
}

inline constexpr std::string_view kPgInboxFixture = R"sql(
CREATE TABLE {T} (
  id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  source VARCHAR(255) NOT NULL,
  idempotency_key VARCHAR(255) NOT NULL,
  aggregate_id VARCHAR(255),
  event_type VARCHAR(255),
  payload JSONB NOT NULL,
  state VARCHAR(50) NOT NULL DEFAULT 'pending',
  created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
  processed_at TIMESTAMP WITH TIME ZONE,
  claimed_at TIMESTAMP WITH TIME ZONE,
  correlation_id VARCHAR(128),
  claim_token UUID,
  lease_expires_at TIMESTAMPTZ,
  consumption VARCHAR(4) NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
  scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
  attempt INT NOT NULL DEFAULT 0,
  last_error TEXT,
  headers JSONB NOT NULL DEFAULT '{}',
  CONSTRAINT uq_{T}_source_idempotency UNIQUE (source, idempotency_key)
);
CREATE INDEX idx_{T}_pending ON {T} (state) WHERE state = 'pending';
CREATE INDEX idx_{T}_source ON {T} (source);
CREATE INDEX idx_{T}_aggregate_state ON {T} (aggregate_id, state);
CREATE INDEX idx_{T}_processing_claimed ON {T} (claimed_at) WHERE state = 'processing';
CREATE INDEX idx_{T}_state_created ON {T} (state, created_at);
CREATE INDEX idx_{T}_consumption_pending ON {T} (consumption, state, scheduled_at);
CREATE INDEX idx_{T}_pull_pending ON {T} (source, scheduled_at, created_at, id)
  WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX idx_{T}_pull_busy ON {T} (source, aggregate_id, lease_expires_at)
  WHERE consumption = 'pull' AND state = 'processing';
)sql";

inline constexpr std::string_view kSqliteInboxFixture = R"sql(
CREATE TABLE {T} (
  id TEXT PRIMARY KEY NOT NULL DEFAULT (lower(
      hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
      substr(hex(randomblob(2)), 2) || '-' ||
      substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' ||
      hex(randomblob(6)))),
  source TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  aggregate_id TEXT,
  event_type TEXT,
  payload TEXT NOT NULL CHECK (json_valid(payload)),
  state TEXT NOT NULL DEFAULT 'pending',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  processed_at TEXT,
  claimed_at TEXT,
  correlation_id TEXT,
  claim_token TEXT,
  lease_expires_at TEXT,
  consumption TEXT NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
  scheduled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  attempt INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  headers TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(headers)),
  UNIQUE (source, idempotency_key)
);
CREATE INDEX idx_{T}_pull_pending ON {T} (source, scheduled_at, created_at, id)
  WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX idx_{T}_pull_busy ON {T} (source, aggregate_id, lease_expires_at)
  WHERE consumption = 'pull' AND state = 'processing';
)sql";

}  // namespace queuebox::testing
