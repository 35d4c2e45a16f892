#include "destinations/nats/nats_headers.h"

#include <algorithm>
#include <cctype>

// nats.c 3.4.1 exports its header encoder and byte buffer (declared in its private msg.h and
// buf.h): the only way to the header bytes of a received message and to the exact keys and value
// lists of a built one. For a received message never read through natsMsgHeader_* the encoder
// copies the bytes as they came.
extern "C" {
typedef struct __natsBuffer natsBuffer;
int natsMsgHeader_encodedLen(natsMsg* msg);
natsStatus natsMsgHeader_encode(natsBuffer* buf, natsMsg* msg);
natsStatus natsBuf_CreateWithBackend(natsBuffer** new_buf, char* data, int len, int capacity);
void natsBuf_Destroy(natsBuffer* buf);
}

namespace queuebox {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

bool Blank(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n';
}

std::string_view Trim(std::string_view v) {
  while (!v.empty() && Blank(v.front())) v.remove_prefix(1);
  while (!v.empty() && Blank(v.back())) v.remove_suffix(1);
  return v;
}

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::vector<NatsHeader> ParseNatsHeaderText(std::string_view text) {
  std::vector<NatsHeader> out;
  size_t last = kNone;  // the header of the previous line, for a continuation
  size_t eol = text.find("\r\n");
  if (eol == std::string_view::npos) return out;  // the status line only
  for (size_t pos = eol + 2; pos < text.size(); pos = eol + 2) {
    eol = text.find("\r\n", pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.empty()) break;  // the end of the headers
    if (line.front() == ' ' || line.front() == '\t') {
      std::string_view more = Trim(line);
      if (last == kNone || more.empty()) continue;
      std::string& value = out[last].values.back();
      value += value.empty() ? "" : " ";
      value += more;
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      last = kNone;
      continue;
    }
    std::string_view name = line.substr(0, colon);
    auto same =
        std::find_if(out.begin(), out.end(), [&](const NatsHeader& h) { return h.name == name; });
    last = static_cast<size_t>(same - out.begin());
    if (same == out.end()) out.push_back(NatsHeader{std::string(name), {}});
    out[last].values.emplace_back(Trim(line.substr(colon + 1)));
  }
  return out;
}

std::vector<NatsHeader> ReadNatsHeaders(natsMsg* msg) {
  const int len = msg == nullptr ? 0 : natsMsgHeader_encodedLen(msg);
  if (len <= 0) return {};
  std::string text(static_cast<size_t>(len), '\0');
  natsBuffer* buf = nullptr;
  if (natsBuf_CreateWithBackend(&buf, text.data(), 0, len) != NATS_OK) return {};
  // natsMsgHeader_encodedLen is the encoder's exact length: the text fits, the buffer never grows.
  const natsStatus s = natsMsgHeader_encode(buf, msg);
  natsBuf_Destroy(buf);
  if (s != NATS_OK || text.compare(0, 8, "NATS/1.0") != 0) return {};
  return ParseNatsHeaderText(text);
}

const NatsHeader* FindNatsHeader(const std::vector<NatsHeader>& headers, std::string_view name) {
  const NatsHeader* other_case = nullptr;
  for (const NatsHeader& h : headers) {
    if (h.name == name) return &h;
    if (other_case == nullptr && SameIgnoringCase(h.name, name)) other_case = &h;
  }
  return other_case;
}

}  // namespace queuebox
