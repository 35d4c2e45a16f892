#include "store/sql_template.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <utility>

namespace queuebox::store {
namespace {

bool IsTemplateNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// The end of the quoted text or `--` comment that starts at t[i]; i when none starts there. An
// open quote runs to the end (NamedSql reports it).
size_t SkipVerbatim(std::string_view t, size_t i) {
  const char c = t[i];
  if (c == '\'' || c == '"') {
    size_t end = i + 1;
    while (true) {
      end = t.find(c, end);
      if (end == std::string_view::npos) return t.size();
      if (end + 1 < t.size() && t[end + 1] == c) {
        end += 2;
        continue;
      }
      return end + 1;
    }
  }
  if (c == '-' && i + 1 < t.size() && t[i + 1] == '-') {
    const size_t eol = t.find('\n', i);
    return eol == std::string_view::npos ? t.size() : eol;
  }
  return i;
}

struct Directive {
  enum class Kind { kNone, kIf, kElse, kEndIf, kDefine, kEndDefine, kUse };
  Kind kind = Kind::kNone;
  std::string name;               // kIf: the flag; kDefine, kUse: the macro
  std::vector<std::string> args;  // kDefine: the parameters; kUse: the arguments
  size_t end = 0;                 // just after the closing brace
};

// Reads `name` at t[j]; returns the position after it.
size_t ReadName(std::string_view t, size_t j, std::string& name) {
  size_t k = j;
  while (k < t.size() && IsTemplateNameChar(t[k])) ++k;
  name.assign(t.substr(j, k - j));
  return k;
}

// The parenthesised list at t[j] == '(' split at its top-level commas; `j` ends after ')'.
Result<std::vector<std::string>> ReadList(std::string_view t, size_t& j) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = j + 1;
  for (size_t k = j; k < t.size();) {
    const size_t v = SkipVerbatim(t, k);
    if (v != k) {
      k = v;
      continue;
    }
    const char c = t[k];
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) {
      const std::string_view last = Trim(t.substr(start, k - start));
      if (!last.empty() || !out.empty()) out.emplace_back(last);
      j = k + 1;
      return out;
    }
    if (c == ',' && depth == 1) {
      out.emplace_back(Trim(t.substr(start, k - start)));
      start = k + 1;
    }
    ++k;
  }
  return Internal("An SQL template's parenthesis is not closed.");
}

// The directive at t[i] == '{'; kNone for other braces ({T}, {id}, a macro's {parameter}).
Result<Directive> ReadDirective(std::string_view t, size_t i) {
  using Kind = Directive::Kind;
  Directive d;
  std::string word;
  size_t j = ReadName(t, i + 1, word);
  if (j < t.size() && t[j] == '(' && !word.empty()) {
    d.kind = Kind::kUse;
    d.name = word;
    QB_ASSIGN_OR_RETURN(d.args, ReadList(t, j));
  } else if (word == "else" && j < t.size() && t[j] == '}') {
    d.kind = Kind::kElse;
  } else if ((word == "if" || word == "end" || word == "define") && j < t.size() && t[j] == ' ') {
    std::string second;
    j = ReadName(t, j + 1, second);
    if (word == "end" && (second == "if" || second == "define")) {
      d.kind = second == "if" ? Kind::kEndIf : Kind::kEndDefine;
    } else if (word == "if" && !second.empty()) {
      d.kind = Kind::kIf;
      d.name = second;
    } else if (word == "define" && !second.empty() && j < t.size() && t[j] == '(') {
      d.kind = Kind::kDefine;
      d.name = second;
      QB_ASSIGN_OR_RETURN(d.args, ReadList(t, j));
    } else {
      return Internal("An SQL template's {" + word + " " + second + "...} is malformed.");
    }
  } else {
    return d;  // kNone
  }
  if (j >= t.size() || t[j] != '}') {
    return Internal("An SQL template's {" + word + "...} is not closed with }.");
  }
  d.end = j + 1;
  return d;
}

class Expander {
 public:
  using Kind = Directive::Kind;

  explicit Expander(const SqlTemplateOptions& options) : flags_(options.flags) {
    for (const SqlMacro& m : options.macros) macros_[m.name] = m;
  }

  // Expands t[i..] into `out` up to a directive among `stops` (consumed and returned) or the end
  // of the text (kNone).
  Result<Kind> Block(std::string_view t, size_t& i, std::string& out,
                     std::initializer_list<Kind> stops) {
    while (i < t.size()) {
      const size_t v = SkipVerbatim(t, i);
      if (v != i) {
        out.append(t.substr(i, v - i));
        i = v;
        continue;
      }
      if (t[i] != '{') {
        out += t[i++];
        continue;
      }
      QB_ASSIGN_OR_RETURN(Directive d, ReadDirective(t, i));
      if (d.kind == Kind::kNone) {
        out += t[i++];
        continue;
      }
      i = d.end;
      for (Kind stop : stops) {
        if (d.kind == stop) return stop;
      }
      QB_RETURN_IF_ERROR(Apply(t, i, d, out));
    }
    return Kind::kNone;
  }

 private:
  Status Apply(std::string_view t, size_t& i, const Directive& d, std::string& out) {
    switch (d.kind) {
      case Kind::kIf: {
        std::string yes, no;
        QB_ASSIGN_OR_RETURN(Kind end, Block(t, i, yes, {Kind::kElse, Kind::kEndIf}));
        if (end == Kind::kElse) {
          QB_ASSIGN_OR_RETURN(end, Block(t, i, no, {Kind::kEndIf}));
        }
        if (end != Kind::kEndIf) return Internal("{if " + d.name + "} has no {end if}.");
        const bool on = std::find(flags_.begin(), flags_.end(), d.name) != flags_.end();
        out += on ? yes : no;
        return Status::Ok();
      }
      case Kind::kDefine: {
        SqlMacro m{d.name, d.args, ""};
        QB_ASSIGN_OR_RETURN(Kind end, Block(t, i, m.body, {Kind::kEndDefine}));
        if (end != Kind::kEndDefine)
          return Internal("{define " + d.name + "} has no {end define}.");
        macros_[d.name] = std::move(m);
        return Status::Ok();
      }
      case Kind::kUse:
        return Use(d, out);
      default:
        return Internal("An SQL template has a directive out of place near offset " +
                        std::to_string(d.end) + ".");
    }
  }

  Status Use(const Directive& d, std::string& out) {
    auto it = macros_.find(d.name);
    if (it == macros_.end()) {
      return Internal("The SQL uses the macro {" + d.name + "(...)}, which is not defined.");
    }
    const SqlMacro& m = it->second;
    if (d.args.size() != m.params.size()) {
      return Internal("The macro " + d.name + " takes " + std::to_string(m.params.size()) +
                      " arguments, not " + std::to_string(d.args.size()) + ".");
    }
    std::vector<std::string> args(d.args.size());
    for (size_t a = 0; a < d.args.size(); ++a) {
      size_t k = 0;
      QB_ASSIGN_OR_RETURN(Kind end, Block(d.args[a], k, args[a], {}));
      (void)end;
    }
    // One pass over the body: each {parameter} becomes its argument (an argument's own braces
    // are never read as parameters).
    std::string body;
    for (size_t k = 0; k < m.body.size();) {
      if (m.body[k] == '{') {
        std::string name;
        const size_t e = ReadName(m.body, k + 1, name);
        auto p = std::find(m.params.begin(), m.params.end(), name);
        if (e < m.body.size() && m.body[e] == '}' && p != m.params.end()) {
          body += args[static_cast<size_t>(p - m.params.begin())];
          k = e + 1;
          continue;
        }
      }
      body += m.body[k++];
    }
    out += Trim(body);
    return Status::Ok();
  }

  std::vector<std::string> flags_;
  std::map<std::string, SqlMacro> macros_;
};

}  // namespace

Result<std::string> ExpandSqlTemplate(std::string_view text, const SqlTemplateOptions& options) {
  Expander expander(options);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  QB_ASSIGN_OR_RETURN(Directive::Kind end, expander.Block(text, i, out, {}));
  (void)end;
  return out;
}

}  // namespace queuebox::store
