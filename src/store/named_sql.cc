#include "store/named_sql.h"

#include <algorithm>

namespace queuebox::store {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

}  // namespace

std::string PgMarker(size_t n) { return "$" + std::to_string(n); }

Result<NamedSql> NamedSql::Compile(std::string_view source, std::vector<std::string> names,
                                   Marker marker, const SqlTemplateOptions& options) {
  QB_ASSIGN_OR_RETURN(const std::string expanded, ExpandSqlTemplate(source, options));
  const std::string_view text = expanded;
  std::vector<bool> used(names.size(), false);
  std::string out;
  out.reserve(text.size());
  bool space = false;  // whitespace or a comment since the last character written
  const auto put = [&](std::string_view s) {
    if (space && !out.empty()) out += ' ';
    space = false;
    out += s;
  };
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\'' || c == '"') {
      // A quoted literal or identifier; a doubled quote inside is an escaped quote.
      size_t end = i + 1;
      while (true) {
        end = text.find(c, end);
        if (end == std::string_view::npos) {
          return Internal("An SQL quote (" + std::string(1, c) + ") is not closed.");
        }
        if (end + 1 < text.size() && text[end + 1] == c) {
          end += 2;
          continue;
        }
        break;
      }
      put(text.substr(i, end + 1 - i));
      i = end + 1;
    } else if (c == '-' && next == '-') {
      const size_t eol = text.find('\n', i);
      i = eol == std::string_view::npos ? text.size() : eol;
      space = true;
    } else if (IsSpace(c)) {
      space = true;
      ++i;
    } else if (c == ':' && next == ':') {
      put("::");
      i += 2;
    } else if (c == ':' && IsNameStart(next)) {
      size_t end = i + 1;
      while (end < text.size() && IsNameChar(text[end])) ++end;
      const std::string_view name = text.substr(i + 1, end - i - 1);
      const auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) {
        return Internal("The SQL uses the parameter :" + std::string(name) +
                        ", which is not declared.");
      }
      const size_t index = static_cast<size_t>(it - names.begin());
      used[index] = true;
      put(marker(index + 1));
      i = end;
    } else {
      put(text.substr(i, 1));
      ++i;
    }
  }
  for (size_t n = 0; n < names.size(); ++n) {
    if (!used[n]) return Internal("The SQL never uses the parameter :" + names[n] + ".");
  }
  return NamedSql(std::move(out), std::move(names));
}

Result<std::vector<SqlParam>> NamedSql::Bind(
    std::initializer_list<std::pair<std::string_view, SqlParam>> values) const {
  std::vector<SqlParam> params(names_.size());
  std::vector<bool> given(names_.size(), false);
  for (const auto& [name, value] : values) {
    const auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) {
      return Internal("No SQL parameter is named :" + std::string(name) + ".");
    }
    const size_t index = static_cast<size_t>(it - names_.begin());
    if (given[index]) return Internal("The SQL parameter :" + names_[index] + " is bound twice.");
    given[index] = true;
    params[index] = value;
  }
  for (size_t n = 0; n < names_.size(); ++n) {
    if (!given[n]) return Internal("The SQL parameter :" + names_[n] + " is not bound.");
  }
  return params;
}

}  // namespace queuebox::store
