// docs/configuration.md is generated from the option tables; this test fails when the file in
// the repository differs from the generated text. QB_UPDATE_DOCS=1 rewrites the file instead.
#include "config/reference.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "destinations/registry.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

constexpr char kDocPath[] = QUEUEBOX_SOURCE_DIR "/docs/configuration.md";

TEST(ConfigReference, DocsMatchTheOptionTables) {
  const std::string generated = RenderConfigurationReference();
  const char* update = std::getenv("QB_UPDATE_DOCS");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(kDocPath, std::ios::binary) << generated;
  }
#if !defined(QB_WITH_KAFKA) || !defined(QB_WITH_RABBITMQ) || !defined(QB_WITH_NATS)
  GTEST_SKIP() << "docs/configuration.md describes the build with every destination type";
#endif
  std::ifstream in(kDocPath, std::ios::binary);
  std::stringstream current;
  current << in.rdbuf();
  EXPECT_TRUE(current.str() == generated)
      << kDocPath << " differs from the option tables. Regenerate it with:\n"
      << "  QB_UPDATE_DOCS=1 <build>/tests/unit_config --gtest_filter='ConfigReference.*'\n"
      << "and commit the result.";
}

TEST(ConfigReference, ListsEveryKeyAndType) {
  const std::string doc = RenderConfigurationReference();
  for (const char* key :
       {"`server.httpPort`", "`database.columnMapping.outbox.leaseExpiresAt`",
        "`outbox.notify.enabled`", "`retention.outbox.maxAge`", "`routes[].topicPattern`",
        "`destinations.<name>.headers`", "`logging.level`", "`admin.maxPayloadBytes`"}) {
    EXPECT_NE(doc.find(key), std::string::npos) << key;
  }
  for (const DestinationType& t : BuiltinDestinationTypes()) {
    EXPECT_NE(doc.find("#### `type: " + t.type + "`"), std::string::npos) << t.type;
  }
  EXPECT_NE(doc.find("##### `type: hmac`"), std::string::npos);
}

}  // namespace
}  // namespace queuebox
