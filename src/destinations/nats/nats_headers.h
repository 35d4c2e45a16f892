// nats_headers.h: a NATS message's headers read exactly, for the nats destination (the pub ack's
// Nats-Msg-Id) and the nats source (every header). nats.c 3.4.1's natsMsgHeader_Get/Values look a
// name up by prefix within a hash bucket ("x-attempt" can answer the value of "x-attempth1"), and
// its parser of received headers takes the next line as the value of an empty one ("a: " then
// "b: v" reads as a = "b: v", b missing). Neither is used here: the headers are taken as nats.c
// encodes them (a received message's bytes as they came; a built one's from its table, by exact
// key) and parsed by ParseNatsHeaderText.
//
// Thread-safety: the functions hold no state; a natsMsg belongs to its caller.
#pragma once

#include <nats/nats.h>

#include <string>
#include <string_view>
#include <vector>

namespace queuebox {

// One header name (exact bytes, letter case kept) and its values in the order they came.
struct NatsHeader {
  std::string name;
  std::vector<std::string> values;
};

// Parses NATS header text: a status line ("NATS/1.0 ..."), then lines "name: value" ending in
// CRLF, up to an empty line or the end. The value is the rest of the line after the first ':',
// blanks at both ends trimmed (as nats.c does), possibly empty; a line that starts with a blank
// continues the previous value (joined by one space; a blank one adds nothing). A line without ':'
// or with an empty name is skipped. Names compare exactly: one entry per name, in the order names
// first appear. Pure.
std::vector<NatsHeader> ParseNatsHeaderText(std::string_view text);

// The headers of `msg`, exactly (see above); empty when it has none. No I/O.
std::vector<NatsHeader> ReadNatsHeaders(natsMsg* msg);

// The header named exactly `name`, else one whose name equals it in another letter case (the
// first in `headers` order), else nullptr.
const NatsHeader* FindNatsHeader(const std::vector<NatsHeader>& headers, std::string_view name);

}  // namespace queuebox
