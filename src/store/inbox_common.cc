#include "store/inbox_common.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "json/utf8.h"
#include "store/common.h"
#include "store/inbox_columns.h"

namespace queuebox::store {
namespace {

constexpr InboxColumnField kInboxFields[] = {
    {"id", "id", &InboxColumns::id},
    {"source", "source", &InboxColumns::source},
    {"idempotency_key", "idempotencyKey", &InboxColumns::idempotency_key},
    {"aggregate_id", "aggregateId", &InboxColumns::aggregate_id},
    {"event_type", "eventType", &InboxColumns::event_type},
    {"payload", "payload", &InboxColumns::payload},
    {"state", "state", &InboxColumns::state},
    {"created_at", "createdAt", &InboxColumns::created_at},
    {"processed_at", "processedAt", &InboxColumns::processed_at},
    {"claimed_at", "claimedAt", &InboxColumns::claimed_at},
    {"claim_token", "claimToken", &InboxColumns::claim_token},
    {"lease_expires_at", "leaseExpiresAt", &InboxColumns::lease_expires_at},
    {"correlation_id", "correlationId", &InboxColumns::correlation_id},
    {"consumption", "consumption", &InboxColumns::consumption},
    {"scheduled_at", "scheduledAt", &InboxColumns::scheduled_at},
    {"attempt", "attempt", &InboxColumns::attempt},
    {"last_error", "lastError", &InboxColumns::last_error},
    {"headers", "headers", &InboxColumns::headers},
};

// Validates JSON without building it: nesting depth and no NUL in any string or key.
class CheckingSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& s) override { return Text(s); }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Open(); }
  bool key(string_t& s) override { return Text(s); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    problem = "is not JSON (at byte " + std::to_string(position) + ")";
    return false;
  }

  std::string problem;

 private:
  bool Open() {
    if (++depth_ <= kMaxJsonDepth) return true;
    problem = "nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  }
  bool Close() {
    --depth_;
    return true;
  }
  bool Text(const std::string& s) {
    if (s.find('\0') == std::string::npos) return true;
    problem = "contains a NUL character (\\u0000), which the database cannot store";
    return false;
  }
  int depth_ = 0;
};

// kInvalidArgument "<what> <problem>" unless `text` is one JSON document that passes CheckingSax.
Status CheckJson(const std::string& text, const char* what) {
  CheckingSax sax;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, true);
  } catch (const std::exception&) {
    ok = false;
  }
  if (ok) return Status::Ok();
  return InvalidArgument(std::string(what) + " " +
                         (sax.problem.empty() ? "is not JSON" : sax.problem));
}

// kInvalidArgument unless `text` is UTF-8 without NUL and at most `max` code points.
Status CheckText(const std::string& text, const char* what, size_t max) {
  if (text.find('\0') != std::string::npos) {
    return InvalidArgument(std::string(what) + " contains a NUL character");
  }
  std::optional<size_t> n = queuebox::json::Utf8CodePoints(text);
  if (!n) return InvalidArgument(std::string(what) + " is not UTF-8");
  if (*n > max) {
    return InvalidArgument(std::string(what) + " is longer than " + std::to_string(max) +
                           " characters (" + std::to_string(*n) + ")");
  }
  return Status::Ok();
}

}  // namespace

std::span<const InboxColumnField> InboxColumnFields() { return kInboxFields; }

std::string RenderInboxSql(std::string_view tmpl, const DatabaseConfig& config) {
  std::string out;
  out.reserve(tmpl.size() + 64);
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '{') {
      size_t end = tmpl.find('}', i + 1);
      if (end != std::string_view::npos) {
        std::string_view word = tmpl.substr(i + 1, end - i - 1);
        std::optional<std::string> name;
        if (word == "T") {
          name = config.inbox_table;
        } else if (word == "O") {
          name = config.outbox_table;
        } else if (word.starts_with("o.")) {
          std::string_view col = word.substr(2);
          for (const OutboxColumnField& f : OutboxColumnFields()) {
            if (col == f.name) name = config.columns.*(f.member);
          }
        } else {
          for (const InboxColumnField& f : kInboxFields) {
            if (word == f.name) name = config.inbox_columns.*(f.member);
          }
        }
        if (name) {
          out += Quote(*name);
          i = end + 1;
          continue;
        }
      }
    }
    out += tmpl[i++];
  }
  return out;
}

namespace {

// 8-4-4-4-12 lowercase hex digits.
bool IsLowerUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

Status CheckNewInboxMessage(const NewInboxMessage& m) {
  if (!m.id.empty() && !IsLowerUuid(m.id)) return InvalidArgument("the id is not a UUID");
  if (m.source.empty()) return InvalidArgument("the source is empty");
  QB_RETURN_IF_ERROR(CheckText(m.source, "the source", 255));
  if (m.idempotency_key.empty()) return InvalidArgument("the idempotency key is empty");
  QB_RETURN_IF_ERROR(CheckText(m.idempotency_key, "the idempotency key", 255));
  if (m.aggregate_id) QB_RETURN_IF_ERROR(CheckText(*m.aggregate_id, "the aggregate id", 255));
  if (m.event_type) QB_RETURN_IF_ERROR(CheckText(*m.event_type, "the event type", 255));
  if (m.correlation_id) {
    QB_RETURN_IF_ERROR(CheckText(*m.correlation_id, "the correlation id", 128));
  }
  if (m.delay_ms < 0) return InvalidArgument("the delay is negative");
  // 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z (reference §11.5).
  if (m.publish_time_ms && (*m.publish_time_ms < 0 || *m.publish_time_ms > 253402300799999)) {
    return InvalidArgument("the publish time is outside 1970..9999");
  }
  QB_RETURN_IF_ERROR(CheckText(m.last_error, "the last error", SIZE_MAX));
  QB_RETURN_IF_ERROR(CheckJson(m.payload, "the payload"));
  QB_RETURN_IF_ERROR(CheckJson(m.headers, "the headers"));
  nlohmann::json headers = nlohmann::json::parse(m.headers, nullptr, false);
  if (!headers.is_object()) return InvalidArgument("the headers are not a JSON object");
  for (auto it = headers.begin(); it != headers.end(); ++it) {
    if (!it.value().is_string()) {
      return InvalidArgument("the header '" + it.key() + "' is not a string");
    }
  }
  return Status::Ok();
}

Status ValidateInboxRetention(const std::string& state, int64_t limit, const char* limit_name,
                              int batch) {
  if (state != kInboxStateProcessed && state != kInboxStateDead) {
    return InvalidArgument(
        "Cannot delete active work: inbox retention deletes only processed "
        "and dead rows, not '" +
        state + "'.");
  }
  if (limit < 0) return InvalidArgument(std::string(limit_name) + " must be 0 or more.");
  if (batch <= 0) return InvalidArgument("The retention batch size must be above 0.");
  return Status::Ok();
}

InboxStats ToInboxStats(const SqlRows& by_source_state, const SqlRows& oldest) {
  InboxStats stats;
  for (const SqlRow& r : by_source_state) {
    if (r.size() < 3) continue;
    stats.rows_by_source_state[r[0].value_or("")][r[1].value_or("")] =
        ParseInt(r[2].value_or("0")).value_or(0);
  }
  if (!oldest.empty() && !oldest[0].empty() && oldest[0][0]) {
    stats.oldest_pending_age_seconds = std::max(0.0, std::strtod(oldest[0][0]->c_str(), nullptr));
  }
  return stats;
}

ClaimedInboxRow ToClaimedInboxRow(const SqlRow& r) {
  ClaimedInboxRow row;
  row.id = r[0].value_or("");
  row.source = r[1].value_or("");
  row.idempotency_key = r[2].value_or("");
  row.aggregate_id = r[3];
  row.event_type = r[4];
  row.correlation_id = r[5];
  row.headers = r[6].value_or("{}");
  row.attempt = static_cast<int>(ParseInt(r[7].value_or("0")).value_or(0));
  row.claim_token = r[8].value_or("");
  row.created_at = r[9].value_or("");
  row.scheduled_at = r[10].value_or("");
  return row;
}

DeadInboxRow ToDeadInboxRow(const SqlRow& r) {
  QB_CHECK(r.size() >= 8, "dead inbox row has fewer than 8 columns");
  DeadInboxRow row;
  row.id = r[0].value_or("");
  row.source = r[1].value_or("");
  row.idempotency_key = r[2].value_or("");
  row.aggregate_id = r[3];
  row.event_type = r[4];
  row.attempt = static_cast<int>(ParseInt(r[5].value_or("0")).value_or(0));
  row.last_error = r[6].value_or("");
  row.created_at = r[7].value_or("");
  return row;
}

Result<std::optional<ReplayStatement>> BuildInboxReplay(const InboxReplayFilter& filter,
                                                        const ReplayDialect& d) {
  if ((filter.ids && filter.ids->empty()) || (filter.sources && filter.sources->empty())) {
    return std::optional<ReplayStatement>();
  }
  ReplayStatement st;
  auto param = [&st, &d](std::string value) {
    st.params.emplace_back(std::move(value));
    return d.param(st.params.size());
  };
  std::string where = "{state} IN ('processed', 'dead')";
  if (filter.ids) where += " AND " + d.in_list("{id}", param(d.list_value(*filter.ids)));
  if (filter.sources) {
    where += " AND " + d.in_list("{source}", param(d.list_value(*filter.sources)));
  }
  if (filter.created_after) {
    QB_RETURN_IF_ERROR(ValidateInstant(*filter.created_after, "createdAfter"));
    where += " AND {created_at} > " + d.instant(param(*filter.created_after));
  }
  if (filter.created_before) {
    QB_RETURN_IF_ERROR(ValidateInstant(*filter.created_before, "createdBefore"));
    where += " AND {created_at} < " + d.instant(param(*filter.created_before));
  }
  st.sql = "UPDATE {T} SET {state} = 'pending', {attempt} = 0, {scheduled_at} = " + d.now +
           ", {last_error} = NULL, {claimed_at} = NULL, {processed_at} = NULL, "
           "{claim_token} = NULL, {lease_expires_at} = NULL WHERE " +
           where;
  return std::optional<ReplayStatement>(std::move(st));
}

int64_t JavaStringHash(std::string_view text) {
  uint32_t h = 0;
  for (char c : text) h = 31 * h + static_cast<unsigned char>(c);
  return static_cast<int64_t>(static_cast<int32_t>(h));
}

Result<std::vector<InboxStoreOutcome>> InboxInsertOutcomes(
    const std::vector<const NewInboxMessage*>& batch, const SqlRows& inserted) {
  std::map<std::pair<std::string, std::string>, std::string> ids;
  for (const SqlRow& r : inserted) {
    if (r.size() < 3 || !r[0] || !r[1] || !r[2]) {
      return Internal("The inbox insert returned no id.");
    }
    ids[{*r[1], *r[2]}] = *r[0];
  }
  std::vector<InboxStoreOutcome> out;
  out.reserve(batch.size());
  for (const NewInboxMessage* m : batch) {
    auto it = ids.find({m->source, m->idempotency_key});
    if (it == ids.end()) {
      out.push_back({InboxStoreOutcome::Kind::kDuplicate, "", Status::Ok()});
      continue;
    }
    out.push_back({InboxStoreOutcome::Kind::kStored, std::move(it->second), Status::Ok()});
    ids.erase(it);  // a later message with the same key is a duplicate
  }
  return out;
}

Result<std::vector<InboxStoreOutcome>> StoreInboxBatch(std::span<const NewInboxMessage> messages,
                                                       const InboxBatchInsert& insert) {
  std::vector<InboxStoreOutcome> out(messages.size());
  std::vector<const NewInboxMessage*> ok;
  std::vector<size_t> ok_index;
  for (size_t i = 0; i < messages.size(); ++i) {
    Status s = CheckNewInboxMessage(messages[i]);
    if (!s.ok()) {
      out[i].kind = InboxStoreOutcome::Kind::kRejected;
      out[i].error = std::move(s);
      continue;
    }
    ok.push_back(&messages[i]);
    ok_index.push_back(i);
  }
  if (ok.empty()) return out;
  Result<std::vector<InboxStoreOutcome>> stored = insert(ok);
  if (!stored.ok() && stored.status().code() == StatusCode::kInvalidArgument && ok.size() > 1) {
    // A value the checks let through and the database refused: store one at a time, so
    // only that message is rejected.
    std::vector<InboxStoreOutcome> each;
    for (const NewInboxMessage* m : ok) {
      Result<std::vector<InboxStoreOutcome>> one = insert({m});
      if (one.ok()) {
        each.push_back((*one)[0]);
      } else if (one.status().code() == StatusCode::kInvalidArgument) {
        each.push_back({InboxStoreOutcome::Kind::kRejected, "", one.status()});
      } else {
        return one.status();
      }
    }
    stored = std::move(each);
  }
  if (!stored.ok()) {
    if (stored.status().code() != StatusCode::kInvalidArgument) return stored.status();
    out[ok_index[0]] = {InboxStoreOutcome::Kind::kRejected, "", stored.status()};
    return out;
  }
  for (size_t k = 0; k < ok_index.size(); ++k) out[ok_index[k]] = std::move((*stored)[k]);
  return out;
}

}  // namespace queuebox::store
