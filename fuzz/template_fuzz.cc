// template_fuzz: `{{ name }}` address and routing-key templates (core/template.h) rendered
// against a fuzzed row (topic, key, aggregate type, payload).
// Properties: CompileAddress and ValidateAddressTemplate agree; a template without placeholders
// renders as its text; rendering never throws, whatever the payload holds.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/template.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string text = in.ConsumeRandomLengthString(256);
  std::string missing_default = in.ConsumeRandomLengthString(16);
  std::string topic = in.ConsumeRandomLengthString(64);
  std::optional<std::string> key, aggregate_type;
  if (in.ConsumeBool()) key = in.ConsumeRandomLengthString(64);
  if (in.ConsumeBool()) aggregate_type = in.ConsumeRandomLengthString(64);
  std::string payload = in.ConsumeRemainingBytesAsString();

  std::optional<std::string_view> key_view, aggregate_view;
  if (key) key_view = *key;
  if (aggregate_type) aggregate_view = *aggregate_type;
  queuebox::TemplateContext context(topic, key_view, aggregate_view, payload);

  queuebox::Result<queuebox::Template> address = queuebox::Template::CompileAddress(text);
  Require(address.ok() == queuebox::ValidateAddressTemplate(text).ok(),
          "CompileAddress and ValidateAddressTemplate agree");
  if (address.ok()) {
    std::string rendered = address->Render(context);
    if (address->literal()) Require(rendered == text, "a literal template renders as its text");
    // Rendering twice from the same context (cached payload) gives the same text.
    Require(address->Render(context) == rendered, "rendering is repeatable");
  }
  queuebox::Template routing = queuebox::Template::CompileRoutingKey(text, missing_default);
  std::string rendered = routing.Render(context);
  if (routing.literal()) Require(rendered == text, "a literal routing key renders as its text");
  return 0;
}
