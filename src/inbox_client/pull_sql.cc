#include "inbox_client/pull_sql.h"

#include <algorithm>
#include <array>
#include <utility>

namespace queuebox::inbox::internal {

std::string_view EmbeddedPullSql(std::string_view dialect, std::string_view name);

namespace {

bool IsWordStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsWordChar(char c) { return IsWordStart(c) || (c >= '0' && c <= '9') || c == '$'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

bool IsIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 63 || !IsWordStart(name[0])) return false;
  return std::all_of(name.begin(), name.end(), IsWordChar);
}

std::string Quote(std::string_view name) { return "\"" + std::string(name) + "\""; }

// (default name, mapped name) for the table and every column the statements name.
std::vector<std::pair<std::string_view, std::string>> Names(const InboxSchema& s) {
  return {{"inbox", s.schema.empty() ? Quote(s.table) : Quote(s.schema) + "." + Quote(s.table)},
          {"id", Quote(s.id)},
          {"source", Quote(s.source)},
          {"idempotency_key", Quote(s.idempotency_key)},
          {"aggregate_id", Quote(s.aggregate_id)},
          {"event_type", Quote(s.event_type)},
          {"payload", Quote(s.payload)},
          {"state", Quote(s.state)},
          {"created_at", Quote(s.created_at)},
          {"processed_at", Quote(s.processed_at)},
          {"claimed_at", Quote(s.claimed_at)},
          {"correlation_id", Quote(s.correlation_id)},
          {"claim_token", Quote(s.claim_token)},
          {"lease_expires_at", Quote(s.lease_expires_at)},
          {"consumption", Quote(s.consumption)},
          {"scheduled_at", Quote(s.scheduled_at)},
          {"attempt", Quote(s.attempt)},
          {"last_error", Quote(s.last_error)},
          {"headers", Quote(s.headers)}};
}

}  // namespace

std::string_view PullSqlText(Dialect dialect, PullStatement statement) {
  static constexpr std::array<std::string_view, 5> kNames = {"claim", "renew", "complete", "retry",
                                                             "dead"};
  return EmbeddedPullSql(DialectName(dialect), kNames[static_cast<size_t>(statement)]);
}

Status CheckSchema(const InboxSchema& s) {
  const std::pair<const char*, const std::string*> fields[] = {
      {"table", &s.table},
      {"id", &s.id},
      {"source", &s.source},
      {"idempotency_key", &s.idempotency_key},
      {"aggregate_id", &s.aggregate_id},
      {"event_type", &s.event_type},
      {"payload", &s.payload},
      {"state", &s.state},
      {"created_at", &s.created_at},
      {"processed_at", &s.processed_at},
      {"claimed_at", &s.claimed_at},
      {"correlation_id", &s.correlation_id},
      {"claim_token", &s.claim_token},
      {"lease_expires_at", &s.lease_expires_at},
      {"consumption", &s.consumption},
      {"scheduled_at", &s.scheduled_at},
      {"attempt", &s.attempt},
      {"last_error", &s.last_error},
      {"headers", &s.headers}};
  if (!s.schema.empty() && !IsIdentifier(s.schema)) {
    return InvalidArgument(
        "InboxSchema.schema is not a plain SQL identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 63 "
        "characters)");
  }
  for (const auto& [field, value] : fields) {
    if (!IsIdentifier(*value)) {
      return InvalidArgument(std::string("InboxSchema.") + field +
                             " is not a plain SQL identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 63 "
                             "characters)");
    }
  }
  return Status::Ok();
}

Result<RenderedSql> RenderPullSql(std::string_view text, Dialect dialect,
                                  const InboxSchema& schema) {
  QB_RETURN_IF_ERROR(CheckSchema(schema));
  const auto names = Names(schema);
  RenderedSql out;
  std::string& sql = out.sql_;
  sql.reserve(text.size() + 64);
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\'' || c == '"') {
      size_t end = i + 1;
      while (true) {
        end = text.find(c, end);
        if (end == std::string_view::npos) {
          return Internal(std::string("an SQL quote (") + c + ") of the pull SQL is not closed");
        }
        if (end + 1 < text.size() && text[end + 1] == c) {
          end += 2;
          continue;
        }
        break;
      }
      sql.append(text.substr(i, end + 1 - i));
      i = end + 1;
    } else if (c == '-' && next == '-') {
      const size_t eol = text.find('\n', i);
      i = eol == std::string_view::npos ? text.size() : eol;
    } else if (c == ':' && next == ':') {
      // A cast: the type name that follows is not a column.
      size_t end = i + 2;
      while (end < text.size() && IsWordChar(text[end])) ++end;
      sql.append(text.substr(i, end - i));
      i = end;
    } else if (c == ':' && IsWordStart(next)) {
      size_t end = i + 1;
      while (end < text.size() && IsWordChar(text[end])) ++end;
      const std::string name(text.substr(i + 1, end - i - 1));
      auto it = std::find(out.names_.begin(), out.names_.end(), name);
      if (it == out.names_.end()) it = out.names_.insert(out.names_.end(), name);
      const size_t position = static_cast<size_t>(it - out.names_.begin()) + 1;
      sql += (dialect == Dialect::kPostgreSQL ? "$" : "?") + std::to_string(position);
      i = end;
    } else if (IsWordStart(c)) {
      size_t end = i + 1;
      while (end < text.size() && IsWordChar(text[end])) ++end;
      const std::string_view word = text.substr(i, end - i);
      const auto mapped =
          std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == word; });
      if (mapped != names.end()) {
        sql += mapped->second;
      } else {
        sql.append(word);
      }
      i = end;
    } else if (IsSpace(c)) {
      if (!sql.empty() && sql.back() != ' ') sql += ' ';
      ++i;
    } else {
      sql += c;
      ++i;
    }
  }
  while (!sql.empty() && (sql.back() == ' ' || sql.back() == ';')) sql.pop_back();
  return out;
}

Result<std::vector<SqlValue>> RenderedSql::Bind(
    std::initializer_list<std::pair<std::string_view, SqlValue>> values) const {
  std::vector<SqlValue> params(names_.size());
  std::vector<bool> given(names_.size(), false);
  for (const auto& [name, value] : values) {
    const auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) {
      return Internal("the pull SQL has no parameter :" + std::string(name));
    }
    const size_t index = static_cast<size_t>(it - names_.begin());
    if (given[index])
      return Internal("the pull SQL parameter :" + names_[index] + " is bound twice");
    given[index] = true;
    params[index] = value;
  }
  for (size_t n = 0; n < names_.size(); ++n) {
    if (!given[n]) return Internal("the pull SQL parameter :" + names_[n] + " is not bound");
  }
  return params;
}

}  // namespace queuebox::inbox::internal
