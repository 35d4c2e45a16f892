// The fixture of the webhook source tests: the admin server of AdminStoreTest with the webhook
// sources of a loaded configuration on its data port.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <utility>

#include "admin_test_support.h"
#include "sources/http/http_source.h"

namespace queuebox::testing {

class WebhookSourcesTest : public AdminStoreTest {
 protected:
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::milliseconds(0));
    if (sources_) sources_->Stop();
    server_.reset();
    sources_.reset();
    AdminStoreTest::TearDown();
  }

  // Takes the inbox and sources of `loaded`, creates the sources on `store`'s inbox and starts
  // the server with them (and `metrics`, which may be null; not owned) on its data port.
  void StartSources(const Config& loaded, OutboxStore* store, sources::WebhookOptions options,
                    Metrics* metrics) {
    config_.inbox = loaded.inbox;
    config_.sources = loaded.sources;
    ASSERT_NE(store->inbox(), nullptr);
    auto created = sources::WebhookSources::Create(config_, store->inbox(), metrics, options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    sources_ = std::move(created).value();
    AdminServerDeps deps;
    deps.metrics = metrics;
    sources::WebhookSources* w = sources_.get();
    deps.extra_data_routes = [w](httplib::Server& s) { w->Register(s); };
    deps.is_inbox_route = [w](std::string_view path) { return w->Serves(path); };
    StartServer(std::move(deps));
  }

  std::unique_ptr<sources::WebhookSources> sources_;
};

}  // namespace queuebox::testing
