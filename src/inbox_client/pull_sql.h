// pull_sql.h: the pull SQL contract as the worker runs it (internal to queuebox_inbox): the files
// sql/pull/<dialect>/*.sql embedded at build time, rendered for a mapped schema, their :named
// parameters turned into the dialect's positional markers and bound by name.
//
// Rendering changes only identifiers and parameters: every bare word that is one of the default
// inbox names (the table `inbox` and its columns) becomes the mapped name, quoted ("name"; the
// table qualified by the schema when one is set); `:name` becomes $n (PostgreSQL) or ?n (SQLite),
// one number per distinct name; comments are dropped. Quoted text ('...', "...") and `::` casts
// are kept as written, so the statement is the tested file with other names.
//
// Thread-safety: pure functions; a RenderedSql is immutable.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/inbox/database.h"
#include "queuebox/inbox/pull_worker.h"

namespace queuebox::inbox::internal {

enum class PullStatement { kClaim, kRenew, kComplete, kRetry, kDead };

// The text of sql/pull/<dialect>/<statement>.sql exactly as the repository holds it.
std::string_view PullSqlText(Dialect dialect, PullStatement statement);

// kInvalidArgument naming the field when a name of `schema` is not a plain identifier
// ([A-Za-z_][A-Za-z0-9_$]*, 1..63 characters; `schema.schema` may be empty).
Status CheckSchema(const InboxSchema& schema);

class RenderedSql {
 public:
  const std::string& sql() const { return sql_; }
  const std::vector<std::string>& names() const { return names_; }  // position order
  // The values in position order; kInternal naming a parameter that is unknown, missing or given
  // twice (a bug of the caller or of the file).
  Result<std::vector<SqlValue>> Bind(
      std::initializer_list<std::pair<std::string_view, SqlValue>> values) const;

 private:
  friend Result<RenderedSql> RenderPullSql(std::string_view, Dialect, const InboxSchema&);
  std::string sql_;
  std::vector<std::string> names_;
};

// Renders `text` (see above). kInternal when a quote is not closed; kInvalidArgument for a bad
// schema name.
Result<RenderedSql> RenderPullSql(std::string_view text, Dialect dialect,
                                  const InboxSchema& schema);

}  // namespace queuebox::inbox::internal
