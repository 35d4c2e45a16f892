#include "store/common.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/open_store.h"
#include "store/postgres/pg_connection.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::HasSubstr;

TEST(StoreCommonTest, IdentifiersFollowTheSqlIdentifierRule) {
  EXPECT_TRUE(IsValidIdentifier("outbox"));
  EXPECT_TRUE(IsValidIdentifier("_Events2"));
  EXPECT_FALSE(IsValidIdentifier(""));
  EXPECT_FALSE(IsValidIdentifier("2events"));
  EXPECT_FALSE(IsValidIdentifier("out box"));
  EXPECT_FALSE(IsValidIdentifier("outbox\"--"));
}

TEST(StoreCommonTest, RenderSqlQuotesTheMappedNamesAndKeepsOtherBraces) {
  OutboxColumns cols;
  cols.state = "status";
  EXPECT_EQ(
      RenderSql("UPDATE {T} SET {state} = 'x', {headers} = '{}' WHERE {nope}", "Events", cols),
      "UPDATE \"Events\" SET \"status\" = 'x', \"headers\" = '{}' WHERE {nope}");
}

TEST(StoreCommonTest, IsDefaultIsFalseOnceAnyColumnIsRenamed) {
  OutboxColumns cols;
  EXPECT_TRUE(cols.IsDefault());
  cols.sequence = "seq";
  EXPECT_FALSE(cols.IsDefault());
}

TEST(StoreCommonTest, RetentionAcceptsOnlyFinishedStates) {
  EXPECT_TRUE(RequireFinishedState("sent").ok());
  EXPECT_TRUE(RequireFinishedState("dead").ok());
  EXPECT_THAT(RequireFinishedState("pending").message(), HasSubstr("Cannot delete active work"));
}

TEST(StoreCommonTest, TheSchemaGuardNamesTheMissingTableOrColumn) {
  DatabaseConfig config;
  config.outbox_table = "events";
  config.columns.sequence = "seq";
  config.inbox_table = "received";
  EXPECT_TRUE(RequireColumn(OutboxSequenceColumn(config, "ALTER"), {"id", "SEQ"}).ok());
  EXPECT_THAT(RequireColumn(OutboxSequenceColumn(config, "ALTER"), {}),
              StatusIs(StatusCode::kFailedPrecondition,
                       "The outbox table 'events' does not exist. Run `queuebox migrate` or "
                       "create it (docs/schema.md), then start QueueBox again."));
  EXPECT_THAT(RequireColumn(OutboxSequenceColumn(config, "ALTER ..."), {"id"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       "The outbox table 'events' has no column 'seq'. QueueBox orders the rows "
                       "of one key by it. Add the column, then start QueueBox again: ALTER ..."));
  EXPECT_THAT(RequireColumn(InboxHeadersColumn(config, "ALTER"), {}),
              StatusIs(StatusCode::kNotFound, HasSubstr("The inbox table 'received' does not")));
  EXPECT_THAT(RequireColumn(InboxHeadersColumn(config, "ALTER ..."), {"id"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       "The inbox table 'received' has no column 'headers'. QueueBox stores the "
                       "message headers there. Add the column, then start QueueBox again: "
                       "ALTER ..."));
}

TEST(StoreCommonTest, InstantsNeedAZone) {
  EXPECT_TRUE(ValidateInstant("2024-01-31T10:00:00Z", "x").ok());
  EXPECT_TRUE(ValidateInstant("2024-01-31T10:00:00.123456+02:00", "x").ok());
  EXPECT_TRUE(ValidateInstant("2024-01-31T10:00Z", "x").ok());
  EXPECT_THAT(ValidateInstant("2024-01-31T10:00:00", "x"),
              StatusIs(StatusCode::kInvalidArgument,
                       "x must be an ISO-8601 instant such as 2024-01-31T10:00:00Z, "
                       "got '2024-01-31T10:00:00'."));
  EXPECT_THAT(ValidateInstant("2024-01-31", "x"),
              StatusIs(StatusCode::kInvalidArgument,
                       "x must be an ISO-8601 instant such as 2024-01-31T10:00:00Z, "
                       "got '2024-01-31'."));
  EXPECT_THAT(ValidateInstant("now", "x"),
              StatusIs(StatusCode::kInvalidArgument,
                       "x must be an ISO-8601 instant such as 2024-01-31T10:00:00Z, "
                       "got 'now'."));
}

TEST(PgUrlTest, JdbcUrlsBecomeLibpqUris) {
  EXPECT_EQ(*ToLibpqUrl("jdbc:postgresql://db:5432/app?user=qb&password=pw&ssl=true"),
            "postgresql://db:5432/app?user=qb&password=pw&sslmode=require");
  EXPECT_EQ(*ToLibpqUrl("jdbc:postgresql://db/app?currentSchema=relay&ApplicationName=x"),
            "postgresql://db/app?options=-c%20search_path%3Drelay&application_name=x");
  EXPECT_EQ(*ToLibpqUrl("jdbc:postgresql:app"), "postgresql:///app");
  EXPECT_EQ(*ToLibpqUrl("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(*ToLibpqUrl("host=h dbname=db"), "host=h dbname=db");
}

TEST(PgUrlTest, UnknownJdbcParametersAndOtherSchemesAreRejectedWithoutEchoingTheUrl) {
  auto bad = ToLibpqUrl("jdbc:postgresql://h/db?password=pw&prepareThreshold=0");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("prepareThreshold"));
  EXPECT_THAT(bad.status().message(), ::testing::Not(HasSubstr("pw")));
  auto mysql = ToLibpqUrl("mysql://u:secret@h/db");
  EXPECT_EQ(mysql.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mysql.status().message(), ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(ToLibpqUrl(""),
              StatusIs(StatusCode::kInvalidArgument,
                       "database.url is empty: give a postgresql:// or jdbc:postgresql:// URL."));
}

TEST(SqliteUrlTest, PrefixesAreStripped) {
  EXPECT_EQ(*SqliteOutboxStore::PathFromUrl("/var/lib/qb/outbox.db"), "/var/lib/qb/outbox.db");
  EXPECT_EQ(*SqliteOutboxStore::PathFromUrl("sqlite:outbox.db"), "outbox.db");
  EXPECT_EQ(*SqliteOutboxStore::PathFromUrl("sqlite:///tmp/o.db"), "/tmp/o.db");
  EXPECT_EQ(*SqliteOutboxStore::PathFromUrl("jdbc:sqlite:/tmp/o.db"), "/tmp/o.db");
  EXPECT_EQ(*SqliteOutboxStore::PathFromUrl("file:/tmp/o.db?mode=rwc"), "file:/tmp/o.db?mode=rwc");
  EXPECT_EQ(SqliteOutboxStore::PathFromUrl("sqlite:").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(DatabaseKindTest, TheUrlNamesTheKind) {
  EXPECT_EQ(*DatabaseKindOfUrl("postgresql://h/db"), "postgresql");
  EXPECT_EQ(*DatabaseKindOfUrl("postgres://u:p@h:5432/db"), "postgresql");
  EXPECT_EQ(*DatabaseKindOfUrl("jdbc:postgresql://h:5432/db?user=u"), "postgresql");
  EXPECT_EQ(*DatabaseKindOfUrl("jdbc:sqlserver://h:1433;databaseName=q"), "sqlserver");
  EXPECT_EQ(*DatabaseKindOfUrl("/var/lib/queuebox/outbox.db"), "sqlite");
  EXPECT_EQ(*DatabaseKindOfUrl("outbox.db"), "sqlite");
  EXPECT_EQ(*DatabaseKindOfUrl(":memory:"), "sqlite");
  EXPECT_EQ(*DatabaseKindOfUrl("sqlite:outbox.db"), "sqlite");
  EXPECT_EQ(*DatabaseKindOfUrl("jdbc:sqlite:/tmp/o.db"), "sqlite");
  EXPECT_EQ(*DatabaseKindOfUrl("file:/tmp/o.db?mode=rwc"), "sqlite");
  EXPECT_THAT(DatabaseKindOfUrl("mysql://u:secret@h/db"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("the scheme 'mysql'")));
  EXPECT_THAT(DatabaseKindOfUrl("mysql://u:secret@h/db").status().message(),
              ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(DatabaseKindOfUrl("jdbc:mariadb://h/db"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("the scheme 'jdbc:mariadb'")));
  EXPECT_THAT(DatabaseKindOfUrl("http://h/db"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(DatabaseKindOfUrl(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
}

TEST(OpenStoreTest, WithoutATypeTheUrlDecides) {
  DatabaseConfig config;
  config.url = "jdbc:sqlserver://h:1433";
  EXPECT_THAT(OpenStore(config), StatusIs(StatusCode::kInvalidArgument,
                                          HasSubstr("SQL Server is not supported by this build")));
  config.url = "mysql://h/db";
  EXPECT_THAT(OpenStore(config), StatusIs(StatusCode::kInvalidArgument,
                                          HasSubstr("database.url uses the scheme 'mysql'")));
}

TEST(OpenStoreTest, AnUnknownTypeIsRejected) {
  DatabaseConfig config;
  config.type = "mysql";
  EXPECT_THAT(OpenStore(config).status().message(), HasSubstr("postgresql, sqlite"));
}

}  // namespace
}  // namespace queuebox::store
