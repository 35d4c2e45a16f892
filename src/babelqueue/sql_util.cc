// sql_util.cc: see sql_util.h.
#include "sql_util.h"

#include <charconv>

namespace babelqueue::internal {

Status CheckSqlIdentifier(std::string_view name) {
  const auto is_start = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  bool ok = !name.empty() && name.size() <= 63 && is_start(name[0]);
  for (char c : name) ok = ok && (is_start(c) || (c >= '0' && c <= '9'));
  if (!ok) {
    return queuebox::InvalidArgument(
        "table name \"" + std::string(name) +
        "\" must match [A-Za-z_][A-Za-z0-9_]* (at most 63 characters)");
  }
  return Status::Ok();
}

std::string CutError(std::string_view error) {
  size_t chars = 0, i = 0;
  while (i < error.size() && chars < kMaxLastErrorChars) {
    ++i;
    while (i < error.size() && (static_cast<unsigned char>(error[i]) & 0xC0) == 0x80) ++i;
    ++chars;
  }
  return std::string(error.substr(0, i));
}

std::optional<int64_t> ParseRowId(std::string_view id) {
  int64_t value = 0;
  const char* end = id.data() + id.size();
  auto [ptr, ec] = std::from_chars(id.data(), end, value);
  if (id.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::string RowIdList(const std::vector<std::string>& ids, char open, char close) {
  std::string out(1, open);
  for (const std::string& id : ids) {
    if (auto n = ParseRowId(id)) {
      if (out.size() > 1) out.push_back(',');
      out += std::to_string(*n);
    }
  }
  if (out.size() == 1) return {};
  out.push_back(close);
  return out;
}

std::string WithTable(std::string_view sql, std::string_view table) {
  std::string out;
  for (size_t i = 0; i < sql.size();) {
    if (sql.compare(i, 3, "{t}") == 0) {
      out += table;
      i += 3;
    } else {
      out.push_back(sql[i++]);
    }
  }
  return out;
}

}  // namespace babelqueue::internal
