// envelope_command.cc: see envelope_command.h.
#include "envelope_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "babelqueue/envelope.h"

namespace queuebox {

int RunEnvelopeCommand(const std::string& path, bool canonical, std::istream& in, std::ostream& out,
                       std::ostream& err) {
  std::string bytes;
  if (path == "-") {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) {
      err << "cannot read standard input\n";
      return 2;
    }
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      err << "cannot read " << path << ": " << std::strerror(errno) << "\n";
      return 2;
    }
    bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }

  babelqueue::Result<babelqueue::Envelope> env = babelqueue::Decode(bytes);
  babelqueue::Status verdict = env.ok() ? babelqueue::Accepts(*env) : env.status();
  if (!verdict.ok()) {
    err << "not accepted: " << verdict.message() << "\n";
    return 1;
  }
  if (canonical) {
    babelqueue::Result<std::string> encoded = babelqueue::Encode(*env);
    if (!encoded.ok()) {
      err << "not accepted: " << encoded.status().message() << "\n";
      return 1;
    }
    out << *encoded << "\n";
    return 0;
  }
  out << "accepted: job=" << env->job << " id=" << env->meta.id << " queue=" << env->meta.queue
      << " lang=" << env->meta.lang << " attempts=" << env->attempts
      << (env->dead_letter ? " dead_letter=" + env->dead_letter->reason : std::string()) << "\n";
  return 0;
}

}  // namespace queuebox
