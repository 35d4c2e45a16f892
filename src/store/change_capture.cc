// change_capture.cc: picks the capture engine of outbox.capture.mode (only postgres-logical is
// built; the configuration refuses sqlserver-cdc).
#include "store/change_capture.h"

#include <algorithm>
#include <utility>

#include "store/postgres/capture/pg_capture.h"

namespace queuebox {
namespace {

bool IsPostgresLogical(const DatabaseConfig& db, const CaptureConfig& capture) {
  return capture.mode == "postgres-logical" && db.type == "postgresql";
}

}  // namespace

bool IsCaptureName(const std::string& s) {
  if (s.empty() || s.size() > 63 || s[0] < 'a' || s[0] > 'z') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Status CheckCaptureConnection(const DatabaseConfig& db, const CaptureConfig& capture) {
  if (!IsPostgresLogical(db, capture)) return Status::Ok();
  auto options = store::capture::CaptureOptionsFor(db, capture);
  if (!options.ok()) return Status::Ok();  // database.url's own checks report a bad URL
  return store::capture::ResolveCaptureTarget(options->connection).status();
}

Result<std::unique_ptr<ChangeCapture>> OpenChangeCapture(const DatabaseConfig& db,
                                                         const CaptureConfig& capture,
                                                         std::function<void()> on_wake) {
  if (!capture.enabled || !IsPostgresLogical(db, capture)) {
    return std::unique_ptr<ChangeCapture>();
  }
  QB_ASSIGN_OR_RETURN(store::capture::PgCaptureOptions options,
                      store::capture::CaptureOptionsFor(db, capture));
  QB_ASSIGN_OR_RETURN(auto engine,
                      store::capture::PgCapture::Create(std::move(options), std::move(on_wake)));
  return std::unique_ptr<ChangeCapture>(std::move(engine));
}

Result<std::optional<CaptureReport>> ReadCaptureReport(const DatabaseConfig& db,
                                                       const CaptureConfig& capture) {
  if (!IsPostgresLogical(db, capture)) return std::optional<CaptureReport>();
  QB_ASSIGN_OR_RETURN(store::capture::PgCaptureOptions options,
                      store::capture::CaptureOptionsFor(db, capture));
  options.connection.pool_size = 1;
  QB_ASSIGN_OR_RETURN(
      CaptureReport report,
      store::capture::ReadCaptureReport(options.connection, capture.identity, capture.slot));
  return std::optional<CaptureReport>(std::move(report));
}

}  // namespace queuebox
