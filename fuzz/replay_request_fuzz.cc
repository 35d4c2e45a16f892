// replay_request_fuzz: the body of POST /admin/replay (admin/replay.h) and the ISO-8601 instants
// it carries.
// Properties: ParseReplayRequest never throws; a parsed request is already normal (normalising it
// again succeeds and changes nothing); a normalised instant normalises to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/replay.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

namespace {

bool Same(const queuebox::ReplayRequest& a, const queuebox::ReplayRequest& b) {
  return a.table == b.table && a.ids == b.ids && a.topic == b.topic && a.topics == b.topics &&
         a.destination == b.destination && a.source == b.source && a.sources == b.sources &&
         a.created_after == b.created_after && a.created_before == b.created_before;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  queuebox::Result<queuebox::ReplayRequest> request = queuebox::ParseReplayRequest(body);
  if (request.ok()) {
    queuebox::ReplayRequest again = *request;
    Require(queuebox::NormaliseReplayRequest(again).ok(), "a parsed request normalises");
    Require(Same(again, *request), "a parsed request is already normal");
    (void)request->Describe();
    if (request->ids) {
      for (const std::string& id : *request->ids) Require(queuebox::IsUuid(id), "ids are UUIDs");
    }
  }
  queuebox::Result<std::string> instant = queuebox::NormaliseInstant(body);
  if (instant.ok()) {
    queuebox::Result<std::string> again = queuebox::NormaliseInstant(*instant);
    Require(again.ok() && *again == *instant, "a normalised instant normalises to itself");
    Require(!instant->empty() && instant->back() == 'Z', "a normalised instant ends in Z");
  }
  (void)queuebox::IsUuid(body);
  return 0;
}
