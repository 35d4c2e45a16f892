// kafka_source.cc: placeholder until the kafka consumer lands (issue 15).
#include "sources/kafka/kafka_source.h"

namespace queuebox::sources {

Result<std::unique_ptr<BrokerSource>> CreateKafkaSource(KafkaSourceSettings settings,
                                                        const BrokerSourceContext&) {
  return FailedPrecondition("sources." + settings.name + ".type: kafka sources are not built yet");
}

}  // namespace queuebox::sources
