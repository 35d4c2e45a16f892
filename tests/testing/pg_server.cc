#include "testing/pg_server.h"

#include <cstdlib>
#include <filesystem>

#include "testing/http_receiver.h"

namespace queuebox::testing {
namespace {

const char* kPgBin = "/usr/lib/postgresql/15/bin";

Status Sh(const std::string& command) {
  std::string out;
  int code = RunCommand("/bin/sh", {"-c", command + " 2>&1"}, {}, &out, std::chrono::seconds(120));
  if (code != 0)
    return Unavailable("`" + command + "` failed (" + std::to_string(code) + "): " + out);
  return Status::Ok();
}

}  // namespace

PrivatePostgres::PrivatePostgres(std::string settings) : settings_(std::move(settings)) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "qbpg.XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  dir_ = p != nullptr ? p : "";
  port_ = UnusedLoopbackPort();
}

PrivatePostgres::~PrivatePostgres() {
  if (running_) (void)Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Status PrivatePostgres::Init() {
  QB_RETURN_IF_ERROR(Sh("chown postgres:postgres " + dir_));
  QB_RETURN_IF_ERROR(Sh("runuser -u postgres -- " + std::string(kPgBin) + "/initdb -D " + dir_ +
                        "/data -U postgres -A trust --no-sync >/dev/null"));
  return Start();
}

Status PrivatePostgres::Start() {
  QB_RETURN_IF_ERROR(
      Sh("runuser -u postgres -- " + std::string(kPgBin) + "/pg_ctl -D " + dir_ + "/data -l " +
         dir_ + "/server.log -w -t 60 -o \"-c listen_addresses=127.0.0.1 -p " +
         std::to_string(port_) + " -k " + dir_ + " -c fsync=off -c synchronous_commit=off " +
         settings_ + "\" start >/dev/null"));
  running_ = true;
  return Status::Ok();
}

Status PrivatePostgres::Stop() {
  QB_RETURN_IF_ERROR(Sh("runuser -u postgres -- " + std::string(kPgBin) + "/pg_ctl -D " + dir_ +
                        "/data -m fast -w stop >/dev/null"));
  running_ = false;
  return Status::Ok();
}

std::string PrivatePostgres::url() const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
}

}  // namespace queuebox::testing
