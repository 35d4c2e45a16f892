// DatabaseKindOfUrl (store/open_store.h): the database kind a database.url names.
#include <cctype>

#include "store/open_store.h"

namespace queuebox::store {

Result<std::string> DatabaseKindOfUrl(std::string_view url) {
  if (url.empty()) {
    return InvalidArgument(
        "is empty; give a PostgreSQL URL (postgresql://host/db or jdbc:postgresql://host/db) or "
        "the path of a SQLite file");
  }
  auto starts = [&](std::string_view p) { return url.substr(0, p.size()) == p; };
  if (starts("postgresql://") || starts("postgres://") || starts("jdbc:postgresql://")) {
    return std::string("postgresql");
  }
  if (starts("jdbc:sqlserver://")) return std::string("sqlserver");
  if (starts("sqlite:") || starts("jdbc:sqlite:") || starts("file:")) return std::string("sqlite");
  // A scheme is letters, digits, + . - after a letter, then ':'; jdbc: names a sub-scheme.
  size_t end = 0;
  while (end < url.size() && (std::isalnum(static_cast<unsigned char>(url[end])) ||
                              url[end] == '+' || url[end] == '.' || url[end] == '-')) {
    ++end;
  }
  const bool has_scheme = end > 0 && end < url.size() && url[end] == ':' &&
                          std::isalpha(static_cast<unsigned char>(url[0]));
  if (!has_scheme) return std::string("sqlite");  // a file path
  std::string scheme(url.substr(0, end));
  if (scheme == "jdbc") {
    size_t sub = end + 1;
    while (sub < url.size() && std::isalnum(static_cast<unsigned char>(url[sub]))) ++sub;
    scheme = std::string(url.substr(0, sub));
  }
  return InvalidArgument("uses the scheme '" + scheme +
                         "', which QueueBox C++ does not support; give a PostgreSQL URL "
                         "(postgresql://, postgres:// or jdbc:postgresql://) or the path of a "
                         "SQLite file (or sqlite:<path>)");
}

}  // namespace queuebox::store
