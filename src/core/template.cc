#include "core/template.h"

#include <cctype>
#include <utility>

namespace queuebox {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "a.b.c" -> {"a","b","c"}; empty when any segment is empty.
std::vector<std::string> SplitPath(std::string_view s) {
  std::vector<std::string> out;
  while (true) {
    size_t dot = s.find('.');
    std::string_view seg = s.substr(0, dot);
    if (seg.empty()) return {};
    out.emplace_back(seg);
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  return out;
}

// The value at `path`, or nullptr when absent or null.
const nlohmann::json* Lookup(const nlohmann::json& root, const std::vector<std::string>& path) {
  const nlohmann::json* cur = &root;
  for (const std::string& seg : path) {
    if (cur->is_object()) {
      auto it = cur->find(seg);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array() && AllDigits(seg) && seg.size() < 10) {
      size_t index = std::stoul(seg);
      if (index >= cur->size()) return nullptr;
      cur = &(*cur)[index];
    } else {
      return nullptr;
    }
  }
  return cur->is_null() ? nullptr : cur;
}

std::string FieldText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

TemplateContext TemplateContext::ForRow(const OutboxRow& row) {
  std::optional<std::string_view> key, aggregate_type;
  if (row.key) key = *row.key;
  if (row.aggregate_type) aggregate_type = *row.aggregate_type;
  return TemplateContext(row.topic, key, aggregate_type, row.payload);
}

const nlohmann::json* TemplateContext::payload_json() const {
  if (!parsed_) {
    parsed_ = true;
    nlohmann::json j = nlohmann::json::parse(payload_, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) json_ = std::move(j);
  }
  return json_ ? &*json_ : nullptr;
}

Template Template::Parse(std::string_view text, Mode mode) {
  Template t;
  t.text_ = std::string(text);
  t.mode_ = mode;
  std::string literal;
  auto flush = [&] {
    if (!literal.empty()) {
      t.parts_.push_back(Part{Part::Kind::kLiteral, std::move(literal), {}});
      literal.clear();
    }
  };
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    // A placeholder: "{{" + run of non-'}' characters (at least one) + "}}".
    if (text.compare(i, 2, "{{") == 0) {
      size_t j = i + 2;
      while (j < n && text[j] != '}') ++j;
      if (j > i + 2 && text.compare(j, 2, "}}") == 0) {
        std::string_view name = Trim(text.substr(i + 2, j - i - 2));
        Part part;
        if (name == "topic") {
          part.kind = Part::Kind::kTopic;
        } else if (name == "key") {
          part.kind = Part::Kind::kKey;
        } else if (name == "aggregateType") {
          part.kind = Part::Kind::kAggregateType;
        } else if (name.starts_with("payload.") || name.starts_with("data.")) {
          part.path = SplitPath(name.substr(name.find('.') + 1));
          part.kind = part.path.empty() ? Part::Kind::kUnknown : Part::Kind::kField;
        } else {
          part.kind = Part::Kind::kUnknown;
        }
        part.text = std::string(name);
        if (part.kind == Part::Kind::kField) t.uses_payload_ = true;
        flush();
        t.parts_.push_back(std::move(part));
        i = j + 2;
        continue;
      }
    }
    literal.push_back(text[i]);
    ++i;
  }
  flush();
  return t;
}

Result<Template> Template::CompileAddress(std::string_view text) {
  Template t = Parse(text, Mode::kAddress);
  for (const Part& p : t.parts_) {
    if (p.kind == Part::Kind::kUnknown) {
      return InvalidArgument("unknown placeholder '{{ " + p.text +
                             " }}' (use {{ topic }}, {{ key }}, {{ aggregateType }}, "
                             "{{ payload.<field> }} or {{ data.<field> }})");
    }
  }
  return t;
}

Template Template::CompileRoutingKey(std::string_view text, std::string missing_default) {
  Template t = Parse(text, Mode::kRoutingKey);
  t.missing_default_ = std::move(missing_default);
  return t;
}

bool Template::literal() const {
  for (const Part& p : parts_) {
    if (p.kind != Part::Kind::kLiteral) return false;
  }
  return true;
}

std::string Template::Render(const TemplateContext& context) const {
  std::string out;
  auto missing = [&] {
    if (mode_ == Mode::kRoutingKey) out += missing_default_;
  };
  for (const Part& p : parts_) {
    switch (p.kind) {
      case Part::Kind::kLiteral:
        out += p.text;
        break;
      case Part::Kind::kTopic:
        out += context.topic();
        break;
      case Part::Kind::kKey:
        if (context.key()) {
          out += *context.key();
        } else {
          missing();
        }
        break;
      case Part::Kind::kAggregateType:
        if (context.aggregate_type()) {
          out += *context.aggregate_type();
        } else {
          missing();
        }
        break;
      case Part::Kind::kField: {
        const nlohmann::json* root = context.payload_json();
        const nlohmann::json* v = root ? Lookup(*root, p.path) : nullptr;
        if (v) {
          out += FieldText(*v);
        } else {
          missing();
        }
        break;
      }
      case Part::Kind::kUnknown:
        missing();  // address templates never hold one (CompileAddress refuses it)
        break;
    }
  }
  return out;
}

Status ValidateAddressTemplate(std::string_view tmpl) {
  Result<Template> t = Template::CompileAddress(tmpl);
  return t.status();
}

}  // namespace queuebox
