// random_uuid.h: a random (version 4) UUID in its text form, for the ids and claim tokens of the
// in-memory stores (fake_store.h, memory_inbox_store.h). Thread-safe.
#pragma once

#include <string>

namespace queuebox::testing {

std::string RandomUuid();

}  // namespace queuebox::testing
