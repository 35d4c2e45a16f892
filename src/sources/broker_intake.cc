#include "sources/broker_intake.h"

#include <openssl/evp.h>

#include "sources/intake_parts.h"

namespace queuebox::sources {

std::string HeaderText(std::string_view bytes) {
  if (IsUtf8(bytes)) return std::string(bytes);
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return "base64:" + out;
}

Result<BrokerIntake> BrokerIntake::Create(std::string kind, std::string source_name,
                                          const BrokerSourceKeys& keys,
                                          const SourceTransforms* transforms,
                                          IntakeObserver* observer) {
  QB_ASSIGN_OR_RETURN(IntakeRules r,
                      RulesFromKeys(source_name, keys.keys, keys.idempotency_key_path));
  const bool kafka = kind == "kafka";
  const AttributeHeaders& names = keys.attribute_headers;
  r.kind = kind;
  r.policy = RefusalPolicy::kStoreDead;
  r.repeated = RepeatedHeader::kLastWins;
  r.idempotency_key.header = names.idempotency_key;
  r.idempotency_key.order = {KeyFrom::kHeader, KeyFrom::kExpression, KeyFrom::kPaths,
                             kafka ? KeyFrom::kRecordKey : KeyFrom::kMessageId,
                             KeyFrom::kBodyDigest};
  r.aggregate_id.header = names.aggregate_id;
  r.aggregate_id.order = {KeyFrom::kExpression, KeyFrom::kPaths, KeyFrom::kHeader};
  if (kafka) r.aggregate_id.order.push_back(KeyFrom::kRecordKey);
  r.event_type.header = names.event_type;
  r.event_type.order = {KeyFrom::kExpression, KeyFrom::kPaths};
  if (keys.event_type_from_header) r.event_type.order.push_back(KeyFrom::kHeader);
  r.transforms = transforms;
  r.observer = observer;
  return BrokerIntake(std::make_shared<const Intake>(std::move(r)));
}

const std::string& BrokerIntake::source() const { return intake_->source(); }

std::optional<NewInboxMessage> BrokerIntake::Receive(BrokerMessage message) const {
  Intaken in = intake_->Receive(std::move(message));
  if (in.kind != Intaken::Kind::kRow) return std::nullopt;  // filtered (never refused)
  return std::move(in.row);
}

void BrokerIntake::Count(IntakeObserver* observer, std::span<const InboxStoreOutcome> outcomes,
                         int64_t filtered) const {
  if (observer == nullptr) return;
  int64_t stored = 0, duplicate = 0;
  for (const InboxStoreOutcome& o : outcomes) {
    switch (o.kind) {
      case InboxStoreOutcome::Kind::kStored:
        ++stored;
        break;
      case InboxStoreOutcome::Kind::kDuplicate:
        ++duplicate;
        break;
      case InboxStoreOutcome::Kind::kRejected:
        observer->OnInboxRejection("invalid_message");
        break;
    }
  }
  if (stored > 0) observer->OnInboxMessages("new", stored);
  if (duplicate > 0) observer->OnInboxMessages("duplicate", duplicate);
  for (int64_t i = 0; i < filtered; ++i) observer->OnInboxFiltered(source());
}

}  // namespace queuebox::sources
