// json_path_fuzz: the definite JSONPath subset of source key paths (core/json_path.h): a path
// and a JSON document from the input.
// Properties: Compile never throws; a compiled path's Find and Text never throw; Text is a
// trimmed, non-empty string when present; Compile(text()) gives the same path.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_path.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string path_text = in.ConsumeRandomLengthString(128);
  std::string document_text = in.ConsumeRemainingBytesAsString();
  queuebox::Result<queuebox::JsonPath> path = queuebox::JsonPath::Compile(path_text);
  if (!path.ok()) return 0;
  queuebox::Result<queuebox::JsonPath> again = queuebox::JsonPath::Compile(path->text());
  Require(again.ok(), "a compiled path's text compiles");
  nlohmann::json document = nlohmann::json::parse(document_text, nullptr, false);
  if (document.is_discarded()) return 0;
  const nlohmann::json* found = path->Find(document);
  Require(found == again->Find(document), "the same path finds the same value");
  std::optional<std::string> text = path->Text(document);
  if (text) {
    Require(!text->empty(), "Text is never blank");
    Require(text->front() != ' ' && text->back() != ' ', "Text is trimmed");
    Require(found != nullptr, "Text comes from a found value");
  }
  std::vector<queuebox::JsonPath> paths{*path, *again};
  Require(queuebox::FirstText(paths, document) == text, "FirstText gives the first path's text");
  return 0;
}
