#include <nlohmann/json.hpp>
#include <sstream>

#include "verify/verify.h"

namespace queuebox::verify {

std::string RenderText(const Report& report) {
  std::ostringstream out;
  out << "QueueBox verify (" << report.dialect << ", ordering " << report.ordering << ")\n";
  int broken = 0, warnings = 0;
  for (const auto& check : report.checks) {
    broken += check.outcome == Outcome::kBroken;
    warnings += check.outcome == Outcome::kWarning;
    out << "\n[" << OutcomeName(check.outcome) << "] " << check.name << ": " << check.invariant
        << "\n";
    if (check.count > 0) {
      out << "  " << check.count << " row(s)";
      if (static_cast<int64_t>(check.rows.size()) < check.count) {
        out << ", the first " << check.rows.size() << " listed";
      }
      out << "\n";
    }
    if (!check.detail.empty()) out << "  " << check.detail << "\n";
    for (const auto& row : check.rows) {
      out << "   ";
      for (const auto& [name, value] : row) out << " " << name << "=" << value;
      out << "\n";
    }
  }
  out << "\n";
  if (broken > 0) {
    out << broken << " invariant(s) broken.\n";
  } else {
    out << "Every invariant holds" << (warnings > 0 ? " (with warnings)" : "") << ".\n";
  }
  return out.str();
}

std::string RenderJson(const Report& report) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const auto& check : report.checks) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& row : check.rows) {
      nlohmann::ordered_json r = nlohmann::ordered_json::object();
      for (const auto& [name, value] : row) r[name] = value;
      rows.push_back(std::move(r));
    }
    checks.push_back({{"name", check.name},
                      {"invariant", check.invariant},
                      {"outcome", OutcomeName(check.outcome)},
                      {"detail", check.detail},
                      {"count", check.count},
                      {"rows", std::move(rows)}});
  }
  nlohmann::ordered_json out = {{"dialect", report.dialect},
                                {"ordering", report.ordering},
                                {"ok", report.ExitCode() == 0},
                                {"checks", std::move(checks)}};
  return out.dump(2) + "\n";
}

}  // namespace queuebox::verify
