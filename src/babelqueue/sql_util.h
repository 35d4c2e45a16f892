// sql_util.h: helpers shared by the SDK's database stores (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "babelqueue/envelope.h"

namespace babelqueue::internal {

inline constexpr size_t kMaxLastErrorChars = 500;

// kInvalidArgument unless `name` is [A-Za-z_][A-Za-z0-9_]* and at most 63 characters, so a table
// name can be spliced into SQL safely.
Status CheckSqlIdentifier(std::string_view name);

// `error` cut to at most kMaxLastErrorChars characters without splitting a UTF-8 sequence.
std::string CutError(std::string_view error);

// The decimal row id, or nullopt when `id` is not one (such an id cannot name a row).
std::optional<int64_t> ParseRowId(std::string_view id);

// The row ids among `ids` joined with ',' between `open` and `close` ("{1,2}" for a PostgreSQL
// array, "[1,2]" for JSON); "" when none of them is a row id (unknown ids are ignored).
std::string RowIdList(const std::vector<std::string>& ids, char open, char close);

// Replaces every "{t}" in `sql` with `table`.
std::string WithTable(std::string_view sql, std::string_view table);

}  // namespace babelqueue::internal
