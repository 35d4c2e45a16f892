// options.h: declarative option tables (architecture §7 rule 4). One row declares an option once:
// key, type, default, range or allowed values, description, and the struct member it binds to.
// The loader (src/config) validates YAML and QUEUEBOX_* variables against the rows, binds the
// values into the struct, names the variables, prints the masked configuration and generates
// docs/configuration.md; a component's factory binds its block through the same rows.
//
//   struct OutboxConfig { int batch_size = 100; };
//   OptionTable<OutboxConfig> t = {
//       opt::Int("batchSize", &OutboxConfig::batch_size, 100, "Rows claimed per claim").Min(1),
//   };
//
// The struct keeps a default initialiser so a default-constructed struct is usable in code and
// tests; a unit test (src/config/defaults_test.cc) proves it equals the row's default.
// docs/adding-an-option.md shows how to add an option, a nested block or a typed block.
//
// Thread-safety: a table is immutable after construction; Bind and the row functions are pure.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

// The value form after validation is given in brackets: what a row's setter receives.
enum class OptionType {
  kString,      // any string [string]
  kInt,         // integer within [min, max] [integer]
  kMillis,      // integer milliseconds within [min, max] [integer]
  kBool,        // [bool]
  kEnum,        // one of enum_values, exact case [string]
  kSecret,      // a string or "file:<path>" (read once at load, trailing newline removed) [string]
  kDuration,    // "<int><s|m|h|d>" [integer milliseconds]
  kStringMap,   // map of string -> string, e.g. headers [object of strings]
  kStringList,  // list of strings, or a comma-separated string [array of strings]
  kAny,         // a JSON/YAML value kept as is, validated by a component hook [any]
  kBlock,       // a nested block whose keys OptionSpec::block declares [object; a typed block
                // keeps its "type"]
};

struct BlockSchema;

struct OptionSpec {
  std::string key;  // camelCase key as in QueueBox; dotted for nested blocks ("notify.enabled")
  OptionType type = OptionType::kString;
  nlohmann::json default_value;  // null = no default
  bool required = false;
  int64_t min = INT64_MIN, max = INT64_MAX;  // kInt, kMillis
  std::vector<std::string> enum_values;      // kEnum
  std::string description;                   // one line for docs/configuration.md
  bool identifier = false;                   // kString: a SQL identifier, ^[a-zA-Z_][a-zA-Z0-9_]*$
  std::shared_ptr<const BlockSchema> block = nullptr;  // kBlock: the keys of the block
};

// Extra checks across keys of one block (e.g. SASL needs three keys). Receives the block with
// defaults filled; returns problems as "key: reason" (key relative to the block).
using BlockValidator = std::function<std::vector<std::string>(const nlohmann::json& block)>;

// One `type` of a typed block (a destination type, an auth kind) and the keys it takes.
struct BlockVariant {
  std::string type;
  std::vector<OptionSpec> options;  // keys besides `type` (and the schema's common keys)
  BlockValidator validate;          // may be empty
  // Fills values that depend on other keys, after validation passed; may be empty.
  std::function<void(nlohmann::json& block)> complete;
};

// The keys of a kBlock option: a fixed block (`options`), or a typed block whose required
// `type` selects one of `variants` (then `options` are the keys every type takes).
struct BlockSchema {
  std::vector<OptionSpec> options;
  std::vector<BlockVariant> variants;
  BlockValidator validate;  // fixed block: checks across its keys; may be empty
};

// One declared option of struct S: its spec and how a validated value reaches S and back.
template <typename S>
struct Option {
  OptionSpec spec;
  // Stores a validated value (the bracketed form of OptionType) into the struct.
  std::function<void(S&, const nlohmann::json&)> set;
  // The struct's value in the same form; null when unset (an empty std::optional).
  std::function<nlohmann::json(const S&)> get;

  Option Min(int64_t v) && {
    spec.min = v;
    return std::move(*this);
  }
  Option Range(int64_t lo, int64_t hi) && {
    spec.min = lo;
    spec.max = hi;
    return std::move(*this);
  }
  Option Required() && {
    spec.required = true;
    return std::move(*this);
  }
  Option Identifier() && {
    spec.identifier = true;
    return std::move(*this);
  }
};

// The rows of one block, bound into struct S.
template <typename S>
class OptionTable {
 public:
  OptionTable() = default;
  OptionTable(std::initializer_list<Option<S>> rows) {
    for (const Option<S>& r : rows) Add(r);
  }

  OptionTable& Add(Option<S> row) {
    specs_.push_back(row.spec);
    rows_.push_back(std::move(row));
    return *this;
  }

  // Adds the rows of `inner` with keys under `prefix` ("columnMapping.outbox"; "" keeps them),
  // bound through `member`: a nested block of S.
  template <typename Inner>
  OptionTable& Nest(const std::string& prefix, Inner S::*member, const OptionTable<Inner>& inner) {
    for (const Option<Inner>& r : inner.rows()) {
      Option<S> row;
      row.spec = r.spec;
      if (!prefix.empty()) row.spec.key = prefix + "." + r.spec.key;
      row.set = [member, set = r.set](S& s, const nlohmann::json& v) { set(s.*member, v); };
      row.get = [member, get = r.get](const S& s) { return get(s.*member); };
      Add(std::move(row));
    }
    return *this;
  }

  // The rows of `other` with keys under `prefix` (a section of the root, say).
  OptionTable& Append(const std::string& prefix, const OptionTable& other) {
    for (Option<S> r : other.rows()) {
      r.spec.key = prefix + "." + r.spec.key;
      Add(std::move(r));
    }
    return *this;
  }

  const std::vector<Option<S>>& rows() const { return rows_; }
  const std::vector<OptionSpec>& specs() const { return specs_; }

  // BindPresent for a nested block's setter: a value of another form throws
  // nlohmann::json::exception, which the outer Bind reports under the block's key.
  void Assign(const nlohmann::json& block, S& out) const {
    for (const Option<S>& r : rows_) {
      const nlohmann::json* v = Find(block, r.spec.key);
      if (v != nullptr && !v->is_null()) r.set(out, *v);
    }
  }

  // The values of `s` in their bracketed form, nested by the dotted keys; unset ones left out.
  nlohmann::json Read(const S& s) const {
    nlohmann::json out = nlohmann::json::object();
    for (const Option<S>& r : rows_) {
      nlohmann::json v = r.get(s);
      if (v.is_null()) continue;
      nlohmann::json* node = &out;
      size_t start = 0;
      for (size_t dot = r.spec.key.find('.'); dot != std::string::npos;
           dot = r.spec.key.find('.', start)) {
        node = &(*node)[r.spec.key.substr(start, dot - start)];
        start = dot + 1;
      }
      (*node)[r.spec.key.substr(start)] = std::move(v);
    }
    return out;
  }

  // Every row's value in a default-constructed S (null when unset), by key: what the defaults
  // test compares with the declared defaults.
  nlohmann::json StructDefaults() const {
    const S s{};
    nlohmann::json out = nlohmann::json::object();
    for (const Option<S>& r : rows_) out[r.spec.key] = r.get(s);
    return out;
  }

  // Stores every value of `block` that a row declares into `out`; keys absent from `block` leave
  // `out` as it is. `block` is a validated block (src/config ValidateTable: nested by the dotted
  // keys, values in their bracketed form, defaults filled). Binds every row it can, then returns
  // kInvalidArgument naming `path`.key of the first required key that is missing or value of
  // another form.
  Status Bind(const nlohmann::json& block, S& out, const std::string& path = "") const {
    return BindRows(block, out, path, /*require=*/true);
  }

  // Bind without the required-key check: for a block whose validation already reported its
  // missing keys (the loader binds what is valid, then checks rules across keys).
  Status BindPresent(const nlohmann::json& block, S& out, const std::string& path = "") const {
    return BindRows(block, out, path, /*require=*/false);
  }

 private:
  Status BindRows(const nlohmann::json& block, S& out, const std::string& path,
                  bool require) const {
    Status first = Status::Ok();
    for (const Option<S>& r : rows_) {
      auto name = [&] { return (path.empty() ? "" : path + ".") + r.spec.key; };
      const nlohmann::json* v = Find(block, r.spec.key);
      if (v == nullptr || v->is_null()) {
        if (require && r.spec.required && first.ok()) {
          first = InvalidArgument(name() + ": required key is missing");
        }
        continue;
      }
      try {
        r.set(out, *v);
      } catch (const nlohmann::json::exception& e) {
        if (first.ok()) {
          first = InvalidArgument(name() + ": a value of another form than the option's (" +
                                  e.what() + ")");
        }
      }
    }
    return first;
  }

  static const nlohmann::json* Find(const nlohmann::json& block, const std::string& dotted) {
    const nlohmann::json* node = &block;
    size_t start = 0;
    while (true) {
      size_t dot = dotted.find('.', start);
      std::string_view part = std::string_view(dotted).substr(
          start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object()) return nullptr;
      auto it = node->find(part);
      if (it == node->end()) return nullptr;
      node = &*it;
      if (dot == std::string::npos) return node;
      start = dot + 1;
    }
  }

  std::vector<Option<S>> rows_;
  std::vector<OptionSpec> specs_;  // rows_[i].spec, for the validators
};

// Row builders: opt::Int("batchSize", &OutboxConfig::batch_size, 100, "Rows per claim").Min(1).
// Each checks at compile time that the member can hold its type's value form; a std::optional
// member stays empty when the key is unset. `def` is the default in YAML form (nullptr: none).
namespace opt {
namespace internal {

template <typename T>
struct Unwrap {
  using type = T;
  static constexpr bool optional = false;
};
template <typename T>
struct Unwrap<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};
template <typename T>
using Value = typename Unwrap<T>::type;

template <typename T>
void Store(T& field, const nlohmann::json& v) {
  if constexpr (Unwrap<T>::optional) {
    field = v.get<Value<T>>();
  } else if constexpr (std::is_same_v<T, nlohmann::json>) {
    field = v;
  } else {
    field = v.get<T>();
  }
}

template <typename T>
nlohmann::json Load(const T& field) {
  if constexpr (Unwrap<T>::optional) {
    return field ? nlohmann::json(*field) : nlohmann::json();
  } else {
    return nlohmann::json(field);
  }
}

template <typename S, typename T>
Option<S> Row(std::string key, OptionType type, T S::*member, nlohmann::json def,
              std::string description) {
  Option<S> o;
  o.spec.key = std::move(key);
  o.spec.type = type;
  o.spec.default_value = std::move(def);
  o.spec.description = std::move(description);
  o.set = [member](S& s, const nlohmann::json& v) { Store(s.*member, v); };
  o.get = [member](const S& s) { return Load(s.*member); };
  return o;
}

}  // namespace internal

template <typename S, typename T>
Option<S> Text(std::string key, T S::*member, nlohmann::json def, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, std::string>, "Text binds a std::string");
  return internal::Row(std::move(key), OptionType::kString, member, std::move(def),
                       std::move(description));
}

template <typename S, typename T>
Option<S> Secret(std::string key, T S::*member, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, std::string>, "Secret binds a std::string");
  return internal::Row(std::move(key), OptionType::kSecret, member, nullptr,
                       std::move(description));
}

template <typename S, typename T>
Option<S> Choice(std::string key, T S::*member, std::vector<std::string> values, nlohmann::json def,
                 std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, std::string>, "Choice binds a std::string");
  Option<S> o = internal::Row(std::move(key), OptionType::kEnum, member, std::move(def),
                              std::move(description));
  o.spec.enum_values = std::move(values);
  return o;
}

// An int member takes [INT_MIN, INT_MAX] unless Min/Range narrows it; int64_t the full range.
template <typename S, typename T>
Option<S> Int(std::string key, T S::*member, nlohmann::json def, std::string description) {
  using V = internal::Value<T>;
  static_assert(std::is_same_v<V, int> || std::is_same_v<V, int64_t>, "Int binds int or int64_t");
  Option<S> o = internal::Row(std::move(key), OptionType::kInt, member, std::move(def),
                              std::move(description));
  if constexpr (std::is_same_v<V, int>) {
    o.spec.min = INT_MIN;
    o.spec.max = INT_MAX;
  }
  return o;
}

template <typename S, typename T>
Option<S> Millis(std::string key, T S::*member, nlohmann::json def, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, int64_t>, "Millis binds int64_t");
  return internal::Row(std::move(key), OptionType::kMillis, member, std::move(def),
                       std::move(description));
}

// "<int><s|m|h|d>" in YAML, integer milliseconds in the struct.
template <typename S, typename T>
Option<S> Duration(std::string key, T S::*member, nlohmann::json def, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, int64_t>, "Duration binds int64_t (ms)");
  return internal::Row(std::move(key), OptionType::kDuration, member, std::move(def),
                       std::move(description));
}

template <typename S, typename T>
Option<S> Flag(std::string key, T S::*member, bool def, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, bool>, "Flag binds bool");
  return internal::Row(std::move(key), OptionType::kBool, member, def, std::move(description));
}

template <typename S>
Option<S> TextMap(std::string key, std::map<std::string, std::string> S::*member,
                  std::string description) {
  return internal::Row(std::move(key), OptionType::kStringMap, member, nlohmann::json::object(),
                       std::move(description));
}

template <typename S, typename T>
Option<S> TextList(std::string key, T S::*member, nlohmann::json def, std::string description) {
  static_assert(std::is_same_v<internal::Value<T>, std::vector<std::string>>,
                "TextList binds std::vector<std::string>");
  return internal::Row(std::move(key), OptionType::kStringList, member, std::move(def),
                       std::move(description));
}

// A row whose value reaches the struct through code, when the YAML form and the member differ
// (an enum stored as a bool, say). `set` receives the validated value; `get` returns it.
template <typename S>
Option<S> Custom(OptionSpec spec, std::function<void(S&, const nlohmann::json&)> set,
                 std::function<nlohmann::json(const S&)> get) {
  return Option<S>{std::move(spec), std::move(set), std::move(get)};
}

// An optional nested block with its own keys (a transform block, say): validated against
// `inner`'s rows when given, bound into `member`, empty when the key is unset. Its required keys
// are required only when the block is given.
template <typename S, typename Inner>
Option<S> Block(std::string key, std::optional<Inner> S::*member, const OptionTable<Inner>& inner,
                std::string description, BlockValidator validate = nullptr) {
  Option<S> o;
  o.spec.key = std::move(key);
  o.spec.type = OptionType::kBlock;
  o.spec.description = std::move(description);
  o.spec.block =
      std::make_shared<const BlockSchema>(BlockSchema{inner.specs(), {}, std::move(validate)});
  o.set = [member, inner](S& s, const nlohmann::json& v) {
    Inner x;
    inner.Assign(v, x);
    s.*member = std::move(x);
  };
  o.get = [member, inner](const S& s) {
    return s.*member ? inner.Read(*(s.*member)) : nlohmann::json();
  };
  return o;
}

// A block whose required `type` selects its keys among `variants` (an auth block: bearer,
// api-key, hmac). `B` keeps `type` and the validated keys as `options` (a JSON object); the
// component that uses the block binds them with the table of that type (see
// MakeDestinationType in src/destinations/registry.h, RequestAuth::Create in src/admin).
template <typename S, typename B>
Option<S> TypedBlock(std::string key, std::optional<B> S::*member,
                     std::vector<BlockVariant> variants, std::string description,
                     std::vector<OptionSpec> common = {}) {
  Option<S> o;
  o.spec.key = std::move(key);
  o.spec.type = OptionType::kBlock;
  o.spec.description = std::move(description);
  o.spec.block =
      std::make_shared<const BlockSchema>(BlockSchema{std::move(common), std::move(variants), {}});
  o.set = [member](S& s, const nlohmann::json& v) {
    B b;
    b.type = v.at("type").get<std::string>();
    b.options = v;
    b.options.erase("type");
    s.*member = std::move(b);
  };
  o.get = [member](const S& s) {
    if (!(s.*member)) return nlohmann::json();
    nlohmann::json v = (s.*member)->options;
    v["type"] = (s.*member)->type;
    return v;
  };
  return o;
}

}  // namespace opt
}  // namespace queuebox
