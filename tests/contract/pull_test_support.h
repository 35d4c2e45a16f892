// pull_test_support.h: the inbox table for the pull tests (tests/contract/pull_*_test.cc) and the
// pull SQL files of the repository (sql/pull/<dialect>/*.sql), read from the source tree.
//
// The inbox is created by the bundled migrations (store/open_store.h, PostgreSQL V2-V10 and
// V18-V19, the SQLite mirror), never by DDL of the tests' own.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "queuebox/store.h"
#include "store/open_store.h"
#include "testing/source_dir.h"

namespace queuebox::testing {

// The text of sql/pull/<dialect>/<name>.sql exactly as the repository holds it.
inline std::string ReadPullSql(std::string_view dialect, std::string_view name) {
  const std::string path = std::string(QUEUEBOX_SOURCE_DIR) + "/sql/pull/" + std::string(dialect) +
                           "/" + std::string(name) + ".sql";
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Creates QueueBox's schema (the outbox and the inbox) in a fresh database through the bundled
// migrations, as `queuebox migrate` and main's inbox tests do. `type` is "postgresql" (url: a libpq
// URL) or "sqlite" (url: "sqlite:<file>").
inline void MigrateQueueBoxSchema(const std::string& type, const std::string& url) {
  DatabaseConfig config;
  config.type = type;
  config.url = url;
  config.pool_size = 2;
  auto store = OpenStore(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto report = (*store)->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
}

}  // namespace queuebox::testing
