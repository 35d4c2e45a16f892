// api_key_auth.cc: `type: api-key`, <headerName>: <key>.
#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

class ApiKeyAuth final : public RequestAuth {
 public:
  ApiKeyAuth(std::string key, std::string header)
      : key_(std::move(key)), header_(std::move(header)) {}
  Status Check(const HeaderLookup& header, std::string_view, int64_t) const override {
    std::string v = header(header_);
    if (v.empty()) return PermissionDenied("Missing " + header_ + " header");
    if (!ConstantTimeEquals(v, key_)) return PermissionDenied("Invalid API key");
    return Status::Ok();
  }
  std::vector<std::string> credential_headers() const override { return {header_}; }

 private:
  std::string key_, header_;
};

}  // namespace

const OptionTable<ApiKeyAuthSettings>& ApiKeyAuthOptions() {
  using S = ApiKeyAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("key", &S::key, "Expected API key").Required(),
      opt::Text("headerName", &S::header_name, "X-API-Key", "Header carrying the key"),
  };
  return *table;
}

AuthScheme ApiKeyAuthScheme() {
  return MakeAuthScheme<ApiKeyAuthSettings>(
      "api-key", ApiKeyAuthOptions(),
      [](ApiKeyAuthSettings s, const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
        if (s.key.empty()) return InvalidArgument(path + ".key is required");
        return std::unique_ptr<RequestAuth>(
            new ApiKeyAuth(std::move(s.key), std::move(s.header_name)));
      });
}

}  // namespace queuebox
