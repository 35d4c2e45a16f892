// nats_settings.cc: the nats kind's table and its start-up checks (QueueBox reference §11.3,
// §11.4).
#include "sources/nats/nats_settings.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

std::vector<std::string> CheckNatsSource(const json& block) {
  std::vector<std::string> problems;
  for (const char* key : {"servers", "stream", "durable"}) {
    if (block.contains(key) && block[key].is_string() && IsBlank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  if (HasKey(block, "username") != HasKey(block, "password")) {
    problems.push_back("password: username and password go together");
  }
  if (HasKey(block, "token") && HasKey(block, "username")) {
    problems.push_back("token: use a token or a username and password, not both");
  }
  CheckBrokerKeys(block, problems);
  return problems;
}

OptionTable<NatsSourceSettings> BuildNatsOptions() {
  using S = NatsSourceSettings;
  OptionTable<S> t = {
      opt::Text("servers", &S::servers, nullptr, "Comma-separated nats:// server URLs").Required(),
      opt::Text("stream", &S::stream, nullptr, "JetStream stream (never created by QueueBox)")
          .Required(),
      opt::Text("durable", &S::durable, nullptr,
                "Durable pull consumer; replicas with one name share the work")
          .Required(),
      opt::Text("filterSubject", &S::filter_subject, nullptr,
                "Subject filter of the consumer (e.g. orders.>)"),
      opt::Millis("ackWaitMs", &S::ack_wait_ms, 30000,
                  "Redelivery of an unacknowledged message after this many ms")
          .Min(1),
      opt::Int("batchSize", &S::batch_size, 100, "Messages per fetch (and per stored batch)")
          .Range(1, 10000),
      opt::Text("username", &S::username, nullptr, "User name"),
      opt::Secret("password", &S::password, "Password (secret; file: allowed)"),
      opt::Secret("token", &S::token, "Token (secret; file: allowed)"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
  return t;
}

SourceCommon NatsCommon(const NatsSourceSettings& s) {
  return {s.broker.topic, s.broker.keys, std::nullopt};
}

}  // namespace

const OptionTable<NatsSourceSettings>& NatsSourceOptions() {
  static const OptionTable<NatsSourceSettings>* const t =
      new OptionTable<NatsSourceSettings>(BuildNatsOptions());
  return *t;
}

SourceKind NatsSourceKind(SourceFactory<NatsSourceSettings> create) {
  return MakeSourceKind<NatsSourceSettings>("nats", NatsSourceOptions(), &CheckNatsSource,
                                            &NatsCommon, create);
}

Result<NatsSourceSettings> BindNatsSource(const SourceConfig& source) {
  return BindSourceSettings(source, "nats", NatsSourceOptions());
}

}  // namespace queuebox::sources
