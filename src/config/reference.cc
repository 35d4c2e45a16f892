// reference.cc: the configuration reference, rendered from the option tables.
#include "config/reference.h"

#include "config/schema.h"
#include "config/validate.h"
#include "destinations/registry.h"
#include "sources/registry.h"

namespace queuebox {
namespace {

using cfg::Section;
using cfg::Variant;

constexpr char kIntro[] = R"(# Configuration reference

<!-- Generated from the option tables by RenderConfigurationReference() (src/config/reference.cc).
     Do not edit by hand: change the tables, then regenerate with
     QB_UPDATE_DOCS=1 <build>/tests/unit_config --gtest_filter='ConfigReference.*' -->

QueueBox C++ reads one YAML file and the `QUEUEBOX_*` environment variables, fills the defaults
below and checks every key before it starts. `queuebox check-config` prints the effective
configuration with every secret shown as `***`. Each key below is one row of an option table,
which also holds its default and the struct member it fills: [adding-an-option.md](adding-an-option.md)
says where each table lives and how to add a key or a block.

## Sources

As QueueBox, key by key the first source that sets a key wins:

1. the `QUEUEBOX_*` environment variables;
2. one YAML file: the file given with `--config <file>` (before or after the subcommand; it must
   exist), else the file `QUEUEBOX_CONFIG_FILE` names, else `/etc/queuebox/queuebox.yml`. A file
   that `QUEUEBOX_CONFIG_FILE` names, or the default file, may be absent: the variables are then
   the whole configuration (QueueBox's `.env.example` keeps
   `QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml` in env-only deployments). An empty file
   counts as absent.

Either source may be used alone: QueueBox's minimum, `QUEUEBOX_DATABASE_URL`,
`QUEUEBOX_DATABASE_USERNAME` and `QUEUEBOX_DATABASE_PASSWORD`, is a whole configuration. With
no variable and no file the start fails with a message that names both sources. QueueBox's third
source, a file packaged in its image, has no counterpart: the Debian package installs
`/etc/queuebox/queuebox.yml` instead, and the container image ships none. `queuebox check-config`
prints on its first line where the configuration came from. `QUEUEBOX_CPP_DEFAULT_CONFIG_FILE`
(this build's, not QueueBox's; not a key) moves the default file, for tests and installs under
another prefix. `QUEUEBOX_CPP_LOG_STREAM=stdout` (this build's; not a key) sends the log lines of
`run` and `migrate` to stdout instead of stderr; the container image sets it, as QueueBox's image
logs on stdout.

## Environment variables

A variable names a key path: drop `QUEUEBOX_`, then every `_` starts a new level and `__` is a
literal `_`. Levels match the keys below case-insensitively, ignoring `-` and `_`.

| Variable | Key |
|---|---|
| `QUEUEBOX_OUTBOX_POLLINTERVALMS=200` | `outbox.pollIntervalMs` |
| `QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_AGGREGATETYPE=kind` | `database.columnMapping.outbox.aggregateType` |
| `QUEUEBOX_ROUTES_0_TOPICPATTERN=order.*` | `routes[0].topicPattern` (a number is a list index) |
| `QUEUEBOX_DESTINATIONS_ORDERS_BASEURL=http://127.0.0.1:9000` | `destinations.orders.baseUrl` |
| `QUEUEBOX_DESTINATIONS_ORDER__API_TYPE=http` | `destinations.order_api.type` |

- Map keys (destination names, header names) are the existing YAML key they match, else the
  level in lower case.
- Values merge key by key into blocks; a list set by variables replaces the whole YAML list, and
  its items are numbered from 0 without gaps.
- A `QUEUEBOX_*` variable that names no key stops the start. `QUEUEBOX_CONFIG_FILE`,
  `QUEUEBOX_CPP_DEFAULT_CONFIG_FILE`, `QUEUEBOX_CPP_LOG_STREAM` and the Kubernetes service-link variables
  (`*_SERVICE_HOST`, `*_SERVICE_PORT*`, `*_PORT`, `*_PORT_<n>_<TCP|UDP|SCTP>*`) that name no key
  are ignored.

## Placeholders

Any text value may hold `${NAME}` (the environment variable NAME; unset is an error) or
`${NAME:-fallback}` (the fallback when NAME is unset or empty), e.g.
`url: postgresql://queuebox@${DB_HOST:-127.0.0.1}/app`.

## Secrets

A key of type `secret` takes the value itself or `file:<path>`: the file is read once at start
and one or more trailing newlines are removed. A file that cannot be read stops the start; the
message names the key and the file, never a content. Secrets, passwords in URLs
(`scheme://user:pass@host`, `?password=`), and static headers named `authorization`,
`proxy-authorization`, `cookie`, `set-cookie` or containing `api-key`, `apikey`, `token`,
`secret` or `password` are printed as `***`.

## Values and checks

- `int` and `ms` are whole numbers (`ms`: milliseconds) within the range shown.
- `duration` is `<whole number><s|m|h|d>`: `30s`, `15m`, `24h`, `7d`.
- `enum` values are exact case.
- `map` is a block of names to text values; `list` is a YAML list or a comma-separated text.
- An unknown key stops the start with a did-you-mean; a key of another destination type names the
  type that takes it. Every problem is reported at once:

```
The configuration has 3 errors. Fix each one and start QueueBox again.
  - outbox.batchSzie: unknown key; did you mean batchSize?
  - destinations.orders.fsync: unknown key for type http; type file takes it
  - destinations.billing: missing type; set one of file, http
```
)";

std::string TypeName(const OptionSpec& o) {
  switch (o.type) {
    case OptionType::kString:
      return "string";
    case OptionType::kInt:
      return "int";
    case OptionType::kMillis:
      return "ms";
    case OptionType::kBool:
      return "bool";
    case OptionType::kEnum:
      return "enum";
    case OptionType::kSecret:
      return "secret";
    case OptionType::kDuration:
      return "duration";
    case OptionType::kStringMap:
      return "map";
    case OptionType::kStringList:
      return "list";
    case OptionType::kAny:
      return "value";
    case OptionType::kBlock:
      return "block";
  }
  return "value";
}

std::string Code(const std::string& s) { return s.empty() ? "`\"\"`" : "`" + s + "`"; }

std::string DefaultText(const OptionSpec& o) {
  if (o.required) return "required";
  if (o.default_value.is_null()) return "none";
  if (o.default_value.is_string()) return Code(o.default_value.get<std::string>());
  return Code(o.default_value.dump());
}

std::string AllowedText(const OptionSpec& o) {
  if (o.identifier) return "SQL identifier `^[a-zA-Z_][a-zA-Z0-9_]*$`";
  if (o.type == OptionType::kBlock && !o.block->variants.empty()) {
    return "`type`: " + cfg::KnownTypes(o.block->variants);
  }
  if (o.type == OptionType::kEnum) {
    std::string out;
    for (const std::string& v : o.enum_values) out += (out.empty() ? "" : ", ") + Code(v);
    return out;
  }
  // The whole range of the member's type is no range.
  bool has_min = o.min != INT64_MIN && o.min != INT32_MIN;
  bool has_max = o.max != INT64_MAX && o.max != INT32_MAX;
  if (has_min && has_max) return std::to_string(o.min) + "..." + std::to_string(o.max);
  if (has_min) return ">= " + std::to_string(o.min);
  if (has_max) return "<= " + std::to_string(o.max);
  return "";
}

// A table cell: `|` would end the cell.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string Table(const std::string& prefix, const std::vector<OptionSpec>& options) {
  std::string out = "| Key | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n";
  for (const OptionSpec& o : options) {
    out += "| `" + prefix + o.key + "` | " + TypeName(o) + " | " + Cell(DefaultText(o)) + " | " +
           Cell(AllowedText(o)) + " | " + Cell(o.description) + " |\n";
  }
  return out;
}

std::string Blocks(const std::string& heading, const std::string& prefix,
                   const std::vector<OptionSpec>& options);

// One sub-section per type: "<heading> `type: <name>`" and its keys.
std::string Variants(const std::string& heading, const std::string& prefix,
                     const std::vector<Variant>& variants) {
  std::string out;
  for (const Variant& v : variants) {
    out += "\n" + heading + " `type: " + v.type + "`\n\n" + Table("", v.options) +
           Blocks(heading + "#", prefix, v.options);
  }
  return out;
}

// The sub-sections of the block-valued keys among `options` (full keys `prefix` + key).
std::string Blocks(const std::string& heading, const std::string& prefix,
                   const std::vector<OptionSpec>& options) {
  std::string out;
  for (const OptionSpec& o : options) {
    if (o.type != OptionType::kBlock) continue;
    const BlockSchema& block = *o.block;
    const std::string name = prefix + o.key;
    out += "\n" + heading + " " + name + "\n\n";
    if (block.variants.empty()) {
      out += "Optional; when given, it takes:\n\n" + Table(name + ".", block.options) +
             Blocks(heading + "#", name + ".", block.options);
      continue;
    }
    out += "`type` is required: one of " + cfg::KnownTypes(block.variants) + ".";
    if (!block.options.empty()) {
      out += " Every type also takes:\n\n" + Table(name + ".", block.options);
    } else {
      out += "\n";
    }
    out += Variants(heading + "#", name + ".", block.variants);
  }
  return out;
}

}  // namespace

std::string RenderConfigurationReference() {
  std::string out = kIntro;
  out += "\n## Keys\n";
  for (const Section& s : cfg::RootSections()) {
    const std::vector<OptionSpec>& keys = s.options.specs();
    out += "\n### " + s.name + "\n\n" + s.summary + "\n\n" + Table(s.name + ".", keys);
    if (s.name == "database") {
      out +=
          "\nWithout `database.type` the URL decides the kind: `postgresql://`, `postgres://` "
          "(libpq URIs) and `jdbc:postgresql://` are PostgreSQL; a file path, `sqlite:<path>` or "
          "`file:<path>` is the embedded SQLite. `jdbc:sqlserver://` is refused (\"SQL Server is "
          "not supported by this build\"), and so is any other scheme (`mysql://...`): never "
          "read as a file name. A `database.type` that contradicts the URL stops the start "
          "naming both. No URL at all keeps the embedded SQLite default and asks for its file "
          "path.\n";
    }
    if (s.name == "admin") {
      out +=
          "\nWith `admin.enabled: true`, either `admin.auth` or `admin.insecure: true` is "
          "required; otherwise the start fails with: \"" +
          std::string(cfg::kAdminGuardMessage) + "\"\n";
    }
    if (s.name == "retention") {
      out +=
          "\n`policy: AGE` requires `maxAge`; `policy: COUNT` requires `maxCount`. Only `sent` "
          "and `dead` rows are deleted.\n";
    }
    out += Blocks("####", s.name + ".", keys);
  }
  out +=
      "\n### routes\n\nAn ordered list; the first route whose `topicPattern` matches the "
      "whole topic wins. A row no route matches goes `dead`.\n\n" +
      Table("routes[].", cfg::RouteOptions().specs()) +
      Blocks("####", "routes[].", cfg::RouteOptions().specs());
  out += "\n### destinations\n\nA map of names to blocks. `type` is required: one of " +
         KnownDestinationTypes() + ". Every type also takes:\n\n" +
         Table("destinations.<name>.", cfg::DestinationCommonOptions().specs()) +
         Blocks("####", "destinations.<name>.", cfg::DestinationCommonOptions().specs());
  out += Variants("####", "destinations.<name>.", cfg::DestinationVariants());
  out +=
      "\n### sources\n\nA map of names to blocks; the name is stored in the inbox `source` "
      "column. `type` selects the kind and defaults to http (known: " +
      sources::KnownSourceTypes() +
      "). Each http source answers `POST <inbox.basePath><path>`; a broker source (rabbitmq, "
      "kafka, nats) consumes into the inbox and acknowledges after the row commits. Every JSONPath "
      "must be definite "
      "(`$.a.b`, `$['a']`, `$.a[0]`); a list of paths is tried in order, after the "
      "`*Expression` keys (JSONata on the original body); `transform` rewrites the stored "
      "payload after the keys were read.\n";
  out += Variants("####", "sources.<name>.", cfg::SourceVariants());
  return out;
}

}  // namespace queuebox
