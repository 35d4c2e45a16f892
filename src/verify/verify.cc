#include "verify/verify.h"

#include "verify/checks.h"
#include "verify/received.h"

namespace queuebox::verify {

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kHolds:
      return "holds";
    case Outcome::kWarning:
      return "warning";
    case Outcome::kBroken:
      return "broken";
    case Outcome::kSkipped:
      return "skipped";
  }
  return "holds";
}

int Report::ExitCode() const {
  for (const auto& check : checks) {
    if (check.outcome == Outcome::kBroken) return 1;
  }
  return 0;
}

Result<Report> Verify(ReadOnlySession& session, const DatabaseConfig& database,
                      const Options& options) {
  QB_ASSIGN_OR_RETURN(bool has_outbox, session.TableExists(database.outbox_table));
  if (!has_outbox) {
    return FailedPrecondition("The outbox table '" + database.outbox_table +
                              "' does not exist: nothing to verify.");
  }
  CheckContext context{session, database, Dialect{session.dialect() == "postgresql"}, options};
  Report report{
      std::string(session.dialect()), options.ordering == "strict" ? "strict" : "sequence", {}};
  for (auto* check : {&CheckKeyOrder, &CheckLeases, &CheckStalled, &CheckInboxForwarded,
                      &CheckDeadReasons, &CheckAttemptHistory}) {
    QB_ASSIGN_OR_RETURN(CheckResult result, check(context));
    report.checks.push_back(std::move(result));
  }
  if (options.received_file) {
    QB_ASSIGN_OR_RETURN(std::vector<CheckResult> received, CheckReceived(context));
    for (auto& r : received) report.checks.push_back(std::move(r));
  }
  return report;
}

}  // namespace queuebox::verify
