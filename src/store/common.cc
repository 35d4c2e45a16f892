#include "store/common.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <utility>

#include "store/inbox_columns.h"

namespace queuebox::store {
namespace {

constexpr OutboxColumnField kFields[] = {
    {"id", "id", &OutboxColumns::id},
    {"topic", "topic", &OutboxColumns::topic},
    {"key", "key", &OutboxColumns::key},
    {"aggregate_type", "aggregateType", &OutboxColumns::aggregate_type},
    {"payload", "payload", &OutboxColumns::payload},
    {"headers", "headers", &OutboxColumns::headers},
    {"state", "state", &OutboxColumns::state},
    {"attempt", "attempt", &OutboxColumns::attempt},
    {"max_attempts", "maxAttempts", &OutboxColumns::max_attempts},
    {"scheduled_at", "scheduledAt", &OutboxColumns::scheduled_at},
    {"created_at", "createdAt", &OutboxColumns::created_at},
    {"updated_at", "updatedAt", &OutboxColumns::updated_at},
    {"claimed_at", "claimedAt", &OutboxColumns::claimed_at},
    {"claim_token", "claimToken", &OutboxColumns::claim_token},
    {"lease_expires_at", "leaseExpiresAt", &OutboxColumns::lease_expires_at},
    {"last_error", "lastError", &OutboxColumns::last_error},
    {"sequence", "sequence", &OutboxColumns::sequence},
};

bool IsIdentStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

}  // namespace

std::span<const OutboxColumnField> OutboxColumnFields() { return kFields; }

bool IsValidIdentifier(std::string_view name) {
  if (name.empty() || !IsIdentStart(name[0])) return false;
  for (char c : name) {
    if (!IsIdentChar(c)) return false;
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string Quote(std::string_view name) { return "\"" + std::string(name) + "\""; }

Status ValidateIdentifiers(const DatabaseConfig& config) {
  std::string problems;
  auto check = [&problems](const std::string& setting, const std::string& value) {
    if (IsValidIdentifier(value)) return;
    problems += "\n  - " + setting + ": '" + value +
                "' is not an SQL identifier (letters, digits and _, not starting with a digit)";
  };
  check("database.outboxTableName", config.outbox_table);
  for (const auto& f : kFields) {
    check(std::string("database.columnMapping.outbox.") + f.setting, config.columns.*(f.member));
  }
  check("database.inboxTableName", config.inbox_table);
  for (const InboxColumnField& f : InboxColumnFields()) {
    check(std::string("database.columnMapping.inbox.") + f.setting,
          config.inbox_columns.*(f.member));
  }
  if (problems.empty()) return Status::Ok();
  return InvalidArgument("The database names are not valid:" + problems);
}

std::string RenderSql(std::string_view tmpl, const std::string& table, const OutboxColumns& cols) {
  std::string out;
  out.reserve(tmpl.size() + 64);
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '{') {
      size_t end = tmpl.find('}', i + 1);
      if (end != std::string_view::npos) {
        std::string_view word = tmpl.substr(i + 1, end - i - 1);
        if (word == "T") {
          out += Quote(table);
          i = end + 1;
          continue;
        }
        bool replaced = false;
        for (const auto& f : kFields) {
          if (word == f.name) {
            out += Quote(cols.*(f.member));
            replaced = true;
            break;
          }
        }
        if (replaced) {
          i = end + 1;
          continue;
        }
      }
    }
    out += tmpl[i++];
  }
  return out;
}

Status RequireDefaultSchema(const DatabaseConfig& config) {
  std::vector<std::string> renamed;
  if (config.outbox_table != "outbox") renamed.push_back("database.outboxTableName");
  for (const auto& f : kFields) {
    if (config.columns.*(f.member) != f.name) {
      renamed.push_back(std::string("database.columnMapping.outbox.") + f.setting);
    }
  }
  if (config.inbox_table != "inbox") renamed.push_back("database.inboxTableName");
  for (const InboxColumnField& f : InboxColumnFields()) {
    if (config.inbox_columns.*(f.member) != f.name) {
      renamed.push_back(std::string("database.columnMapping.inbox.") + f.setting);
    }
  }
  if (renamed.empty()) return Status::Ok();
  std::string list;
  for (size_t i = 0; i < renamed.size(); ++i) {
    if (i > 0) list += i + 1 == renamed.size() ? " and " : ", ";
    list += renamed[i];
  }
  return FailedPrecondition(
      "The bundled migrations create the default schema, so they cannot create the one set by " +
      list +
      ". Set 'database.migrate' to false and apply your own schema "
      "(docs/schema.md lists every column).");
}

Status RequireFinishedState(const std::string& state) {
  if (state == kStateSent || state == kStateDead) return Status::Ok();
  return InvalidArgument(
      "Cannot delete active work: retention deletes only 'sent' and 'dead' "
      "rows, not '" +
      state + "'.");
}

RequiredColumn OutboxSequenceColumn(const DatabaseConfig& config, std::string alter) {
  return {"outbox",
          config.outbox_table,
          config.columns.sequence,
          "QueueBox orders the rows of one key by it.",
          StatusCode::kFailedPrecondition,
          std::move(alter)};
}

RequiredColumn InboxHeadersColumn(const DatabaseConfig& config, std::string alter) {
  return {"inbox",
          config.inbox_table,
          config.inbox_columns.headers,
          "QueueBox stores the message headers there.",
          StatusCode::kNotFound,
          std::move(alter)};
}

Status RequireColumn(const RequiredColumn& required, const std::vector<std::string>& columns) {
  const std::string table = std::string(required.kind) + " table '" + required.table + "'";
  if (columns.empty()) {
    return Status(required.missing_table,
                  "The " + table +
                      " does not exist. Run `queuebox migrate` or create it (docs/schema.md), "
                      "then start QueueBox again.");
  }
  for (const std::string& c : columns) {
    if (EqualsIgnoreCase(c, required.column)) return Status::Ok();
  }
  return FailedPrecondition("The " + table + " has no column '" + required.column + "'. " +
                            std::string(required.purpose) +
                            " Add the column, then start QueueBox again: " + required.alter);
}

int32_t MigrationChecksum(std::string_view sql) {
  uint32_t h = 2166136261u;
  for (char c : sql) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return static_cast<int32_t>(h);
}

Result<size_t> SqlTable::Column(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return i;
  }
  return Internal("The statement returned no column '" + std::string(name) + "'.");
}

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace queuebox::store

namespace queuebox::store {

int64_t IntOr(const std::optional<std::string>& v, int64_t fallback) {
  if (!v.has_value()) return fallback;
  return ParseInt(*v).value_or(fallback);
}

std::string TextOr(const std::optional<std::string>& v) { return v.value_or(std::string()); }

std::string TakeText(std::optional<std::string>& v) { return v ? std::move(*v) : std::string(); }

namespace {

bool IsDigits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

}  // namespace

OutboxRow ToOutboxRow(const SqlRow& r) {
  QB_CHECK(r.size() >= 12, "claim row has fewer than 12 columns");
  OutboxRow row;
  row.id = TextOr(r[0]);
  row.topic = TextOr(r[1]);
  row.key = r[2];
  row.payload = TextOr(r[3]);
  row.headers = r[4].value_or("{}");
  row.aggregate_type = r[5];
  row.attempt = static_cast<int>(IntOr(r[6], 0));
  row.max_attempts = static_cast<int>(IntOr(r[7], 5));
  row.sequence = IntOr(r[8], 0);
  row.claim_token = TextOr(r[9]);
  row.created_at = TextOr(r[10]);
  row.scheduled_at = TextOr(r[11]);
  return row;
}

void SortClaimed(std::vector<OutboxRow>& rows) {
  std::sort(rows.begin(), rows.end(), [](const OutboxRow& a, const OutboxRow& b) {
    if (a.scheduled_at != b.scheduled_at) return a.scheduled_at < b.scheduled_at;
    return a.sequence < b.sequence;
  });
}

DeadRow ToDeadRow(const SqlRow& r) {
  QB_CHECK(r.size() >= 6, "dead row has fewer than 6 columns");
  DeadRow row;
  row.id = TextOr(r[0]);
  row.topic = TextOr(r[1]);
  row.key = r[2];
  row.attempt = static_cast<int>(IntOr(r[3], 0));
  row.last_error = TextOr(r[4]);
  row.updated_at = TextOr(r[5]);
  return row;
}

AttemptRow ToAttemptRow(const SqlRow& r) {
  QB_CHECK(r.size() >= 9, "attempt row has fewer than 9 columns");
  AttemptRow row;
  row.message_id = TextOr(r[0]);
  row.attempt = static_cast<int>(IntOr(r[1], 0));
  row.row_table = TextOr(r[2]);
  row.destination = r[3];
  row.outcome = TextOr(r[4]);
  if (r[5]) row.duration_ms = ParseInt(*r[5]);
  row.answer = r[6];
  row.error = r[7];
  row.recorded_at = TextOr(r[8]);
  return row;
}

OutboxStats ToStats(const SqlRows& by_state, const SqlRows& oldest, const SqlRows& dead) {
  OutboxStats stats;
  for (const SqlRow& r : by_state) stats.rows_by_state[TextOr(r[0])] = IntOr(r[1], 0);
  if (!oldest.empty() && oldest[0][0]) {
    stats.oldest_pending_age_seconds = std::max(0.0, std::strtod(oldest[0][0]->c_str(), nullptr));
  }
  for (const SqlRow& r : dead) stats.dead_by_topic[TextOr(r[0])] = IntOr(r[1], 0);
  return stats;
}

OutboxStats ToPendingStats(const SqlRows& count_and_age) {
  OutboxStats stats;
  stats.rows_by_state[std::string(kStatePending)] = 0;
  if (count_and_age.empty() || count_and_age[0].size() != 2) return stats;
  const SqlRow& r = count_and_age[0];
  stats.rows_by_state[std::string(kStatePending)] = IntOr(r[0], 0);
  if (r[1]) stats.oldest_pending_age_seconds = std::max(0.0, std::strtod(r[1]->c_str(), nullptr));
  return stats;
}

std::vector<std::string> FirstColumn(const SqlRows& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const SqlRow& r : rows) out.push_back(TextOr(r[0]));
  return out;
}

std::vector<std::string> FirstColumn(SqlRows&& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (SqlRow& r : rows) out.push_back(TakeText(r[0]));
  return out;
}

Status ValidateRetention(const std::string& state, int64_t limit, const char* limit_name,
                         int batch) {
  QB_RETURN_IF_ERROR(RequireFinishedState(state));
  if (limit < 0 || batch <= 0) {
    return InvalidArgument(std::string("Retention needs ") + limit_name +
                           " >= 0 and a batch above 0.");
  }
  return Status::Ok();
}

Result<std::optional<ReplayStatement>> BuildReplay(const ReplayFilter& filter,
                                                   const ReplayDialect& d) {
  if ((filter.ids && filter.ids->empty()) || (filter.topics && filter.topics->empty())) {
    return std::optional<ReplayStatement>();
  }
  ReplayStatement st;
  // Every replay parameter is text; built in place, never as a moved variant (which g++ 12 at
  // -O3 reports as maybe-uninitialized).
  auto param = [&st, &d](std::string value) {
    st.params.emplace_back(std::move(value));
    return d.param(st.params.size());
  };
  std::string where = "{state} IN ('sent', 'dead')";
  if (filter.ids) where += " AND " + d.in_list("{id}", param(d.list_value(*filter.ids)));
  if (filter.topics) where += " AND " + d.in_list("{topic}", param(d.list_value(*filter.topics)));
  if (filter.created_after) {
    QB_RETURN_IF_ERROR(ValidateInstant(*filter.created_after, "createdAfter"));
    where += " AND {created_at} > " + d.instant(param(*filter.created_after));
  }
  if (filter.created_before) {
    QB_RETURN_IF_ERROR(ValidateInstant(*filter.created_before, "createdBefore"));
    where += " AND {created_at} < " + d.instant(param(*filter.created_before));
  }
  st.sql = "UPDATE {T} SET {state} = 'pending', {attempt} = 0, {scheduled_at} = " + d.now +
           ", {updated_at} = " + d.now +
           ", {last_error} = NULL, {claimed_at} = NULL, {claim_token} = NULL, "
           "{lease_expires_at} = NULL WHERE " +
           where;
  return std::optional<ReplayStatement>(std::move(st));
}

Status ValidateClaim(int limit, int64_t lease_ms) {
  if (limit <= 0)
    return InvalidArgument("The claim limit must be above 0, got " + std::to_string(limit) + ".");
  if (lease_ms <= 0 || lease_ms > 2147483647) {
    return InvalidArgument("The lease must be 1.." + std::to_string(2147483647) + " ms, got " +
                           std::to_string(lease_ms) + ".");
  }
  return Status::Ok();
}

Status ValidateInstant(const std::string& v, const char* what) {
  // YYYY-MM-DDTHH:MM[:SS[.fff...]](Z|+HH:MM|-HH:MM)
  bool ok = IsDigits(v, 0, 4) && v.size() > 16 && v[4] == '-' && IsDigits(v, 5, 2) && v[7] == '-' &&
            IsDigits(v, 8, 2) && (v[10] == 'T' || v[10] == 't') && IsDigits(v, 11, 2) &&
            v[13] == ':' && IsDigits(v, 14, 2);
  size_t i = 16;
  if (ok && i < v.size() && v[i] == ':') {
    ok = IsDigits(v, i + 1, 2);
    i += 3;
    if (ok && i < v.size() && v[i] == '.') {
      size_t start = ++i;
      while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
      ok = i > start;
    }
  }
  if (ok) {
    std::string_view zone = std::string_view(v).substr(std::min(i, v.size()));
    ok = zone == "Z" || zone == "z" ||
         (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && IsDigits(zone, 1, 2) &&
          zone[3] == ':' && IsDigits(zone, 4, 2));
  }
  if (ok) return Status::Ok();
  return InvalidArgument(std::string(what) +
                         " must be an ISO-8601 instant such as "
                         "2024-01-31T10:00:00Z, got '" +
                         v + "'.");
}

}  // namespace queuebox::store
