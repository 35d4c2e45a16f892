// checks.h: the invariants `queuebox verify` reads from the database, one function each
// (verify.h runs them in one snapshot).
#pragma once

#include "verify/sql.h"
#include "verify/verify.h"

namespace queuebox::verify {

// What every check gets: the session, the names, the dialect and the options.
struct CheckContext {
  ReadOnlySession& session;
  const DatabaseConfig& database;
  Dialect dialect;
  const Options& options;
  Query NewQuery() const { return Query(database, dialect); }
};

// Per key, no row sent or dead while a lower-sequence row of its key is pending or processing.
Result<CheckResult> CheckKeyOrder(const CheckContext& context);
// No row processing past its lease by more than the reclaim interval.
Result<CheckResult> CheckLeases(const CheckContext& context);
// No due row waiting longer than the threshold while no replica is alive.
Result<CheckResult> CheckStalled(const CheckContext& context);
// Every forwarded inbox row has its outbox row.
Result<CheckResult> CheckInboxForwarded(const CheckContext& context);
// Every dead row has a reason.
Result<CheckResult> CheckDeadReasons(const CheckContext& context);
// A sent or dead row whose latest recorded attempt says otherwise (skipped without the table).
Result<CheckResult> CheckAttemptHistory(const CheckContext& context);

// The table name of the attempt history that CheckAttemptHistory looks for.
inline constexpr const char* kAttemptHistoryTable = "outbox_attempts";

}  // namespace queuebox::verify
