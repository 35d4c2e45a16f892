// file_destination.cc: JSON lines appended to a file, fdatasync'ed per batch.
#include "destinations/file/file_destination.h"

#include <utility>

namespace queuebox {

DestinationType FileDestinationType() {
  DestinationType t;
  t.type = "file";
  t.options = {
      OptionSpec{.key = "path",
                 .type = OptionType::kString,
                 .default_value = nullptr,
                 .required = true,
                 .enum_values = {},
                 .description = "File the messages are appended to, one JSON line each"},
      OptionSpec{.key = "fsync",
                 .type = OptionType::kBool,
                 .default_value = true,
                 .enum_values = {},
                 .description = "fdatasync each batch before its messages count as delivered"},
  };
  t.create = [](const DestinationConfig& config,
                const DestinationContext&) -> Result<std::unique_ptr<Destination>> {
    FileDestinationSettings s;
    s.name = config.name;
    try {
      s.path = config.options.at("path").get<std::string>();
      s.fsync = config.options.value("fsync", true);
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument("destinations." + config.name + ": " + e.what());
    }
    return std::unique_ptr<Destination>(new FileDestination(std::move(s)));
  };
  return t;
}

FileDestination::FileDestination(FileDestinationSettings settings)
    : settings_(std::move(settings)) {}

FileDestination::~FileDestination() = default;

Status FileDestination::Start() { return Status::Ok(); }

void FileDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  for (size_t i = 0; i < batch.size(); ++i) sink.Report(i, Outcome::Retry("not implemented yet"));
}

void FileDestination::Stop() {}

Result<std::string> FileDestination::Line(const OutboxRow&) {
  return Internal("not implemented yet");
}

}  // namespace queuebox
