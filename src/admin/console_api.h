// console_api.h: the operator console's JSON API under /admin/api/ (docs/console.md). The admin
// server registers the routes when admin.enabled and the store has console reads, and runs each
// handler after admin.auth accepted the request (the same 401/413 rules as /admin/replay).
//
//   GET  /admin/api/overview            rows per state, oldest pending age, sent/dead per minute
//                                       of every replica (queuebox_console_activity), destinations
//                                       and their circuits, replicas, capture
//   GET  /admin/api/messages            a page of rows (query: table, state, topic, destination,
//                                       source, key, error, createdAfter, createdBefore, cursor,
//                                       limit)
//   GET  /admin/api/messages/<id>       one row whole (query: table), its attempts, the rows of
//                                       its key waiting behind it / the outbox row it became
//   GET  /admin/api/inbox/lookup        the inbox row of source + idempotencyKey, with the
//                                       outbox row it became
//   POST /admin/api/replay              by ids or by filter: {"matching": n} without
//                                       "confirm": true, {"moved": n} with it
//   POST /admin/api/discard             dead rows by ids or filter, the same confirmation
//
// Errors: 400 {"error": "Invalid request: <reason>"}, 404 {"error": "No such message"},
// 503/500 {"error": ...} when the database fails.
//
// Thread-safety: handlers run on the server's worker threads, several at once; the borrowed
// parts are thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/router.h"
#include "queuebox/config.h"
#include "queuebox/console.h"
#include "queuebox/inbox.h"
#include "queuebox/store.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace queuebox {

class Metrics;

class ConsoleApi {
 public:
  // Borrowed pointers must outlive the API; `inbox`, `replicas` and `metrics` may be null.
  ConsoleApi(const Config& config, const Router& router, OutboxOperations& store,
             ConsoleQueries& console, InboxOperations* inbox, ReplicaMembership* replicas,
             Metrics* metrics)
      : config_(config),
        router_(router),
        store_(store),
        console_(console),
        inbox_(inbox),
        replicas_(replicas),
        metrics_(metrics) {}

  void Overview(const httplib::Request& req, httplib::Response& res);
  void Messages(const httplib::Request& req, httplib::Response& res);
  void Message(const httplib::Request& req, httplib::Response& res);  // id in matches[1]
  void InboxLookup(const httplib::Request& req, httplib::Response& res);
  void Replay(const std::string& body, httplib::Response& res);
  void Discard(const std::string& body, httplib::Response& res);

 private:
  // A list query from the API's filter names, `destination` resolved into topics through the
  // live routes (intersected with `topic`).
  Result<ConsoleQuery> Query(const std::map<std::string, std::string>& fields);
  // Replay and discard (console_actions.cc): the rows a body names, counted or acted on.
  struct Target;
  Result<Target> TargetOf(const std::string& body, bool discard);
  Result<int64_t> Matching(const Target& target);
  Result<int64_t> Act(const Target& target, bool discard);
  Result<int64_t> ActOnIds(const std::string& table, const std::vector<std::string>& ids,
                           bool discard);
  void Action(const std::string& body, httplib::Response& res, bool discard);
  // The overview's sent and dead per minute; `scope` gets "cluster" or "replica".
  nlohmann::ordered_json PerMinute(nlohmann::ordered_json& scope);
  // The destination a topic routes to ("" when no route matches).
  std::string DestinationOf(const std::string& topic) const;

  const Config& config_;
  const Router& router_;
  OutboxOperations& store_;
  ConsoleQueries& console_;
  InboxOperations* inbox_;
  ReplicaMembership* replicas_;
  Metrics* metrics_;
};

}  // namespace queuebox
