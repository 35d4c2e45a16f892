// nats_header_text_fuzz: NATS header bytes as a received message carries them, read by
// ParseNatsHeaderText (destinations/nats/nats_headers.h; the nats source reads every message
// through it), and the same headers put on a message with nats.c and read back by
// ReadNatsHeaders (its encoder, then the parser).
// Properties: nothing throws or crashes; every name is non-empty, without ':' or CRLF and not
// starting with a space or tab, and appears once; every value is without CRLF and without blanks at
// its ends; the headers written out again as "name: value" lines parse to the same headers; set on
// a natsMsg (natsMsgHeader_Set, the last value) they read back as that value per name.
#include <nats/nats.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "destinations/nats/nats_headers.h"
#include "fuzz_util.h"

using queuebox::NatsHeader;
using queuebox::fuzz::Require;

namespace {

bool NhtBlank(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }

bool SameHeaders(const std::vector<NatsHeader>& a, const std::vector<NatsHeader>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].values != b[i].values) return false;
  }
  return true;
}

void NhtCheckOnAMessage(const std::vector<NatsHeader>& headers) {
  natsMsg* m = nullptr;
  Require(natsMsg_Create(&m, "orders.created", nullptr, "{}", 2) == NATS_OK, "nats: a message");
  std::vector<NatsHeader> expected;
  for (const NatsHeader& h : headers) {
    // nats.c keeps names and values as C strings and its encoder turns CR and LF in a value
    // into spaces: such headers are not set here.
    if (h.name.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos ||
        h.values.back().find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos) {
      continue;
    }
    Require(natsMsgHeader_Set(m, h.name.c_str(), h.values.back().c_str()) == NATS_OK,
            "nats: a parsed header can be set");
    expected.push_back(NatsHeader{h.name, {h.values.back()}});
  }
  std::vector<NatsHeader> read = queuebox::ReadNatsHeaders(m);
  natsMsg_Destroy(m);
  Require(read.size() == expected.size(), "nats: one header per name set");
  for (const NatsHeader& h : expected) {
    const NatsHeader* got = queuebox::FindNatsHeader(read, h.name);
    Require(got != nullptr && got->name == h.name && got->values == h.values,
            "nats: a header set reads back as its exact name and value");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  Require(nats_Open(-1) == NATS_OK, "nats: the library opens");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = "NATS/1.0\r\n" + std::string(reinterpret_cast<const char*>(data), size);
  std::vector<NatsHeader> headers = queuebox::ParseNatsHeaderText(text);
  std::set<std::string> names;
  std::string again = "NATS/1.0\r\n";
  for (const NatsHeader& h : headers) {
    Require(!h.name.empty() && h.name.find(':') == std::string::npos &&
                h.name.find("\r\n") == std::string::npos && h.name.front() != ' ' &&
                h.name.front() != '\t',
            "a name is not empty, has no ':' or CRLF and starts with no blank");
    Require(names.insert(h.name).second, "a name appears once");
    Require(!h.values.empty(), "a header has a value");
    for (const std::string& v : h.values) {
      Require(v.find("\r\n") == std::string::npos &&
                  (v.empty() || (!NhtBlank(v.front()) && !NhtBlank(v.back()))),
              "a value has no CRLF and no blanks at its ends");
      again += h.name + ": " + v + "\r\n";
    }
  }
  again += "\r\n";
  Require(SameHeaders(queuebox::ParseNatsHeaderText(again), headers),
          "headers written out again parse to the same headers");
  NhtCheckOnAMessage(headers);
  return 0;
}
