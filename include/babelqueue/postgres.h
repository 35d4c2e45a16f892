// postgres.h: PostgreSQL (libpq) stores for the BabelQueue SDK: the outbox table and the
// idempotency seen-set. The caller owns the connections and every BEGIN/COMMIT.
//
// Outbox table (CreatePostgresOutboxSchema), default name `babelqueue_outbox` (its own table, not
// QueueBox's `outbox`): id BIGINT identity (oldest first = id order), queue TEXT, body BYTEA (the
// envelope bytes verbatim, whatever the database encoding; never JSONB), status 'pending' |
// 'published', attempts, last_error (cut to 500 characters), created_at / published_at /
// failed_at TIMESTAMPTZ, claimed_until TIMESTAMPTZ (the relay's lease), and a partial index on
// pending ids.
//
// Claims: FetchUnpublished runs one UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)
// that sets claimed_until = now() + lease, so rows held by another relay (locked, or leased and not
// yet expired) are skipped; two relays never publish one row concurrently. A relay that dies after
// publishing leaves its rows pending; they are fetched again once the lease expires (at-least-
// once). MarkFailed and MarkPublished release the lease. Every time decision uses the database
// clock.
//
// Errors: kUnavailable when the connection is broken (SQLSTATE class 08 or CONNECTION_BAD),
// kAborted for serialization failures / deadlocks, kFailedPrecondition for Save outside a
// transaction, kInternal for other database errors (the server's message, which never holds the
// body).
// Thread-safety: a PGconn is not thread-safe; use one store (and connection) per thread.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "babelqueue/idempotency.h"
#include "babelqueue/outbox.h"

namespace babelqueue {

// CREATE TABLE / INDEX IF NOT EXISTS for the outbox. `table` must match [A-Za-z_][A-Za-z0-9_]*,
// at most 63 characters (kInvalidArgument otherwise).
Status CreatePostgresOutboxSchema(PGconn* conn, std::string_view table = kDefaultOutboxTable);

struct PostgresOutboxOptions {
  std::string table = kDefaultOutboxTable;
  int64_t lease_ms = 60000;  // how long a fetched row stays claimed (ms), > 0
};

class PostgresOutboxStore final : public OutboxStore {
 public:
  // `conn` is borrowed and must outlive the store. kInvalidArgument for a null connection, a bad
  // table name or lease_ms <= 0.
  static Result<std::unique_ptr<PostgresOutboxStore>> Create(PGconn* conn,
                                                             PostgresOutboxOptions options = {});

  // Requires the caller's open transaction on the connection (kFailedPrecondition otherwise).
  Result<std::string> Save(std::string_view encoded, std::string_view queue) override;
  // Claims and returns up to `limit` rows, oldest first. Runs in the connection's current
  // transaction when there is one, else as one autocommitted statement (the usual relay case).
  Result<std::vector<OutboxRecord>> FetchUnpublished(int limit) override;
  Status MarkPublished(const std::vector<std::string>& ids) override;
  Status MarkFailed(const std::string& id, std::string_view error) override;

 private:
  PostgresOutboxStore(PGconn* conn, PostgresOutboxOptions options);
  PGconn* conn_;
  PostgresOutboxOptions options_;
};

// The seen-set table (Go idempotency-postgres layout): message_id TEXT primary key (the dedupe
// lock), created_at TIMESTAMPTZ, expires_at TIMESTAMPTZ (null = never expires), index on
// expires_at.
Status CreatePostgresSeenSchema(PGconn* conn, std::string_view table = kDefaultIdempotencyTable);

struct PostgresSeenOptions {
  std::string table = kDefaultIdempotencyTable;
  int64_t ttl_ms = 0;  // how long a remembered id counts as seen (ms); <= 0 = forever
};

class PostgresSeenStore final : public SeenStore {
 public:
  static Result<std::unique_ptr<PostgresSeenStore>> Create(PGconn* conn,
                                                           PostgresSeenOptions options = {});
  // Inserts the id; true when this call won it (new, or the previous entry had expired).
  Result<bool> Claim(const std::string& id);
  Result<bool> Seen(const std::string& id) override;  // present and not expired
  Status Remember(const std::string& id) override;    // Claim, ignoring who won
  Status Forget(const std::string& id) override;      // delete
  // Deletes expired ids; returns how many.
  Result<int64_t> DeleteExpired();

 private:
  PostgresSeenStore(PGconn* conn, PostgresSeenOptions options);
  PGconn* conn_;
  PostgresSeenOptions options_;
};

}  // namespace babelqueue
