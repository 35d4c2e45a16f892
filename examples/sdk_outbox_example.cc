// sdk_outbox_example.cc: the BabelQueue transactional outbox end to end with SQLite.
//
//   sdk_outbox_example [database.db] [out.jsonl]
//
// 1. In ONE transaction the program inserts a business row (orders) and writes its envelope to
//    the babelqueue_outbox table: both commit together, or neither does.
// 2. A relay on a second connection drains the outbox to the relay's `file` destination (one JSON
//    line per message) and prints how many messages it published.
#include <sqlite3.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "babelqueue/envelope.h"
#include "babelqueue/outbox.h"
#include "babelqueue/sqlite.h"
#include "destinations/babelqueue_transport/destination_transport.h"
#include "destinations/file/file_destination.h"

namespace {

bool Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::cerr << sql << ": " << (err ? err : "error") << "\n";
    sqlite3_free(err);
    return false;
  }
  return true;
}

struct Db {
  sqlite3* handle = nullptr;
  ~Db() { sqlite3_close(handle); }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string db_path = argc > 1 ? argv[1] : "sdk_outbox_example.db";
  const std::string out_path = argc > 2 ? argv[2] : "sdk_outbox_example.jsonl";

  // --- producer: business row + envelope in one transaction ---
  Db app;
  if (sqlite3_open(db_path.c_str(), &app.handle) != SQLITE_OK) return 1;
  sqlite3_busy_timeout(app.handle, 5000);
  if (!Exec(app.handle, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, total REAL)")) {
    return 1;
  }
  if (babelqueue::Status s = babelqueue::CreateSqliteOutboxSchema(app.handle); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  auto store = babelqueue::SqliteOutboxStore::Create(app.handle);
  if (!store.ok()) return 1;
  babelqueue::Outbox outbox(**store);

  if (!Exec(app.handle, "BEGIN")) return 1;
  if (!Exec(app.handle, "INSERT INTO orders (total) VALUES (99.9)")) return 1;
  const auto order_id = sqlite3_last_insert_rowid(app.handle);
  auto envelope = babelqueue::Make("urn:babel:orders:created",
                                   babelqueue::Json{{"order_id", order_id}, {"total", 99.9}},
                                   {.queue = "orders", .trace_id = ""});
  auto row_id = envelope.ok() ? outbox.Write(*envelope) : envelope.status();
  if (!row_id.ok()) {
    std::cerr << "outbox write failed: " << row_id.status().message() << "\n";
    Exec(app.handle, "ROLLBACK");
    return 1;
  }
  if (!Exec(app.handle, "COMMIT")) return 1;
  std::cout << "order " << order_id << " committed with outbox row " << *row_id << " (message "
            << envelope->meta.id << ")\n";

  // --- relay: drain the outbox to the file destination ---
  Db relay_db;
  if (sqlite3_open(db_path.c_str(), &relay_db.handle) != SQLITE_OK) return 1;
  sqlite3_busy_timeout(relay_db.handle, 5000);
  auto relay_store = babelqueue::SqliteOutboxStore::Create(relay_db.handle);
  auto transport = babelqueue::DestinationTransport::Create(
      std::make_unique<queuebox::FileDestination>(queuebox::FileDestinationSettings{
          .name = "example", .path = out_path, .fsync = true, .static_headers = {}}));
  if (!relay_store.ok() || !transport.ok()) {
    std::cerr << "relay setup failed: "
              << (transport.ok() ? relay_store.status().message() : transport.status().message())
              << "\n";
    return 1;
  }
  babelqueue::OutboxRelay relay(**transport, **relay_store);
  babelqueue::RelayResult result = relay.Drain();
  std::cout << "published " << result.published << ", failed " << result.failed << " -> "
            << out_path << "\n";
  if (!result.status.ok()) std::cerr << result.status.message() << "\n";
  return result.status.ok() && result.failed == 0 ? 0 : 1;
}
