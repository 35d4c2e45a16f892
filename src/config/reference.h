// reference.h: docs/configuration.md, generated from the option tables (architecture §7 rule 4).
// A unit test (reference_test.cc) fails when the checked-in file differs; run it with
// QB_UPDATE_DOCS=1 to rewrite the file.
#pragma once

#include <string>

namespace queuebox {

// The whole Markdown text of docs/configuration.md for the destination types compiled in.
std::string RenderConfigurationReference();

}  // namespace queuebox
