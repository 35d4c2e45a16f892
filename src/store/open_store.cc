// open_store.cc: picks the dialect named by database.type, whose values the database.type row
// declares (src/config/schema.cc).
#include "store/open_store.h"

#include <utility>

#include "store/postgres/pg_notify.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace queuebox {

Result<std::unique_ptr<OutboxStore>> OpenStore(const DatabaseConfig& given) {
  DatabaseConfig config = given;
  if (config.type.empty()) {
    Result<std::string> kind = store::DatabaseKindOfUrl(config.url);
    if (!kind.ok()) return InvalidArgument("database.url " + kind.status().message());
    config.type = *kind;
  }
  if (config.type == "sqlserver") return InvalidArgument(store::kSqlServerUnsupported);
  if (config.type == "sqlite") {
    QB_ASSIGN_OR_RETURN(auto store, store::SqliteOutboxStore::Open(config));
    return std::unique_ptr<OutboxStore>(std::move(store));
  }
  if (config.type == "postgresql") {
    QB_ASSIGN_OR_RETURN(auto store, store::PostgresOutboxStore::Open(config));
    return std::unique_ptr<OutboxStore>(std::move(store));
  }
  return InvalidArgument("database.type '" + config.type +
                         "' is not supported. Known types: postgresql, sqlite.");
}

Result<std::unique_ptr<InsertListener>> OpenInsertListener(const DatabaseConfig& config,
                                                           std::function<void()> on_wake) {
  if (config.type != "postgresql") return std::unique_ptr<InsertListener>();
  QB_ASSIGN_OR_RETURN(auto listener, store::PgNotifyListener::Create(config, std::move(on_wake)));
  return std::unique_ptr<InsertListener>(std::move(listener));
}

}  // namespace queuebox
