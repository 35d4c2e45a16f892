// request_headers.h: reading a header of an inbound request (the data and management ports).
//
// Thread-safety: pure function over the request.
#pragma once

#include <httplib.h>

#include <string>

namespace queuebox {

// The first value of header `name` (any case), whole; "" when absent. httplib's
// get_header_value goes through a C string and cuts a value at a NUL byte, which cpp-httplib 0.11
// lets through (raw, or decoded from %00): an idempotency key "a\0b" would read as "a", and a
// right signature followed by a NUL and junk would pass.
inline std::string HeaderValue(const httplib::Request& req, const std::string& name) {
  auto range = req.headers.equal_range(name);
  return range.first == range.second ? std::string() : range.first->second;
}

}  // namespace queuebox
