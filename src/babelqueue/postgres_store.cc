// postgres_store.cc: PostgresOutboxStore and PostgresSeenStore (see postgres.h).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "babelqueue/postgres.h"
#include "sql_util.h"

namespace babelqueue {
namespace {

using internal::CheckSqlIdentifier;
using internal::WithTable;

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// One parameter: text (or binary when `binary`), or SQL NULL.
struct Param {
  std::optional<std::string_view> value;
  bool binary = false;
};

Status PgError(PGconn* conn, const PGresult* res, std::string_view what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  std::string text = std::string(what) + ": " + message;
  const std::string_view sqlstate = state ? state : "";
  if (PQstatus(conn) == CONNECTION_BAD || sqlstate.substr(0, 2) == "08") {
    return queuebox::Unavailable(std::move(text));
  }
  if (sqlstate == "40001" || sqlstate == "40P01") return queuebox::Aborted(std::move(text));
  return queuebox::Internal(std::move(text));
}

Result<PgResult> Exec(PGconn* conn, const std::string& sql, const std::vector<Param>& params,
                      std::string_view what) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  std::vector<std::string> text_copies;  // text parameters must be NUL terminated
  text_copies.reserve(params.size());
  for (const Param& p : params) {
    if (!p.value) {
      values.push_back(nullptr);
      lengths.push_back(0);
    } else if (p.binary) {
      values.push_back(p.value->data());
      lengths.push_back(static_cast<int>(p.value->size()));
    } else {
      text_copies.emplace_back(*p.value);
      values.push_back(text_copies.back().c_str());
      lengths.push_back(0);
    }
    formats.push_back(p.binary ? 1 : 0);
  }
  PgResult res(PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr,
                            values.data(), lengths.data(), formats.data(), 0));
  const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return PgError(conn, res.get(), what);
  return res;
}

Status ExecScript(PGconn* conn, const std::string& sql, std::string_view what) {
  PgResult res(PQexec(conn, sql.c_str()));
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) return PgError(conn, res.get(), what);
  return Status::Ok();
}

Status CheckConn(PGconn* conn) {
  if (conn == nullptr) return queuebox::InvalidArgument("the PostgreSQL connection is null");
  return Status::Ok();
}

constexpr std::string_view kPostgresOutboxDdl = R"sql(
CREATE TABLE IF NOT EXISTS {t} (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue TEXT NOT NULL,
  body BYTEA NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  published_at TIMESTAMPTZ,
  failed_at TIMESTAMPTZ,
  claimed_until TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS {t}_pending_idx ON {t} (id) WHERE status = 'pending';
)sql";

constexpr std::string_view kSeenDdl = R"sql(
CREATE TABLE IF NOT EXISTS {t} (
  message_id TEXT PRIMARY KEY,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS {t}_expires_idx ON {t} (expires_at);
)sql";

}  // namespace

Status CreatePostgresOutboxSchema(PGconn* conn, std::string_view table) {
  QB_RETURN_IF_ERROR(CheckConn(conn));
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(table));
  return ExecScript(conn, WithTable(kPostgresOutboxDdl, table), "create the outbox table");
}

PostgresOutboxStore::PostgresOutboxStore(PGconn* conn, PostgresOutboxOptions options)
    : conn_(conn), options_(std::move(options)) {}

Result<std::unique_ptr<PostgresOutboxStore>> PostgresOutboxStore::Create(
    PGconn* conn, PostgresOutboxOptions options) {
  QB_RETURN_IF_ERROR(CheckConn(conn));
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(options.table));
  if (options.lease_ms <= 0) return queuebox::InvalidArgument("lease_ms must be > 0");
  return std::unique_ptr<PostgresOutboxStore>(new PostgresOutboxStore(conn, std::move(options)));
}

Result<std::string> PostgresOutboxStore::Save(std::string_view encoded, std::string_view queue) {
  if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
    return queuebox::FailedPrecondition(
        "outbox save must run inside the caller's open transaction (BEGIN first)");
  }
  QB_ASSIGN_OR_RETURN(
      PgResult res,
      Exec(conn_,
           WithTable("INSERT INTO {t} (queue, body) VALUES ($1, $2) RETURNING id", options_.table),
           {{queue}, {encoded, true}}, "save the outbox row"));
  return std::string(PQgetvalue(res.get(), 0, 0));
}

Result<std::vector<OutboxRecord>> PostgresOutboxStore::FetchUnpublished(int limit) {
  std::vector<OutboxRecord> out;
  if (limit <= 0) return out;
  const std::string sql = WithTable(R"sql(
UPDATE {t} SET claimed_until = now() + make_interval(secs => $2::bigint / 1000.0)
WHERE id IN (SELECT id FROM {t}
             WHERE status = 'pending' AND (claimed_until IS NULL OR claimed_until <= now())
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, body, queue, attempts)sql",
                                    options_.table);
  const std::string limit_text = std::to_string(limit);
  const std::string lease_text = std::to_string(options_.lease_ms);
  QB_ASSIGN_OR_RETURN(PgResult res,
                      Exec(conn_, sql, {{limit_text}, {lease_text}}, "claim outbox rows"));
  for (int i = 0; i < PQntuples(res.get()); ++i) {
    OutboxRecord rec;
    rec.id = PQgetvalue(res.get(), i, 0);
    size_t len = 0;
    unsigned char* raw =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(res.get(), i, 1)), &len);
    if (raw == nullptr) return queuebox::Internal("cannot decode the outbox body (out of memory)");
    rec.body.assign(reinterpret_cast<const char*>(raw), len);
    PQfreemem(raw);
    rec.queue = PQgetvalue(res.get(), i, 2);
    rec.attempts = std::stoi(PQgetvalue(res.get(), i, 3));
    out.push_back(std::move(rec));
  }
  // RETURNING has no order: oldest (lowest id) first.
  std::sort(out.begin(), out.end(), [](const OutboxRecord& a, const OutboxRecord& b) {
    return internal::ParseRowId(a.id) < internal::ParseRowId(b.id);
  });
  return out;
}

Status PostgresOutboxStore::MarkPublished(const std::vector<std::string>& ids) {
  const std::string array = internal::RowIdList(ids, '{', '}');
  if (array.empty()) return Status::Ok();
  return Exec(conn_,
              WithTable("UPDATE {t} SET status = 'published', published_at = now(), "
                        "claimed_until = NULL WHERE id = ANY($1::bigint[]) AND status = 'pending'",
                        options_.table),
              {{array}}, "mark outbox rows published")
      .status();
}

Status PostgresOutboxStore::MarkFailed(const std::string& id, std::string_view error) {
  const auto row_id = internal::ParseRowId(id);
  if (!row_id) return Status::Ok();  // not a row of this store
  const std::string id_text = std::to_string(*row_id);
  const std::string cut = internal::CutError(error);
  return Exec(conn_,
              WithTable("UPDATE {t} SET attempts = attempts + 1, last_error = $2, "
                        "failed_at = now(), claimed_until = NULL "
                        "WHERE id = $1::bigint AND status = 'pending'",
                        options_.table),
              {{id_text}, {cut}}, "mark an outbox row failed")
      .status();
}

// ---- PostgresSeenStore ----

Status CreatePostgresSeenSchema(PGconn* conn, std::string_view table) {
  QB_RETURN_IF_ERROR(CheckConn(conn));
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(table));
  return ExecScript(conn, WithTable(kSeenDdl, table), "create the idempotency table");
}

PostgresSeenStore::PostgresSeenStore(PGconn* conn, PostgresSeenOptions options)
    : conn_(conn), options_(std::move(options)) {}

Result<std::unique_ptr<PostgresSeenStore>> PostgresSeenStore::Create(PGconn* conn,
                                                                     PostgresSeenOptions options) {
  QB_RETURN_IF_ERROR(CheckConn(conn));
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(options.table));
  if (options.ttl_ms < 0) options.ttl_ms = 0;
  return std::unique_ptr<PostgresSeenStore>(new PostgresSeenStore(conn, std::move(options)));
}

Result<bool> PostgresSeenStore::Claim(const std::string& id) {
  const std::string sql = WithTable(R"sql(
INSERT INTO {t} AS s (message_id, created_at, expires_at)
VALUES ($1, now(), CASE WHEN $2::bigint > 0
                        THEN now() + make_interval(secs => $2::bigint / 1000.0) END)
ON CONFLICT (message_id) DO UPDATE
  SET created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
  WHERE s.expires_at IS NOT NULL AND s.expires_at <= now()
RETURNING message_id)sql",
                                    options_.table);
  const std::string ttl = std::to_string(options_.ttl_ms);
  QB_ASSIGN_OR_RETURN(PgResult res, Exec(conn_, sql, {{id}, {ttl}}, "claim a message id"));
  return PQntuples(res.get()) > 0;
}

Result<bool> PostgresSeenStore::Seen(const std::string& id) {
  QB_ASSIGN_OR_RETURN(PgResult res, Exec(conn_,
                                         WithTable("SELECT 1 FROM {t} WHERE message_id = $1 "
                                                   "AND (expires_at IS NULL OR expires_at > now())",
                                                   options_.table),
                                         {{id}}, "look up a message id"));
  return PQntuples(res.get()) > 0;
}

Status PostgresSeenStore::Remember(const std::string& id) { return Claim(id).status(); }

Status PostgresSeenStore::Forget(const std::string& id) {
  return Exec(conn_, WithTable("DELETE FROM {t} WHERE message_id = $1", options_.table), {{id}},
              "forget a message id")
      .status();
}

Result<int64_t> PostgresSeenStore::DeleteExpired() {
  QB_ASSIGN_OR_RETURN(
      PgResult res,
      Exec(conn_,
           WithTable("DELETE FROM {t} WHERE expires_at IS NOT NULL AND expires_at <= now()",
                     options_.table),
           {}, "delete expired message ids"));
  return static_cast<int64_t>(std::stoll(PQcmdTuples(res.get())));
}

}  // namespace babelqueue
