// named_sql.h: SQL written with named parameters (:batch_size) and comments, compiled once into
// the positional form the driver takes ($1 on PostgreSQL, ?1 on SQLite) and bound by name.
//
// The text's rules: `:name` (a lower-case letter or _, then letters, digits, _) is a parameter;
// `::` is a cast and stays; text inside '...' and "..." is kept exactly; `--` starts a comment
// that runs to the end of the line. Compile drops the comments and turns every run of whitespace
// outside quotes into one space, so the statement the database sees (and logs) is one line.
//
// Before that, the text is expanded as a template (store/sql_template.h: {if}, {define}, macros).
//
// Errors are bugs in QueueBox's own SQL, so they are kInternal and name the parameter.
// Thread-safety: a compiled NamedSql is immutable; share it freely.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/status.h"
#include "store/common.h"
#include "store/sql_template.h"

namespace queuebox::store {

class NamedSql {
 public:
  // The dialect's marker of positional parameter n (1-based): "$1" or "?1".
  using Marker = std::string (*)(size_t n);

  // `names` are the parameters in position order: names[i] becomes marker(i + 1), so the order
  // of the positional parameters is the order of this list. kInternal when the text uses a name
  // that is not in `names`, a name in `names` is never used, or a quote is not closed.
  // `options`: the template's flags and macros (ExpandSqlTemplate).
  static Result<NamedSql> Compile(std::string_view text, std::vector<std::string> names,
                                  Marker marker, const SqlTemplateOptions& options = {});

  // The statement with positional markers.
  const std::string& sql() const { return sql_; }
  // The parameter names in position order.
  const std::vector<std::string>& names() const { return names_; }

  // The values in position order, from (name, value) pairs in any order. kInternal naming a
  // parameter that is unknown, given twice or not given.
  Result<std::vector<SqlParam>> Bind(
      std::initializer_list<std::pair<std::string_view, SqlParam>> values) const;

 private:
  NamedSql(std::string sql, std::vector<std::string> names)
      : sql_(std::move(sql)), names_(std::move(names)) {}

  std::string sql_;
  std::vector<std::string> names_;
};

// PostgreSQL's marker: "$n".
std::string PgMarker(size_t n);

}  // namespace queuebox::store
