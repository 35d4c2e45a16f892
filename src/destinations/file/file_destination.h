// file_destination.h: the `file` destination. Appends one JSON line per message to `path`:
//   {"id":..,"topic":..,"key":..|null,"attempt":..,"headers":{..},"payload":<payload JSON>}
// The payload is embedded as JSON (not as a string); `headers` is the destination's static
// `headers`, then the row's headers object (a row header of the same name, exact case, wins).
// With fsync (default true) the batch is written and fdatasync'ed before any message of it is
// reported Delivered, so a line is durable before its row becomes `sent`.
//
// Outcomes: Delivered once written (and synced). A write or sync error => Retry with the reason
// for every message of the batch not yet durable. A row whose payload or headers is not valid
// JSON => Reject (it can never succeed).
// Start(): opens the file for appending (created when missing, mode 0644); the parent folder must
// exist (kFailedPrecondition otherwise, naming the path).
//
// Thread-safety: PublishBatch may be called from several threads at once (a mutex serialises
// writes, so lines never interleave).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "destinations/registry.h"
#include "queuebox/destination.h"

namespace queuebox {

struct FileDestinationSettings {
  std::string name;   // destinations.<name>
  std::string path;   // the file appended to
  bool fsync = true;  // fdatasync after each batch, before outcomes are reported
  std::map<std::string, std::string> static_headers;  // destinations.<name>.headers
};

// The registry entry for `type: file`: option table (path, fsync) and factory.
DestinationType FileDestinationType();

class FileDestination final : public Destination {
 public:
  explicit FileDestination(FileDestinationSettings settings);
  ~FileDestination() override;

  const std::string& name() const override { return settings_.name; }
  std::string_view type() const override { return "file"; }
  Status Start() override;
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;
  void Stop() override;

  // Builds the line written for a message (without the trailing newline): its row, with the
  // message's body as "payload". kInvalidArgument when the body or headers is not valid JSON.
  static Result<std::string> Line(const OutboundMessage& message,
                                  const std::map<std::string, std::string>& static_headers);

 private:
  FileDestinationSettings settings_;
  std::mutex mu_;
  int fd_ = -1;  // guarded by mu_
};

}  // namespace queuebox
