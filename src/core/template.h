// template.h: `{{ name }}` placeholder templates for broker addresses (exchange / topic /
// subject, QueueBox reference §7.5) and routing keys (route and RabbitMQ routingKeyTemplate,
// reference §7.6).
//
// Syntax (§7.6): `{{`, optional whitespace, a name (the shortest run of characters other than
// `}`), optional whitespace, `}}`. Everything else is literal text. Names:
//   topic            the row's topic
//   key              the row's key (missing when null)
//   aggregateType    the row's aggregate_type (missing when null)
//   payload.a.b      a nested field of the payload JSON (`data.a.b` is the same); a digit
//   data.a.b         segment indexes an array. A string renders its content, a number or bool
//                    its JSON text, an object or array its compact JSON text; null or absent
//                    is missing.
//
// Two modes:
//   kAddress     an unknown placeholder is a compile error (ValidateAddressTemplate; the caller
//                adds the field and destination to the message). A missing value renders as
//                empty text; the destination then fails the publish ("rendered an empty ...").
//   kRoutingKey  a missing value or an unknown placeholder renders the route's
//                routingKeyMissingFieldDefault (default ""); compiling never fails.
//
// The payload is parsed only when a template uses payload/data fields, and at most once per
// TemplateContext (one context per message, shared by the templates that render it).
//
// Thread-safety: a compiled Template is immutable and may be rendered from many threads at once.
// A TemplateContext caches the parsed payload and must not be shared between threads.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/message.h"
#include "queuebox/status.h"

namespace queuebox {

// What one message offers to templates. Views must outlive the context.
class TemplateContext {
 public:
  TemplateContext(std::string_view topic, std::optional<std::string_view> key,
                  std::optional<std::string_view> aggregate_type, std::string_view payload)
      : topic_(topic), key_(key), aggregate_type_(aggregate_type), payload_(payload) {}
  // The context of an outbox row (topic, key, aggregate_type, payload).
  static TemplateContext ForRow(const OutboxRow& row);

  std::string_view topic() const { return topic_; }
  const std::optional<std::string_view>& key() const { return key_; }
  const std::optional<std::string_view>& aggregate_type() const { return aggregate_type_; }
  // The payload parsed as JSON on first use; nullptr when it is not valid JSON.
  const nlohmann::json* payload_json() const;

 private:
  std::string_view topic_;
  std::optional<std::string_view> key_;
  std::optional<std::string_view> aggregate_type_;
  std::string_view payload_;
  mutable bool parsed_ = false;
  mutable std::optional<nlohmann::json> json_;
};

class Template {
 public:
  enum class Mode { kAddress, kRoutingKey };

  // Address template (§7.5). kInvalidArgument naming the first unknown placeholder, e.g.
  // "unknown placeholder '{{ region }}' (use {{ topic }}, {{ key }}, {{ aggregateType }},
  // {{ payload.<field> }} or {{ data.<field> }})".
  static Result<Template> CompileAddress(std::string_view text);
  // Routing-key template (§7.6): never fails; unknown placeholders render `missing_default`.
  static Template CompileRoutingKey(std::string_view text, std::string missing_default = "");

  // Renders for one message. Address mode: a missing value renders as "". Routing-key mode:
  // a missing value or unknown placeholder renders the missing-field default.
  std::string Render(const TemplateContext& context) const;

  const std::string& text() const { return text_; }
  Mode mode() const { return mode_; }
  // True when there is no placeholder at all (the text renders as itself).
  bool literal() const;
  // True when rendering needs the parsed payload.
  bool uses_payload() const { return uses_payload_; }

 private:
  struct Part {
    enum class Kind { kLiteral, kTopic, kKey, kAggregateType, kField, kUnknown };
    Kind kind = Kind::kLiteral;
    std::string text;               // literal text, or the placeholder name when unknown
    std::vector<std::string> path;  // kField: the segments after payload./data.
  };

  Template() = default;
  static Template Parse(std::string_view text, Mode mode);

  std::string text_;
  Mode mode_ = Mode::kAddress;
  std::string missing_default_;
  std::vector<Part> parts_;
  bool uses_payload_ = false;
};

// Checks an address template (exchange / topic / subject, §7.5): OK, or kInvalidArgument naming
// the unknown placeholder. The caller adds the field and destination to the message.
Status ValidateAddressTemplate(std::string_view tmpl);

}  // namespace queuebox
