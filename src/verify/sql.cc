#include "verify/sql.h"

#include "queuebox/inbox.h"

namespace queuebox::verify {
namespace {

std::string QuoteName(const std::string& name) { return "\"" + name + "\""; }

std::map<std::string, std::string> NamesOf(const DatabaseConfig& db) {
  const OutboxColumns& o = db.columns;
  const InboxColumns& i = db.inbox_columns;
  std::map<std::string, std::string> names = {
      {"T", db.outbox_table},
      {"I", db.inbox_table},
      {"id", o.id},
      {"topic", o.topic},
      {"key", o.key},
      {"state", o.state},
      {"attempt", o.attempt},
      {"scheduled_at", o.scheduled_at},
      {"created_at", o.created_at},
      {"updated_at", o.updated_at},
      {"claimed_at", o.claimed_at},
      {"lease_expires_at", o.lease_expires_at},
      {"last_error", o.last_error},
      {"headers", o.headers},
      {"sequence", o.sequence},
      {"i.id", i.id},
      {"i.source", i.source},
      {"i.idempotency_key", i.idempotency_key},
      {"i.state", i.state},
      {"i.created_at", i.created_at},
      {"i.processed_at", i.processed_at},
      {"i.consumption", i.consumption},
  };
  for (auto& [token, name] : names) name = QuoteName(name);
  return names;
}

}  // namespace

std::string Dialect::Ts(const std::string& column) const {
  if (!postgres) return column;
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

std::string Dialect::Text(const std::string& column) const {
  return postgres ? column + "::text" : column;
}

std::string Dialect::Now() const {
  return postgres ? "statement_timestamp()" : "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
}

std::string Dialect::Ago(const std::string& ms) const {
  if (postgres) return "(statement_timestamp() - " + ms + "::bigint * interval '1 millisecond')";
  return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (" + ms + " / 1000.0) || ' seconds')";
}

std::string Dialect::Instant(const std::string& param) const {
  return postgres ? param + "::timestamptz" : "strftime('%Y-%m-%dT%H:%M:%fZ', " + param + ")";
}

std::string Dialect::Header(const std::string& column, const std::string& name) const {
  if (postgres) return "(" + column + " ->> '" + name + "')";
  return "json_extract(" + column + ", '$.\"" + name + "\"')";
}

Query::Query(const DatabaseConfig& database, const Dialect& dialect)
    : names_(NamesOf(database)), dialect_(dialect) {}

Query& Query::operator<<(const std::string& tmpl) {
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find('{', pos);
    size_t close = open == std::string::npos ? open : tmpl.find('}', open);
    if (close == std::string::npos) {
      sql_.append(tmpl, pos, std::string::npos);
      break;
    }
    auto it = names_.find(tmpl.substr(open + 1, close - open - 1));
    sql_.append(tmpl, pos, open - pos);
    sql_ += it != names_.end() ? it->second : tmpl.substr(open, close - open + 1);
    pos = close + 1;
  }
  return *this;
}

std::string Query::Bind(ReadParam value) {
  params_.push_back(std::move(value));
  return (dialect_.postgres ? "$" : "?") + std::to_string(params_.size());
}

std::string Query::OutboxFilter(const std::string& alias, const Options& options) {
  std::string out;
  if (options.since) {
    out += " AND " + alias + ".{created_at} >= " + dialect_.Instant(Bind(*options.since));
  }
  if (options.topic) out += " AND " + alias + ".{topic} = " + Bind(*options.topic);
  if (options.key) out += " AND " + alias + ".{key} = " + Bind(*options.key);
  return out;
}

std::string Row::operator[](std::string_view column) const {
  for (size_t c = 0; c < table_.columns.size(); ++c) {
    if (table_.columns[c] == column) return table_.rows[index_][c].value_or("");
  }
  return "";
}

}  // namespace queuebox::verify
