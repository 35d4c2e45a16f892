// sql_template.h: the template layer of QueueBox's SQL files (NamedSql::Compile expands it first),
// so that a statement's variants and its repeated predicates are written once:
//
//   {if flag} ... {else} ... {end if}     kept when `flag` is among the caller's flags (the
//                                          {else} part is optional; blocks do not nest)
//   {define name(a, b)} ... {end define}  a macro; in its body {a} and {b} stand for the arguments
//   {name(x, y)}                          a use of a macro defined above it (or by the caller):
//                                          the arguments, split at commas outside parentheses and
//                                          trimmed, replace the parameters in the body
//
// Any other braces ({T}, {id}: the table and column names RenderSql fills in) are left as they
// are, and so are `--` comments and text in '...' or "..." quotes.
//
// Errors are bugs in QueueBox's own SQL, so they are kInternal.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "queuebox/status.h"

namespace queuebox::store {

// A macro the caller defines for a template, as {define name(params)} body {end define} would.
struct SqlMacro {
  std::string name;
  std::vector<std::string> params;
  std::string body;
};

// What a template is expanded with: the flags of its {if} blocks and the caller's macros.
struct SqlTemplateOptions {
  std::vector<std::string> flags;
  std::vector<SqlMacro> macros;
};

// `text` with its template parts expanded. kInternal for a use of an undefined macro, a use with
// the wrong number of arguments, a directive out of place, or a block that is not closed.
Result<std::string> ExpandSqlTemplate(std::string_view text,
                                      const SqlTemplateOptions& options = {});

}  // namespace queuebox::store
