// Its own process: the engine is not loaded until the first transform compiles.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/source_stage.h"
#include "queuebox/transform/stages.h"

namespace queuebox::transform {
namespace {

// True when a file whose path contains `name` is mapped into this process.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

// A relay without transforms keeps its footprint: building the stages of a configuration that
// has none (what `queuebox run` does) loads no engine. Runs first in this process.
TEST(JsonataLazyLoad, AConfigurationWithoutTransformsLoadsNoEngine) {
  Config config;
  config.routes = {{"**", "sink", {}, ""}};
  DestinationConfig sink;
  sink.name = "sink";
  sink.type = "http";
  config.destinations["sink"] = sink;
  auto stages = DeliveryStages::Create(config, 2);
  ASSERT_TRUE(stages.ok());
  EXPECT_EQ(*stages, nullptr);
  EXPECT_TRUE(CheckTransforms(config).ok());
  auto sources = SourceStages::Create({{"stripe", {}, {}, {}, {}}}, 1);
  ASSERT_TRUE(sources.ok());
  EXPECT_EQ(*sources, nullptr);
  EXPECT_FALSE(EnginesLoaded());
  // SpiderMonkey is in the engine module, loaded with the first transform: not even mapped yet.
  EXPECT_FALSE(Mapped("libmozjs"));
  EXPECT_FALSE(Mapped("libqueuebox_jsonata.so"));
}

TEST(JsonataLazyLoad, NothingLoadsUntilTheFirstCompile) {
  EXPECT_FALSE(EnginesLoaded());
  // What needs no engine does not load one.
  Bindings bindings;
  bindings.SetString("topic", "t");
  EXPECT_EQ(KeyValueFromJson("42"), std::optional<std::string>("42"));
  EngineOptions options;
  options.max_result_bytes = 1024;
  options.max_heap_bytes = std::size_t{32} << 20;
  options.max_evaluation_bytes = std::size_t{1} << 30;  // so that the heap cap is what stops
  EXPECT_TRUE(ConfigureEngines(options).ok());
  EXPECT_FALSE(EnginesLoaded());

  auto expr = Expression::Compile("$topic");
  ASSERT_TRUE(expr.ok()) << expr.error().ToString();
  EXPECT_TRUE(EnginesLoaded());
  EXPECT_TRUE(Mapped("libqueuebox_jsonata.so"));
  EXPECT_TRUE(Mapped("libmozjs"));
  Status late = ConfigureEngines(options);
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);

  // The options set before the load hold. A generous timeout: beside other tests on two cores
  // the default 100 ms can run out before the result cap is reached (it did once in a full
  // ctest run), and the cap is what this checks.
  Limits patient;
  patient.timeout = std::chrono::seconds(10);
  auto big = Expression::Compile("$pad('', 2000, 'x')", patient);
  ASSERT_TRUE(big.ok());
  auto out = big.value().Evaluate("");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kMemory);
  EXPECT_THAT(out.error().message, ::testing::HasSubstr("over the limit of 1024 bytes"));

  // Objects past the 32 MiB heap cap: SpiderMonkey's out-of-memory, then the engine goes on.
  Limits long_timeout;
  long_timeout.timeout = std::chrono::milliseconds(120000);
  auto objects = Expression::Compile("$count([1..2000000].{'v': $, 'w': [$, $]})", long_timeout);
  ASSERT_TRUE(objects.ok());
  auto oom = objects.value().Evaluate("");
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.error().kind, ErrorKind::kMemory) << oom.error().ToString();
  EXPECT_THAT(oom.error().message, ::testing::HasSubstr("heap (32 MiB)"));
  auto after = Expression::Compile("$sum([1, 2])", patient).value().Evaluate("");
  ASSERT_TRUE(after.ok()) << after.error().ToString();
  EXPECT_EQ(*after.value(), "3");
}

TEST(JsonataLazyLoad, ZeroOptionsAreRefused) {
  EngineOptions options;
  options.cache_capacity = 0;
  EXPECT_EQ(ConfigureEngines(options).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace queuebox::transform
