#include "core/header_filter.h"

#include <algorithm>

namespace queuebox {
namespace {

using nlohmann::json;

// Parses one list of rules ("require" or "exclude") into `out`, adding problems.
template <typename Rule, typename Kind>
void ParseRules(const json& block, const char* list_name, std::vector<Rule>& out,
                std::vector<std::string>& problems) {
  if (!block.contains(list_name) || block[list_name].is_null()) return;
  const json& list = block[list_name];
  if (!list.is_array()) {
    problems.push_back(std::string(list_name) + ": must be a list of rules");
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = std::string(list_name) + "[" + std::to_string(i) + "]";
    const json& r = list[i];
    if (!r.is_object()) {
      problems.push_back(at + ": must be a rule (header plus one of equals, in, matches, exists)");
      continue;
    }
    for (auto it = r.begin(); it != r.end(); ++it) {
      static const char* const kKeys[] = {"header", "equals", "in", "matches", "exists"};
      if (std::find(std::begin(kKeys), std::end(kKeys), it.key()) == std::end(kKeys)) {
        problems.push_back(at + "." + it.key() +
                           ": unknown key; a rule takes header, equals, in, matches or exists");
      }
    }
    Rule rule;
    if (!r.contains("header") || !r["header"].is_string() ||
        r["header"].get<std::string>().find_first_not_of(" \t") == std::string::npos) {
      problems.push_back(at + ".header: required, the name of a header");
    } else {
      rule.header = r["header"].get<std::string>();
    }
    int kinds = 0;
    if (r.contains("equals")) {
      ++kinds;
      rule.kind = Kind::kEquals;
      if (!r["equals"].is_string()) {
        problems.push_back(at + ".equals: must be a string");
      } else {
        rule.values = {r["equals"].get<std::string>()};
      }
    }
    if (r.contains("in")) {
      ++kinds;
      rule.kind = Kind::kIn;
      const json& in = r["in"];
      bool ok = in.is_array() && !in.empty() &&
                std::all_of(in.begin(), in.end(), [](const json& v) { return v.is_string(); });
      if (!ok) {
        problems.push_back(at + ".in: must be a non-empty list of strings");
      } else {
        for (const json& v : in) rule.values.push_back(v.get<std::string>());
      }
    }
    if (r.contains("matches")) {
      ++kinds;
      rule.kind = Kind::kMatches;
      if (!r["matches"].is_string()) {
        problems.push_back(at + ".matches: must be a glob (a string)");
      } else {
        auto p = TopicPattern::Compile(r["matches"].get<std::string>());
        if (!p.ok()) {
          problems.push_back(at + ".matches: " + p.status().message());
        } else {
          rule.pattern = std::move(p).value();
        }
      }
    }
    if (r.contains("exists")) {
      ++kinds;
      rule.kind = Kind::kExists;
      const json& e = r["exists"];
      bool is_true =
          e.is_boolean() ? e.get<bool>() : (e.is_string() && e.get<std::string>() == "true");
      if (!is_true) {
        problems.push_back(at +
                           ".exists: only `exists: true` is a rule; to refuse messages that carry "
                           "the header, put `exists: true` under exclude");
      }
    }
    if (kinds != 1) {
      problems.push_back(at + ": needs exactly one of equals, in, matches, exists (has " +
                         std::to_string(kinds) + ")");
    }
    out.push_back(std::move(rule));
  }
}

}  // namespace

bool HeaderFilter::Rule::Matches(const Lookup& lookup) const {
  std::optional<std::string> v = lookup(header);
  if (!v) return false;
  switch (kind) {
    case Kind::kExists:
      return true;
    case Kind::kEquals:
    case Kind::kIn:
      return std::find(values.begin(), values.end(), *v) != values.end();
    case Kind::kMatches:
      return pattern && pattern->Matches(*v);
  }
  return false;
}

std::string HeaderFilter::Rule::Describe() const {
  const char* k = kind == Kind::kEquals    ? "equals"
                  : kind == Kind::kIn      ? "in"
                  : kind == Kind::kMatches ? "matches"
                                           : "exists";
  return header + " " + k;
}

std::vector<std::string> HeaderFilter::Problems(const json& block) {
  std::vector<std::string> problems;
  if (block.is_null()) return problems;
  if (!block.is_object()) return {"must be a block with require and/or exclude lists"};
  for (auto it = block.begin(); it != block.end(); ++it) {
    if (it.key() != "require" && it.key() != "exclude") {
      problems.push_back(it.key() + ": unknown key; a filter takes require and exclude");
    }
  }
  std::vector<Rule> ignored;
  ParseRules<Rule, Kind>(block, "require", ignored, problems);
  ParseRules<Rule, Kind>(block, "exclude", ignored, problems);
  return problems;
}

Result<HeaderFilter> HeaderFilter::Parse(const json& block) {
  std::vector<std::string> problems = Problems(block);
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    return InvalidArgument(all);
  }
  HeaderFilter f;
  if (block.is_null()) return f;
  ParseRules<Rule, Kind>(block, "require", f.require_, problems);
  ParseRules<Rule, Kind>(block, "exclude", f.exclude_, problems);
  return f;
}

std::optional<std::string> HeaderFilter::FirstFailure(const Lookup& header) const {
  for (size_t i = 0; i < require_.size(); ++i) {
    if (!require_[i].Matches(header)) {
      return "require[" + std::to_string(i) + "] (" + require_[i].Describe() + ")";
    }
  }
  for (size_t i = 0; i < exclude_.size(); ++i) {
    if (exclude_[i].Matches(header)) {
      return "exclude[" + std::to_string(i) + "] (" + exclude_[i].Describe() + ")";
    }
  }
  return std::nullopt;
}

}  // namespace queuebox
