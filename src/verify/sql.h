// sql.h: the statements of `queuebox verify` in both dialects. A statement is a template whose
// {T} (outbox), {I} (inbox), {name} (outbox column) and {i.name} (inbox column) become the mapped,
// quoted names of database.*; Query binds its parameters in order.
//
// Thread-safety: a Query is used by one thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "store/read_only_session.h"
#include "verify/verify.h"

namespace queuebox::verify {

// How one dialect writes the parts that differ.
struct Dialect {
  bool postgres = true;
  std::string Ts(const std::string& column) const;      // a timestamp as ISO-8601 UTC text
  std::string Text(const std::string& column) const;    // a UUID (or text) column as text
  std::string Now() const;                              // the database clock
  std::string Ago(const std::string& ms) const;         // the clock minus `ms` milliseconds
  std::string Instant(const std::string& param) const;  // an ISO-8601 parameter, comparable
  std::string Header(const std::string& column, const std::string& name) const;  // JSON text
};

class Query {
 public:
  Query(const DatabaseConfig& database, const Dialect& dialect);
  // Appends template text (names rendered).
  Query& operator<<(const std::string& tmpl);
  // The placeholder of a new parameter.
  std::string Bind(ReadParam value);
  // " AND <alias>.created_at >= .. AND <alias>.topic = .. AND <alias>.key = .." for the options'
  // filters.
  std::string OutboxFilter(const std::string& alias, const Options& options);
  Result<ReadTable> Run(ReadOnlySession& session) const { return session.Query(sql_, params_); }
  const std::string& sql() const { return sql_; }

 private:
  std::map<std::string, std::string> names_;
  const Dialect& dialect_;
  std::string sql_;
  std::vector<ReadParam> params_;
};

// A result row's columns by name, "" for NULL.
class Row {
 public:
  Row(const ReadTable& table, size_t index) : table_(table), index_(index) {}
  std::string operator[](std::string_view column) const;

 private:
  const ReadTable& table_;
  size_t index_;
};

}  // namespace queuebox::verify
