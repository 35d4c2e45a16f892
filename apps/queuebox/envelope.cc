// `queuebox envelope`: validate or re-encode a BabelQueue envelope (the SDK does the work).
#include <iostream>

#include "commands.h"
#include "envelope_command.h"

namespace queuebox::app {

int Envelope(const std::string& path, bool canonical) {
  return RunEnvelopeCommand(path, canonical, std::cin, std::cout, std::cerr);
}

}  // namespace queuebox::app
