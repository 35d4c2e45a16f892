// cli.h: the operator subcommands of `queuebox` (QueueBox reference §5.4, §13.5), as functions
// the composition root (apps/queuebox) calls after loading the configuration and opening the
// store. Each writes to `out` (results) and `err` (problems) and returns the exit code:
// 0 OK, 1 failed (the store answered an error), 2 usage (bad filter or argument).
//
//   queuebox status [--json]      rows per state, oldest pending age (database clock), dead
//                                 rows per topic; then the inbox: rows per source and state,
//                                 oldest pending push row's age
//   queuebox replay <filters>     the filters of POST /admin/replay; prints "Moved n row(s)."
//                                 (--table inbox: inbox rows, with --source/--sources)
//   queuebox dead list [--json] [--limit n]
//                                 id, topic, key, attempt, last_error, updated_at
//   queuebox dead list --table inbox
//                                 id, source, idempotency key, aggregate, attempt, last_error,
//                                 created_at
//
// Thread-safety: none needed (one call per process).
#pragma once

#include <ostream>

#include "admin/replay.h"
#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/store.h"

namespace queuebox {

// `replica_set` (nullable): the replica set whose live members are listed (key affinity).
// With outbox.capture.mode postgres-logical on PostgreSQL it also shows the capture slot (also
// while no relay runs): whether it exists and is active, its confirmed position and the WAL it
// retains, with a warning above outbox.capture.slotRetentionWarnBytes. A capture query that
// fails is reported on `err` without failing the command.
// `inbox` (nullable): the inbox whose states per source are shown; a database without the inbox
// table shows "No inbox table." (JSON: "inbox": null).
int RunStatusCommand(OutboxOperations& store, ReplicaMembership* replica_set, const Config& config,
                     bool json, std::ostream& out, std::ostream& err, InboxStore* inbox = nullptr);

// `request` as parsed from the command line (--id (repeatable), --topic, --topics a,b,
// --destination, --created-after, --created-before); validated here (ids, instants, at least
// one filter).
// request.table "inbox" replays `inbox` (nullptr: exit 1, "this store has no inbox").
int RunReplayCommand(OutboxOperations& store, const Config& config, ReplayRequest request,
                     std::ostream& out, std::ostream& err, InboxOperations* inbox = nullptr);

int RunDeadListCommand(OutboxOperations& store, const Config& config, int limit, bool json,
                       std::ostream& out, std::ostream& err);
// Dead inbox rows, newest created_at first.
int RunInboxDeadListCommand(InboxOperations& inbox, int limit, bool json, std::ostream& out,
                            std::ostream& err);

}  // namespace queuebox
