// envelope_command.h: `queuebox envelope [--canonical] <file|->`: checks a BabelQueue envelope
// (schema_version 1) the way a consumer does (babelqueue::Decode + Accepts) and, with
// --canonical, prints it re-encoded in the SDK's canonical form (babelqueue::Encode).
//
// Exit codes: 0 accepted (stdout: a one-line summary, or the canonical bytes followed by "\n");
// 1 not accepted (stderr: "not accepted: <reason>", e.g. "missing_urn: ..."); 2 the input cannot
// be read (stderr names the path). Never throws.
#pragma once

#include <iosfwd>
#include <string>

namespace queuebox {

// path "-" reads `in` (standard input); anything else is a file path.
int RunEnvelopeCommand(const std::string& path, bool canonical, std::istream& in, std::ostream& out,
                       std::ostream& err);

}  // namespace queuebox
