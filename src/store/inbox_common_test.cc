// The inbox insert's outcome mapping, shared by the dialects (inbox_common.h InboxInsertOutcomes).
// Each dialect's insert is proved by tests/contract/inbox_store_contract_test.cc.
#include "store/inbox_common.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;

NewInboxMessage InboxCommonMessage(std::string source, std::string key) {
  NewInboxMessage m;
  m.source = std::move(source);
  m.idempotency_key = std::move(key);
  return m;
}

TEST(InboxInsertOutcomesTest, TheFirstMessageOfAReturnedKeyIsStoredEveryOtherADuplicate) {
  const NewInboxMessage a = InboxCommonMessage("s", "a");
  const NewInboxMessage a_again = InboxCommonMessage("s", "a");
  const NewInboxMessage old = InboxCommonMessage("s", "stored-before");
  const NewInboxMessage other_source = InboxCommonMessage("t", "a");
  const SqlRows inserted = {{std::string("id-ta"), std::string("t"), std::string("a")},
                            {std::string("id-sa"), std::string("s"), std::string("a")}};
  auto out = InboxInsertOutcomes({&a, &old, &a_again, &other_source}, inserted);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 4u);
  using Kind = InboxStoreOutcome::Kind;
  EXPECT_EQ((*out)[0].kind, Kind::kStored);
  EXPECT_EQ((*out)[0].id, "id-sa");
  EXPECT_EQ((*out)[1].kind, Kind::kDuplicate);
  EXPECT_EQ((*out)[2].kind, Kind::kDuplicate);
  EXPECT_EQ((*out)[2].id, "");
  EXPECT_EQ((*out)[3].kind, Kind::kStored);
  EXPECT_EQ((*out)[3].id, "id-ta");
}

TEST(InboxInsertOutcomesTest, ARowWithoutItsColumnsIsAnInternalError) {
  const NewInboxMessage a = InboxCommonMessage("s", "a");
  EXPECT_THAT(InboxInsertOutcomes({&a}, {{std::string("id"), std::nullopt, std::string("a")}}),
              StatusIs(StatusCode::kInternal, "The inbox insert returned no id."));
  EXPECT_THAT(InboxInsertOutcomes({&a}, {{std::string("id")}}), StatusIs(StatusCode::kInternal));
}

}  // namespace
}  // namespace queuebox::store
