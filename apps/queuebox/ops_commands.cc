// status, replay, dead list: operator commands over the same configuration as the relay.
#include <iostream>

#include "admin/cli.h"
#include "commands.h"
#include "common.h"
#include "core/log.h"

namespace queuebox::app {
namespace {

template <typename Fn>
int WithStore(const GlobalOptions& global, Fn&& fn) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  log::Init("text", "warn");  // commands print their answer on stdout; logs only for trouble
  auto store = OpenAndWait(*config);
  if (!store) return 1;
  return fn(*store, *config);
}

}  // namespace

int ShowStatus(const GlobalOptions& global, bool json) {
  return WithStore(global, [&](OutboxStore& store, const Config& config) {
    // Under strict order the status names the oldest transaction holding rows back.
    if (config.outbox.ordering == "strict") {
      if (Status s = store.EnableStrictOrdering(); !s.ok()) {
        std::cerr << "Strict order cannot be checked: " << s.message() << "\n";
      }
    }
    return RunStatusCommand(store, store.replica_membership(), config, json, std::cout, std::cerr,
                            store.inbox());
  });
}

int Replay(const GlobalOptions& global, const ReplayOptions& o) {
  ReplayRequest request;
  request.table = o.table;
  if (!o.ids.empty()) request.ids = o.ids;
  if (!o.source.empty()) request.source = o.source;
  if (!o.sources.empty()) request.sources = o.sources;
  if (!o.topic.empty()) request.topic = o.topic;
  if (!o.topics.empty()) request.topics = o.topics;
  if (!o.destination.empty()) request.destination = o.destination;
  if (!o.created_after.empty()) request.created_after = o.created_after;
  if (!o.created_before.empty()) request.created_before = o.created_before;
  if (!request.HasFilter()) {
    std::cerr << kReplayNeedsFilter << " Use --ids, --topic, --topics, --destination, "
              << "--created-after or --created-before (--table inbox: --ids, --source, "
              << "--sources, --created-after, --created-before).\n";
    return 2;
  }
  return WithStore(global, [&](OutboxStore& store, const Config& config) {
    return RunReplayCommand(store, config, request, std::cout, std::cerr, store.inbox());
  });
}

int DeadList(const GlobalOptions& global, bool json, int limit, const std::string& table) {
  return WithStore(global, [&](OutboxStore& store, const Config& config) {
    if (table == "inbox") {
      if (store.inbox() == nullptr) {
        std::cerr << "This store has no inbox.\n";
        return 1;
      }
      return RunInboxDeadListCommand(*store.inbox(), limit, json, std::cout, std::cerr);
    }
    return RunDeadListCommand(store, config, limit, json, std::cout, std::cerr);
  });
}

}  // namespace queuebox::app
