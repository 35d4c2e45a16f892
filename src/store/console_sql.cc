#include "store/console_sql.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "store/inbox_common.h"
#include "store/postgres/pg_arrays.h"

namespace queuebox::store {
namespace {

constexpr int kMaxLimit = 500;
constexpr char kCursorSeparator = '|';
// Rows an error-text filter reads per page (docs/console.md, "Rows"): about 40 ms on PostgreSQL.
constexpr int kErrorSearchWindow = 10000;

bool IsOutbox(const std::string& table) { return table == "outbox"; }

std::string SqliteList(const std::vector<std::string>& items) {
  return nlohmann::json(items).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

// The terms of a WHERE with their parameters, numbered in order.
struct SqlConsole::Where {
  bool pg;
  std::vector<std::string> terms;
  std::vector<SqlParam> params;

  // The placeholder of a new parameter; `cast` is PostgreSQL's ("::uuid").
  std::string P(SqlParam value, const char* cast = "") {
    params.push_back(std::move(value));
    const std::string n = std::to_string(params.size());
    return pg ? "$" + n + cast : "?" + n;
  }
  std::string Sql() const {
    std::string out;
    for (size_t i = 0; i < terms.size(); ++i) out += (i == 0 ? " WHERE " : " AND ") + terms[i];
    return out;
  }
};

const std::vector<std::string>& ConsoleStates(const std::string& table) {
  static const std::vector<std::string> kOutbox{"pending", "processing", "sent", "dead"};
  static const std::vector<std::string> kInbox{"pending", "processing", "processed", "dead"};
  static const std::vector<std::string> kNone;
  if (IsOutbox(table)) return kOutbox;
  return table == "inbox" ? kInbox : kNone;
}

SqlConsole::SqlConsole(DatabaseConfig config, bool postgres, Reader read, Reader write,
                       Discarder discard)
    : config_(std::move(config)),
      pg_(postgres),
      read_(std::move(read)),
      write_(std::move(write)),
      discard_(std::move(discard)) {}

std::string SqlConsole::Render(const std::string& table, const std::string& tmpl) const {
  return IsOutbox(table) ? RenderSql(tmpl, config_.outbox_table, config_.columns)
                         : RenderInboxSql(tmpl, config_);
}

std::string SqlConsole::Time(const std::string& column) const { return pg_ ? Ts(column) : column; }

std::string SqlConsole::Columns(const std::string& table, bool whole) const {
  const std::string id = pg_ ? "{id}::text" : "{id}";
  std::string cols;
  if (IsOutbox(table)) {
    cols = id + ", {state}, {topic}, {key}, NULL, NULL, {attempt}, {max_attempts}, {sequence}, " +
           "{last_error}, " + Time("{created_at}") + ", " + Time("{updated_at}") + ", " +
           Time("{scheduled_at}");
  } else {
    cols = id + ", {state}, {source}, {aggregate_id}, {event_type}, {idempotency_key}, " +
           "{attempt}, NULL, NULL, {last_error}, " + Time("{created_at}") + ", " +
           Time("coalesce({processed_at}, {created_at})") + ", " + Time("{scheduled_at}");
  }
  if (whole) cols += pg_ ? ", {payload}::text, {headers}::text" : ", {payload}, {headers}";
  return cols;
}

ConsoleRow SqlConsole::ReadRow(const std::string& table, const SqlRow& r, bool whole) {
  ConsoleRow row;
  row.table = table;
  row.id = TextOr(r[0]);
  row.state = TextOr(r[1]);
  row.topic = TextOr(r[2]);
  row.key = r[3];
  row.event_type = r[4];
  row.idempotency_key = r[5];
  row.attempt = static_cast<int>(IntOr(r[6], 0));
  if (r[7]) row.max_attempts = static_cast<int>(IntOr(r[7], 0));
  if (r[8]) row.sequence = IntOr(r[8], 0);
  row.last_error = r[9];
  row.created_at = TextOr(r[10]);
  row.updated_at = TextOr(r[11]);
  row.scheduled_at = r[12];
  if (whole && r.size() >= 15) {
    row.payload = r[13];
    row.headers = r[14];
  }
  return row;
}

std::string SqlConsole::ErrorContains(const std::string& text, Where& w) const {
  return (pg_ ? "strpos(lower({last_error}), lower(" : "instr(lower({last_error}), lower(") +
         w.P(text, "::text") + ")) > 0";
}

std::string SqlConsole::Position(const ConsoleRow& row) {
  return IsOutbox(row.table) ? row.updated_at + kCursorSeparator + std::to_string(*row.sequence)
                             : row.created_at + kCursorSeparator + row.id;
}

Result<bool> SqlConsole::Filters(const ConsoleQuery& q, Where& w) const {
  const std::vector<std::string>& states = ConsoleStates(q.table);
  if (states.empty()) return InvalidArgument("'table' must be outbox or inbox");
  const bool outbox = IsOutbox(q.table);
  if (q.state) {
    if (std::find(states.begin(), states.end(), *q.state) == states.end()) {
      return InvalidArgument("'state' of the " + q.table + " is one of pending, processing, " +
                             (outbox ? "sent" : "processed") + ", dead");
    }
    w.terms.push_back("{state} = " + w.P(*q.state));
  }
  if (q.topics && !outbox) return InvalidArgument("'topic' and 'destination' filter the outbox");
  if (q.source && outbox) return InvalidArgument("'source' filters the inbox");
  if (q.topics) {
    if (q.topics->empty()) return false;
    w.terms.push_back(pg_ ? "{topic} = ANY(" + w.P(PgArray(*q.topics), "::text[]") + ")"
                          : "{topic} IN (SELECT value FROM json_each(" +
                                w.P(SqliteList(*q.topics)) + "))");
  }
  if (q.source) w.terms.push_back("{source} = " + w.P(*q.source));
  if (q.key) w.terms.push_back((outbox ? "{key} = " : "{aggregate_id} = ") + w.P(*q.key));
  if (q.error_contains) w.terms.push_back(ErrorContains(*q.error_contains, w));
  for (auto [value, op, name] : {std::tuple{&q.created_after, " > ", "createdAfter"},
                                 std::tuple{&q.created_before, " < ", "createdBefore"}}) {
    if (!*value) continue;
    QB_RETURN_IF_ERROR(ValidateInstant(**value, name));
    const std::string p = w.P(**value, "::timestamptz");
    w.terms.push_back("{created_at}" + std::string(op) +
                      (pg_ ? p : "strftime('%Y-%m-%dT%H:%M:%fZ', " + p + ")"));
  }
  return true;
}

Status SqlConsole::Cursor(const ConsoleQuery& q, Where& w) const {
  if (!q.cursor) return Status::Ok();
  const size_t bar = q.cursor->rfind(kCursorSeparator);
  const auto bad = [] { return InvalidArgument("'cursor' is not a cursor this API gave"); };
  if (bar == std::string::npos) return bad();
  const std::string time = q.cursor->substr(0, bar), last = q.cursor->substr(bar + 1);
  if (!ValidateInstant(time, "cursor").ok()) return bad();
  if (IsOutbox(q.table)) {
    std::optional<int64_t> sequence = ParseInt(last);
    if (!sequence) return bad();
    w.terms.push_back("({updated_at}, {sequence}) < (" + w.P(time, "::timestamptz") + ", " +
                      w.P(*sequence, "::bigint") + ")");
  } else {
    if (!IsUuid(last)) return bad();
    w.terms.push_back("({created_at}, {id}) < (" + w.P(time, "::timestamptz") + ", " +
                      w.P(last, "::uuid") + ")");
  }
  return Status::Ok();
}

Result<ConsolePage> SqlConsole::List(const ConsoleQuery& q) {
  if (q.limit < 1 || q.limit > kMaxLimit) {
    return InvalidArgument("'limit' must be 1.." + std::to_string(kMaxLimit));
  }
  ConsoleQuery others = q;  // the error text is searched within a window (SearchErrors)
  others.error_contains.reset();
  Where w{pg_, {}, {}};
  QB_ASSIGN_OR_RETURN(bool matches, Filters(others, w));
  QB_RETURN_IF_ERROR(Cursor(q, w));
  if (!matches) return ConsolePage{};
  if (q.error_contains) return SearchErrors(q, w);
  const std::string limit = w.P(int64_t{q.limit} + 1, "::int");
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      read_(Render(q.table, "SELECT " + Columns(q.table, false) + " FROM {T}" +
                                                w.Sql() + Order(q.table) + " LIMIT " + limit),
                            w.params));
  ConsolePage page;
  for (const SqlRow& r : rows) {
    if (static_cast<int>(page.rows.size()) == q.limit) {
      page.next = Position(page.rows.back());
      break;
    }
    page.rows.push_back(ReadRow(q.table, r, false));
  }
  return page;
}

std::string SqlConsole::Order(const std::string& table) {
  return IsOutbox(table) ? " ORDER BY {updated_at} DESC, {sequence} DESC"
                         : " ORDER BY {created_at} DESC, {id} DESC";
}

// One statement: the window (the next kErrorSearchWindow rows of the other filters, in page order)
// is read once; from it come the matches (limit + 1, to know of a next page) and its last row with
// the count read, marked `edge`. Columns: the row's (0-12), hit, o1, o2, edge, read.
Result<ConsolePage> SqlConsole::SearchErrors(const ConsoleQuery& q, Where& w) {
  const bool outbox = IsOutbox(q.table);
  const std::string hit = ErrorContains(*q.error_contains, w);
  const std::string window = w.P(int64_t{kErrorSearchWindow}, "::int");
  const std::string limit = w.P(int64_t{q.limit} + 1, "::int");
  const std::string sql =
      "WITH scan AS (SELECT " + Columns(q.table, false) + ", " + hit + " AS hit, " +
      (outbox ? "{updated_at} AS o1, {sequence} AS o2" : "{created_at} AS o1, {id} AS o2") +
      " FROM {T}" + w.Sql() + Order(q.table) + " LIMIT " + window +
      ") SELECT * FROM (SELECT *, 0 AS edge, 0 AS done FROM scan WHERE hit ORDER BY o1 DESC, o2 "
      "DESC LIMIT " +
      limit +
      ") m UNION ALL SELECT * FROM (SELECT *, 1, (SELECT count(*) FROM scan) FROM scan ORDER BY "
      "o1, o2 LIMIT 1) e";
  QB_ASSIGN_OR_RETURN(SqlRows rows, read_(Render(q.table, sql), w.params));
  ConsolePage page;
  page.searched = 0;
  std::optional<ConsoleRow> edge;
  for (const SqlRow& r : rows) {
    if (r.size() < 18) return Internal("the console's error search returned a short row");
    if (IntOr(r[16], 0) == 1) {
      edge = ReadRow(q.table, r, false);
      page.searched = IntOr(r[17], 0);
    } else if (static_cast<int>(page.rows.size()) == q.limit) {
      page.next = Position(page.rows.back());
    } else {
      page.rows.push_back(ReadRow(q.table, r, false));
    }
  }
  if (!page.next && edge && *page.searched >= kErrorSearchWindow) page.next = Position(*edge);
  return page;
}

Result<int64_t> SqlConsole::Count(const ConsoleQuery& q) {
  Where w{pg_, {}, {}};
  QB_ASSIGN_OR_RETURN(bool matches, Filters(q, w));
  if (!matches) return int64_t{0};
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      read_(Render(q.table, "SELECT count(*) FROM {T}" + w.Sql()), w.params));
  return rows.empty() ? 0 : IntOr(rows[0][0], 0);
}

}  // namespace queuebox::store
