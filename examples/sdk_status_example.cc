// sdk_status_example.cc: an SDK error, as an application would log it.
//
//   sdk_status_example
//
// Decodes bytes that are not an envelope and prints the error as "CODE: message"
// (Status::ToString). The program links the `babelqueue` library alone: everything the SDK's
// headers declare, the error type included, comes with it.
#include <iostream>

#include "babelqueue/envelope.h"

int main() {
  babelqueue::Result<babelqueue::Envelope> envelope = babelqueue::Decode("{\"job\": 42}");
  if (envelope.ok()) {
    std::cerr << "bytes that are not an envelope were accepted\n";
    return 1;
  }
  std::cout << envelope.status().ToString() << "\n";
  return 0;
}
