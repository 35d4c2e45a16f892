// Its own process: the engine module is looked for once per process, and here it is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine_module.h"
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/stages.h"
#include "queuebox/transform/transform_tester.h"

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;

constexpr const char* kMissing = "/nonexistent/queuebox/libqueuebox_jsonata.so";

bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

// A transform without its module fails with an error that names the path and dlerror()'s
// reason, on every attempt, and the process goes on (no crash, nothing of SpiderMonkey mapped).
TEST(JsonataMissingModule, ACompileFailsNamingThePathAndTheReason) {
  internal::SetModulePathForTest(kMissing);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto expr = Expression::Compile("$");
    ASSERT_FALSE(expr.ok());
    EXPECT_EQ(expr.error().kind, ErrorKind::kEngine);
    EXPECT_EQ(expr.error().message,
              std::string("The JSONata engine did not load: its module libqueuebox_jsonata.so "
                          "could not be loaded: ") +
                  kMissing +
                  ": cannot open shared object file: No such file or directory. It is installed "
                  "beside the queuebox binary or in ../lib/queuebox/ from the binary's folder.");
  }
  EXPECT_TRUE(EnginesLoaded());
  EXPECT_FALSE(Mapped("libmozjs"));
}

// The start-up check of a configuration with a transform reports it as its error.
TEST(JsonataMissingModule, AConfigurationWithATransformIsRefused) {
  internal::SetModulePathForTest(kMissing);
  Config config;
  TransformConfig transform;
  transform.expression = "{\"n\": n}";
  config.routes = {{"**", "sink", std::nullopt, "", transform}};
  DestinationConfig sink;
  sink.name = "sink";
  sink.type = "http";
  config.destinations["sink"] = sink;
  Status checked = CheckTransforms(config);
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(checked.message(), HasSubstr("routes[0].transform.expression: the JSONata engine "
                                           "could not load: The JSONata engine did not load: "));
  EXPECT_THAT(checked.message(), HasSubstr(std::string(kMissing) + ": cannot open shared object"));
  auto stages = DeliveryStages::Create(config, 1);
  EXPECT_FALSE(stages.ok());
}

// POST /admin/transform/test answers 503 (the server lacks its engine), not 400 "Invalid
// expression", and shows the caller no path of the installation.
TEST(JsonataMissingModule, TheTestEndpointAnswers503WithoutPaths) {
  internal::SetModulePathForTest(kMissing);
  TransformTester tester(TransformTester::Options{});
  TransformTestAnswer answer =
      tester.Handle(R"({"expression": "{\"n\": n}", "payload": {"n": 1}})");
  EXPECT_EQ(answer.status, 503);
  EXPECT_EQ(answer.body,
            R"({"success":false,"error":"The JSONata engine is unavailable on this server"})");
}

}  // namespace
}  // namespace queuebox::transform
