// file_destination.cc: JSON lines appended to a file, fdatasync'ed per batch.
#include "destinations/file/file_destination.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "core/redaction.h"

namespace queuebox {

DestinationType FileDestinationType() {
  using S = FileDestinationSettings;
  OptionTable<S> options = {
      opt::Text("path", &S::path, nullptr, "File the messages are appended to, one JSON line each")
          .Required(),
      opt::Flag("fsync", &S::fsync, true,
                "fdatasync each batch before its messages count as delivered"),
  };
  return MakeDestinationType<S>(
      "file", options, nullptr,
      [](S s, const DestinationConfig& config,
         const DestinationContext&) -> Result<std::unique_ptr<Destination>> {
        s.static_headers = config.headers;
        return std::unique_ptr<Destination>(new FileDestination(std::move(s)));
      });
}

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes all of `data` (retrying short writes and EINTR). 0 or an errno.
int WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

FileDestination::FileDestination(FileDestinationSettings settings)
    : settings_(std::move(settings)) {}

FileDestination::~FileDestination() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileDestination::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) return Status::Ok();
  int fd = ::open(settings_.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return FailedPrecondition("destinations." + settings_.name + ": cannot open " + settings_.path +
                              " for appending: " + ErrnoText(err));
  }
  fd_ = fd;
  return Status::Ok();
}

Result<std::string> FileDestination::Line(
    const OutboundMessage& message, const std::map<std::string, std::string>& static_headers) {
  const OutboxRow& row = *message.row;
  try {
    nlohmann::ordered_json row_headers = nlohmann::ordered_json::parse(
        row.headers.empty() ? std::string("{}") : row.headers, nullptr, false);
    if (row_headers.is_discarded() || !row_headers.is_object()) {
      return InvalidArgument("invalid row headers: expected a JSON object");
    }
    nlohmann::ordered_json headers = nlohmann::ordered_json::object();
    for (const auto& [name, value] : static_headers) headers[name] = value;
    for (auto& [name, value] : row_headers.items()) headers[name] = std::move(value);
    nlohmann::ordered_json payload = nlohmann::ordered_json::parse(message.body(), nullptr, false);
    if (payload.is_discarded()) return InvalidArgument("invalid payload: not a JSON document");
    nlohmann::ordered_json line = nlohmann::ordered_json::object();
    line["id"] = row.id;
    line["topic"] = row.topic;
    line["key"] = row.key.has_value() ? nlohmann::ordered_json(*row.key) : nullptr;
    line["attempt"] = row.attempt;
    line["headers"] = std::move(headers);
    line["payload"] = std::move(payload);
    return line.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("cannot encode the message as JSON: ") + e.what());
  }
}

void FileDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  // Lines first (outside the lock); rows that can never be written are rejected at once.
  std::string buffer;
  std::vector<size_t> written;  // indexes whose line is in buffer
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].row == nullptr) {
      sink.Report(i, Outcome::Reject("Publish failed: no row"));
      continue;
    }
    Result<std::string> line = Line(batch[i], settings_.static_headers);
    if (!line.ok()) {
      sink.Report(i, Outcome::Reject(SanitizeError(line.status().message())));
      continue;
    }
    buffer += *line;
    buffer += '\n';
    written.push_back(i);
  }
  if (written.empty()) return;

  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) {
      int fd = ::open(settings_.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) {
        int err = errno;
        failure = "Publish failed: cannot open " + settings_.path + ": " + ErrnoText(err);
      } else {
        fd_ = fd;
      }
    }
    if (failure.empty()) {
      struct stat before {};
      // A regular file's size before the write, to cut a partial batch off again so the file
      // stays one whole JSON document per line.
      bool regular = ::fstat(fd_, &before) == 0 && S_ISREG(before.st_mode);
      if (int write_err = WriteAll(fd_, buffer); write_err != 0) {
        failure = "Publish failed: write " + settings_.path + ": " + ErrnoText(write_err);
        if (regular && ::ftruncate(fd_, before.st_size) != 0) {
          failure += " (and the partial write could not be removed)";
        }
      } else if (settings_.fsync && ::fdatasync(fd_) != 0) {
        int err = errno;
        failure = "Publish failed: fdatasync " + settings_.path + ": " + ErrnoText(err);
      }
    }
  }
  for (size_t i : written) {
    sink.Report(i, failure.empty() ? Outcome::Delivered() : Outcome::Retry(SanitizeError(failure)));
  }
}

void FileDestination::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace queuebox
