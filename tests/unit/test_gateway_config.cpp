// The gateway's configuration: the --config YAML file, --api-key flags, validate() and key
// lookup. Every refusal is checked by its whole message (file, line, field, problem).
#include <rex/backends/daytona/daytona_config.hpp>
#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/backends/fargate/fargate_config.hpp>
#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/backends/modal/modal_config.hpp>
#include <rex/gateway/gateway_config.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "support/test_helpers.hpp"

namespace rex::gateway {
namespace {

GatewayConfig parse(std::string_view text) {
  return parse_gateway_config(text, "gw.yaml");
}

std::string error_of(std::string_view text) {
  try {
    parse(text);
  } catch (const GatewayConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string validate_error(const GatewayConfig& config) {
  try {
    validate(config);
  } catch (const GatewayConfigError& e) {
    return e.what();
  }
  return "no error";
}

TenantConfig tenant(std::string name, std::vector<std::string> keys = {}) {
  TenantConfig t;
  t.name = std::move(name);
  t.keys = std::move(keys);
  return t;
}

std::string add_key_error(GatewayConfig& config, std::string_view flag) {
  try {
    add_api_key(config, flag);
  } catch (const GatewayConfigError& e) {
    return e.what();
  }
  return "no error";
}

constexpr std::string_view kKnown =
    "known: listen, storage, registry, python_image, tenants, max_sessions, creates_per_minute, "
    "max_storage_bytes, idle_timeout, max_lifetime, orphan_grace, sweep_interval, drift_interval, "
    "docker_engine, podman_engine, e2b, kubernetes, fargate, daytona, modal";

TEST(GatewayConfig, AnEmptyFileIsTheDefaults) {
  for (std::string_view text : {"", "# nothing yet\n", "---\n", "~\n"}) {
    const GatewayConfig config = parse(text);
    EXPECT_EQ(config.listen, "127.0.0.1:8000");
    EXPECT_EQ(config.storage, "./storage");
    EXPECT_EQ(config.registry, "");
    EXPECT_EQ(config.python_image, "rex-python:3.11");
    EXPECT_TRUE(config.tenants.empty());
    EXPECT_EQ(config.max_sessions, 0u);
    EXPECT_EQ(config.creates_per_minute, 0);
    EXPECT_EQ(config.max_storage_bytes, 0u);
    EXPECT_EQ(config.idle_timeout, 600);
    EXPECT_EQ(config.max_lifetime, 86400);
    EXPECT_EQ(config.orphan_grace, 60);
    EXPECT_EQ(config.sweep_interval, 0.25);
    EXPECT_EQ(config.drift_interval, 10);
    EXPECT_NO_THROW(validate(config));
  }
}

TEST(GatewayConfig, EveryFieldAndTenantsWithTheirQuotas) {
  const GatewayConfig config = parse(R"(
listen: "0.0.0.0:9000"
storage: /var/lib/rex
registry: /etc/rex/registry
python_image: my-python:3.12
max_sessions: 20
creates_per_minute: 30
max_storage_bytes: 10g
idle_timeout: 120
max_lifetime: 7200.5
orphan_grace: 0
sweep_interval: 0.5
drift_interval: 30
docker_engine: unix:///run/docker.sock
podman_engine: tcp://podman:8080
tenants:
  - name: team-a
    keys: [key-a1, key-a2]
    max_sessions: 5
    creates_per_minute: 2.5
    max_storage_bytes: 1073741824
  - name: ci
    keys:
      - 12345
    max_sessions: ~
  - name: observers
)");
  EXPECT_EQ(config.listen, "0.0.0.0:9000");
  EXPECT_EQ(config.storage, "/var/lib/rex");
  EXPECT_EQ(config.registry, "/etc/rex/registry");
  EXPECT_EQ(config.python_image, "my-python:3.12");
  EXPECT_EQ(config.max_sessions, 20u);
  EXPECT_EQ(config.creates_per_minute, 30);
  EXPECT_EQ(config.max_storage_bytes, 10ull << 30);
  EXPECT_EQ(config.idle_timeout, 120);
  EXPECT_EQ(config.max_lifetime, 7200.5);
  EXPECT_EQ(config.orphan_grace, 0);
  EXPECT_EQ(config.sweep_interval, 0.5);
  EXPECT_EQ(config.drift_interval, 30);
  EXPECT_EQ(config.docker_engine, "unix:///run/docker.sock");
  EXPECT_EQ(config.podman_engine, "tcp://podman:8080");
  ASSERT_EQ(config.tenants.size(), 3u);
  const TenantConfig& a = config.tenants[0];
  EXPECT_EQ(a.name, "team-a");
  EXPECT_EQ(a.keys, (std::vector<std::string>{"key-a1", "key-a2"}));
  EXPECT_EQ(a.max_sessions, 5u);
  EXPECT_EQ(a.creates_per_minute, 2.5);
  EXPECT_EQ(a.max_storage_bytes, 1073741824u);
  const TenantConfig& ci = config.tenants[1];
  EXPECT_EQ(ci.keys, (std::vector<std::string>{"12345"}));  // a scalar's text is the key
  EXPECT_FALSE(ci.max_sessions);                            // null: the default
  EXPECT_FALSE(ci.creates_per_minute);
  EXPECT_FALSE(ci.max_storage_bytes);
  EXPECT_TRUE(config.tenants[2].keys.empty());  // keys may come from --api-key
  EXPECT_NO_THROW(validate(config));
}

TEST(GatewayConfig, ListenForms) {
  for (std::string_view listen : {"127.0.0.1:8000", "0.0.0.0:0", "localhost:65535", "[::1]:8000",
                                  "[::]:80", "unix:/run/rex/gateway.sock", "unix:relative.sock"}) {
    GatewayConfig config;
    config.listen = listen;
    EXPECT_EQ(validate_error(config), "no error") << listen;
  }
  const auto refusal = [](std::string_view listen) {
    GatewayConfig config;
    config.listen = listen;
    return validate_error(config);
  };
  EXPECT_EQ(refusal("8000"),
            R"(gateway config: listen: expected HOST:PORT, [IPV6]:PORT or unix:PATH, got "8000")");
  EXPECT_EQ(refusal(":8000"),
            R"(gateway config: listen: expected HOST:PORT, [IPV6]:PORT or unix:PATH, got ":8000")");
  EXPECT_EQ(refusal("host:65536"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"host:65536\"");
  EXPECT_EQ(refusal("host:80x"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"host:80x\"");
  EXPECT_EQ(refusal("host:"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"host:\"");
  EXPECT_EQ(refusal("unix:"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"unix:\"");
  EXPECT_EQ(refusal("[::1:80"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"[::1:80\"");
  EXPECT_EQ(refusal("my host:80"),
            "gateway config: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"my host:80\"");
  EXPECT_EQ(
      refusal("::1:8000"),
      R"(gateway config: listen: an IPv6 address goes in brackets ([::1]:8000), got "::1:8000")");
  EXPECT_EQ(refusal("unix:/" + std::string(107, 'x')),
            "gateway config: listen: a socket path has at most 107 bytes, got \"/" +
                std::string(56, 'x') + "...\"");
}

TEST(GatewayConfig, WrongTypesNameTheLineAndTheField) {
  EXPECT_EQ(error_of("listen: 127.0.0.1:8000\nidle_timeout: soon\n"),
            R"(gw.yaml:2: idle_timeout: expected a number of seconds, got "soon")");
  // A quoted number is a string, as YAML says.
  EXPECT_EQ(error_of("max_lifetime: \"300\"\n"),
            R"(gw.yaml:1: max_lifetime: expected a number of seconds, got "300")");
  EXPECT_EQ(error_of("idle_timeout: [1]\n"),
            "gw.yaml:1: idle_timeout: expected a number of seconds, got a list");
  // A null value is marked on the next token by yaml-cpp; the key's line is the one named.
  EXPECT_EQ(error_of("idle_timeout:\nstorage: x\n"),
            "gw.yaml:1: idle_timeout: expected a number of seconds, got null");
  EXPECT_EQ(error_of("storage: {a: 1}\n"), "gw.yaml:1: storage: expected a string, got a mapping");
  EXPECT_EQ(error_of("storage: \"\"\n"), "gw.yaml:1: storage: must not be empty");
  EXPECT_EQ(error_of("python_image:\n"), "gw.yaml:1: python_image: expected a string, got null");
  EXPECT_EQ(error_of("max_sessions: 2.5\n"),
            R"(gw.yaml:1: max_sessions: expected a whole number of sessions, got "2.5")");
  EXPECT_EQ(error_of("max_sessions: -1\n"),
            "gw.yaml:1: max_sessions: must not be negative, got -1");
  EXPECT_EQ(error_of("max_sessions: 99999999999999999999999\n"),
            "gw.yaml:1: max_sessions: too large, got 99999999999999999999999");
  EXPECT_EQ(error_of("max_storage_bytes: lots\n"),
            "gw.yaml:1: max_storage_bytes: expected a number of bytes or a size such as 512m or "
            "10g, got \"lots\"");
  EXPECT_EQ(
      error_of("creates_per_minute: many\n"),
      R"(gw.yaml:1: creates_per_minute: expected a number of creates per minute, got "many")");
  EXPECT_EQ(error_of("tenants: {name: a}\n"),
            "gw.yaml:1: tenants: expected a list of tenants, got a mapping");
  EXPECT_EQ(error_of("listen: nowhere\n"),
            "gw.yaml:1: listen: expected HOST:PORT, [IPV6]:PORT or "
            "unix:PATH, got \"nowhere\"");
}

TEST(GatewayConfig, RangesAreChecked) {
  EXPECT_EQ(error_of("idle_timeout: -5\n"),
            "gw.yaml:1: idle_timeout: must not be negative, got -5");
  EXPECT_EQ(error_of("orphan_grace: .inf\n"), "gw.yaml:1: orphan_grace: must be finite, got .inf");
  EXPECT_EQ(error_of("orphan_grace: .NaN\n"), "gw.yaml:1: orphan_grace: must be finite, got .NaN");
  EXPECT_EQ(error_of("orphan_grace: 1e999\n"),
            "gw.yaml:1: orphan_grace: must be finite, got 1e999");
  EXPECT_EQ(error_of("sweep_interval: 0\n"),
            "gw.yaml:1: sweep_interval: must be more than 0, got 0");
  EXPECT_EQ(error_of("drift_interval: 0.0\n"),
            "gw.yaml:1: drift_interval: must be more than 0, got 0.0");
  EXPECT_EQ(error_of("max_lifetime: 0\n"), "gw.yaml:1: max_lifetime: must be more than 0, got 0");
  EXPECT_EQ(parse("idle_timeout: 0\n").idle_timeout, 0);  // never idle out
  EXPECT_EQ(parse("idle_timeout: +1e3\n").idle_timeout, 1000);
  EXPECT_EQ(parse("orphan_grace: 1e-999\n").orphan_grace, 0);
}

TEST(GatewayConfig, UnknownAndRepeatedKeysAreRefused) {
  EXPECT_EQ(error_of("listen: 127.0.0.1:1\nidle_timout: 5\n"),
            "gw.yaml:2: idle_timout: unknown field (" + std::string(kKnown) + ")");
  EXPECT_EQ(error_of("storage: a\nstorage: b\n"), "gw.yaml:2: storage: given twice");
  EXPECT_EQ(error_of("[a]: 1\n"), "gw.yaml:1: expected a name as the key, got a list");
}

// A provider section's settings, as the backend table's codec read them.
template <class T>
T section(const GatewayConfig& config) {
  const auto it = config.providers.find(T::backend);
  if (it == config.providers.end())
    throw std::runtime_error("no section " + std::string(T::backend));
  return it->second.template get<T>();
}

TEST(GatewayConfig, TheE2BSection) {
  EXPECT_FALSE(parse("listen: 127.0.0.1:1\n").providers.contains("e2b"));
  const auto c = section<E2BDeploymentConfig>(
      parse("e2b:\n  api_key: k\n  api_url: http://api\n  sandbox_url: http://sb\n  domain: d\n"));
  EXPECT_EQ(c.api_key, "k");
  EXPECT_EQ(c.api_url, "http://api");
  EXPECT_EQ(c.sandbox_url, "http://sb");
  EXPECT_EQ(c.domain, "d");
  EXPECT_TRUE(parse("e2b: {}\n").providers.contains("e2b"));  // every field from E2B's variables
  EXPECT_FALSE(parse("e2b:\n").providers.contains("e2b"));    // null: no section
  EXPECT_EQ(section<E2BDeploymentConfig>(parse("e2b:\n  template_server_path: /opt/rex-server\n"))
                .template_server_path,
            "/opt/rex-server");
  EXPECT_EQ(error_of("e2b:\n  template_server_path: rex-server\n"),
            "gw.yaml:2: e2b.template_server_path: must be an absolute path in the sandbox");
  EXPECT_EQ(error_of("e2b:\n  domain: d\n  api_kye: k\n"), "gw.yaml:3: e2b.api_kye: unknown field");
  EXPECT_EQ(error_of("e2b: [1]\n"),
            "gw.yaml:1: e2b: expected a mapping of E2B settings, got a list");
  // A setting that is text takes a plain scalar as its text; any other type stays strict.
  EXPECT_EQ(section<E2BDeploymentConfig>(parse("e2b:\n  api_key: 1234\n")).api_key, "1234");
  EXPECT_EQ(error_of("e2b:\n  api_key: k\n  timeout: soon\n"),
            "gw.yaml:3: e2b.timeout: expected a number, got a string");
}

TEST(GatewayConfig, ASectionHoldsAnySettingOfItsBackend) {
  // The same fields as a deployment config's, as the defaults of every sandbox of the provider;
  // those each sandbox names (the image) may be left out.
  const auto k = section<KubernetesDeploymentConfig>(
      parse("kubernetes:\n  runtime_class_name: gvisor\n  node_selector: {disk: ssd}\n"));
  EXPECT_EQ(k.runtime_class_name, "gvisor");
  EXPECT_EQ(k.node_selector.at("disk"), "ssd");
  EXPECT_EQ(k.startup_timeout.count(), 120);  // the provider's default, unless the section says
  EXPECT_EQ(section<KubernetesDeploymentConfig>(parse("kubernetes:\n  startup_timeout: 30\n"))
                .startup_timeout.count(),
            30);
  EXPECT_EQ(
      error_of("kubernetes:\n  resources: {cpus: 1}\n"),
      R"(gw.yaml:2: kubernetes.resources: unknown key "cpus" (expected requests, limits or claims))");
}

TEST(GatewayConfig, TheDaytonaAndModalSections) {
  const GatewayConfig none = parse("listen: 127.0.0.1:1\n");
  EXPECT_FALSE(none.providers.contains("daytona"));
  EXPECT_FALSE(none.providers.contains("modal"));
  const auto d = section<DaytonaDeploymentConfig>(
      parse("daytona:\n  api_key: k\n  api_url: http://api\n  target: eu\n"));
  EXPECT_EQ(d.api_key, "k");
  EXPECT_EQ(d.api_url, "http://api");
  EXPECT_EQ(d.target, "eu");
  // Every field from Daytona's variables.
  EXPECT_TRUE(parse("daytona: {}\n").providers.contains("daytona"));
  EXPECT_EQ(error_of("daytona:\n  api_kye: k\n"), "gw.yaml:2: daytona.api_kye: unknown field");
#if REX_WITH_MODAL
  const auto m = section<ModalDeploymentConfig>(
      parse("modal:\n  token_id: ak\n  token_secret: as\n  server_url: http://m\n  environment: e\n"
            "  app_name: a\n  ca_file: /ca.pem\n"));
  EXPECT_EQ(m.token_id, "ak");
  EXPECT_EQ(m.token_secret, "as");
  EXPECT_EQ(m.server_url, "http://m");
  EXPECT_EQ(m.environment, "e");
  EXPECT_EQ(m.app_name, "a");
  EXPECT_EQ(m.ca_file, "/ca.pem");
  EXPECT_EQ(section<ModalDeploymentConfig>(parse("modal: {}\n")).app_name, "rex");
  EXPECT_EQ(error_of("modal:\n  app_name: \"\"\n"), "gw.yaml:2: modal.app_name: must not be empty");
  EXPECT_EQ(error_of("modal: [1]\n"),
            "gw.yaml:1: modal: expected a mapping of Modal settings, got a list");
#else
  EXPECT_NE(error_of("modal: {}\n").find("the modal backend is not in this build"),
            std::string::npos);
#endif
}

TEST(GatewayConfig, TheFargateSection) {
  EXPECT_FALSE(parse("listen: 127.0.0.1:1\n").providers.contains("fargate"));
  const auto c = section<FargateDeploymentConfig>(
      parse("fargate:\n  cluster: c\n  region: eu-west-1\n  profile: p\n  server_image: i\n"
            "  subnet_id: s\n  security_group_id: g\n  connect: private_ip\n  port: 9000\n"));
  EXPECT_EQ(c.cluster_name, "c");
  EXPECT_EQ(c.region, "eu-west-1");
  EXPECT_EQ(c.profile, "p");
  EXPECT_EQ(c.server_image, "i");
  EXPECT_EQ(c.subnet_id, "s");
  EXPECT_EQ(c.security_group_id, "g");
  EXPECT_EQ(c.connect, "private_ip");
  EXPECT_EQ(c.port, 9000);
  EXPECT_EQ(section<FargateDeploymentConfig>(parse("fargate: {}\n")).cluster_name, "rex-cluster");
  // cluster_name, as in a deployment config, or cluster.
  EXPECT_EQ(section<FargateDeploymentConfig>(parse("fargate:\n  cluster_name: x\n")).cluster_name,
            "x");
  EXPECT_EQ(error_of("fargate:\n  connect: ssh\n"),
            R"(gw.yaml:2: fargate.connect: expected one of public_ip, private_ip, got "ssh")");
  EXPECT_EQ(error_of("fargate:\n  port: 70000\n"),
            "gw.yaml:2: fargate.port: 70000 is out of range (1..65535)");
  EXPECT_NE(error_of("fargate:\n  cluster: \"\"\n").find("cluster_name: must not be empty"),
            std::string::npos)
      << error_of("fargate:\n  cluster: \"\"\n");
}

TEST(GatewayConfig, TheKubernetesSection) {
  EXPECT_FALSE(parse("listen: 127.0.0.1:1\n").providers.contains("kubernetes"));
  const auto c = section<KubernetesDeploymentConfig>(
      parse("kubernetes:\n  kubeconfig: /k\n  context: c\n  namespace: sandboxes\n"
            "  server_image: r/s:1\n  image_pull_policy: Always\n  connect: proxy\n"));
  EXPECT_EQ(c.kubeconfig, "/k");
  EXPECT_EQ(c.context, "c");
  EXPECT_EQ(c.namespace_name, "sandboxes");
  EXPECT_EQ(c.server_image, "r/s:1");
  EXPECT_EQ(c.image_pull_policy, "Always");
  EXPECT_EQ(c.connect, "proxy");
  const auto defaults = section<KubernetesDeploymentConfig>(parse("kubernetes: {}\n"));
  EXPECT_EQ(defaults.image_pull_policy, "IfNotPresent");
  EXPECT_EQ(defaults.connect, "auto");
  EXPECT_EQ(error_of("kubernetes:\n  connect: ssh\n"),
            R"(gw.yaml:2: kubernetes.connect: expected one of auto, proxy, pod_ip, got "ssh")");
  EXPECT_EQ(
      error_of("kubernetes:\n  image_pull_policy: Sometimes\n"),
      R"(gw.yaml:2: kubernetes.image_pull_policy: expected one of Always, IfNotPresent, Never, got "Sometimes")");
  EXPECT_EQ(error_of("kubernetes:\n  namespce: x\n"),
            "gw.yaml:2: kubernetes.namespce: unknown field");
}

TEST(GatewayConfig, TheDocumentMustBeOneMapping) {
  EXPECT_EQ(error_of("- listen\n"),
            "gw.yaml:1: expected a mapping of gateway settings, got a list");
  EXPECT_EQ(error_of("just text\n"),
            R"(gw.yaml:1: expected a mapping of gateway settings, got "just text")");
  EXPECT_EQ(error_of("storage: a\n---\nstorage: b\n"),
            "gw.yaml:3: a second YAML document (a file holds one)");
  // yaml-cpp points where it noticed: here, the end of the text.
  EXPECT_EQ(error_of("tenants: [a, b\n"),
            "gw.yaml:2: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(error_of("storage: a\n  bad: indent\n"), "gw.yaml:2: invalid YAML: illegal map value");
}

TEST(GatewayConfig, TenantsAreChecked) {
  EXPECT_EQ(error_of("tenants:\n  - keys: [k]\n"), "gw.yaml:2: tenants[0]: a tenant needs a name");
  EXPECT_EQ(error_of("tenants:\n  - name: ok\n  - name: not ok\n"),
            "gw.yaml:3: tenants[1].name: expected a tenant name of 1 to 63 letters, digits, '.', "
            "'_' or '-', starting with a letter or digit, got \"not ok\"");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    max_session: 3\n"),
            "gw.yaml:3: tenants[0].max_session: unknown field (known: name, keys, max_sessions, "
            "creates_per_minute, max_storage_bytes)");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys: k\n"),
            R"(gw.yaml:3: tenants[0].keys: expected a list of strings, got "k")");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys:\n      - good\n      - [bad]\n"),
            "gw.yaml:5: tenants[0].keys[1]: expected a string, got a list");
  EXPECT_EQ(
      error_of("tenants:\n  - name: a\n    max_sessions: few\n"),
      R"(gw.yaml:3: tenants[0].max_sessions: expected a whole number of sessions, got "few")");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    creates_per_minute: -1\n"),
            "gw.yaml:3: tenants[0].creates_per_minute: must not be negative, got -1");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    max_storage_bytes: [1]\n"),
            "gw.yaml:3: tenants[0].max_storage_bytes: expected a number of bytes or a size such "
            "as 512m or 10g, got a list");
  EXPECT_EQ(error_of("tenants:\n  - name\n"),
            R"(gw.yaml:2: tenants[0]: expected a mapping of tenant fields, got "name")");
}

TEST(GatewayConfig, KeysAreCheckedAndNeverShown) {
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys: [\"\"]\n"),
            "gw.yaml:3: tenants[0].keys[0]: a key must not be empty");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys: [\"se cret\"]\n"),
            "gw.yaml:3: tenants[0].keys[0]: a key must not contain whitespace or control "
            "characters");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys: [secret]\n"
                     "  - name: b\n    keys:\n      - other\n      - secret\n"),
            R"(gw.yaml:7: tenants[1].keys[1]: this key already belongs to the tenant "a")");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n    keys: [secret, secret]\n"),
            "gw.yaml:3: tenants[0].keys[1]: this key is listed twice");
  EXPECT_EQ(error_of("tenants:\n  - name: a\n  - name: b\n  - name: a\n"),
            R"(gw.yaml:4: tenants[2].name: the tenant "a" is defined twice)");
}

TEST(GatewayConfig, LoadReadsTheFileAndNamesIt) {
  const test::TempDir dir;
  const std::string path = dir.file("gateway.yaml", "storage: /srv/rex\nidle_timeout: soon\n");
  EXPECT_EQ(
      [&] {
        try {
          load_gateway_config(path);
        } catch (const GatewayConfigError& e) {
          return std::string(e.what());
        }
        return std::string("no error");
      }(),
      path + R"(:2: idle_timeout: expected a number of seconds, got "soon")");
  dir.file("good.yaml", "storage: /srv/rex\n");
  EXPECT_EQ(load_gateway_config(dir.path() + "/good.yaml").storage, "/srv/rex");
  EXPECT_THROW_MESSAGE(load_gateway_config(dir.path() + "/missing.yaml"), GatewayConfigError,
                       dir.path() + "/missing.yaml: cannot read: No such file or directory");
  EXPECT_THROW_MESSAGE(load_gateway_config(dir.path()), GatewayConfigError,
                       dir.path() + ": cannot read: is a directory");
}

TEST(GatewayConfig, AddApiKeyForms) {
  GatewayConfig config;
  add_api_key(config, "plain-key");
  ASSERT_EQ(config.tenants.size(), 1u);
  EXPECT_EQ(config.tenants[0].name, "default");
  EXPECT_EQ(config.tenants[0].keys, (std::vector<std::string>{"plain-key"}));

  add_api_key(config, "team-a=key-a");
  add_api_key(config, "team-a=key-a2");
  ASSERT_EQ(config.tenants.size(), 2u);
  EXPECT_EQ(config.tenants[1].name, "team-a");
  EXPECT_EQ(config.tenants[1].keys, (std::vector<std::string>{"key-a", "key-a2"}));

  // The first '=' ends the tenant: a key with '=' in it is given with its tenant.
  add_api_key(config, "default=c2VjcmV0==");
  add_api_key(config, "ci=a=b==");
  EXPECT_EQ(config.tenants[0].keys, (std::vector<std::string>{"plain-key", "c2VjcmV0=="}));
  ASSERT_EQ(config.tenants.size(), 3u);
  EXPECT_EQ(config.tenants[2].name, "ci");
  EXPECT_EQ(config.tenants[2].keys, (std::vector<std::string>{"a=b=="}));

  // The same key for the same tenant again changes nothing.
  add_api_key(config, "team-a=key-a");
  EXPECT_EQ(config.tenants[1].keys.size(), 2u);
  EXPECT_NO_THROW(validate(config));
}

TEST(GatewayConfig, AddApiKeyJoinsTenantsOfTheFile) {
  GatewayConfig config = parse("tenants:\n  - name: team-a\n    max_sessions: 3\n");
  add_api_key(config, "team-a=k1");
  ASSERT_EQ(config.tenants.size(), 1u);
  EXPECT_EQ(config.tenants[0].keys, (std::vector<std::string>{"k1"}));
  EXPECT_EQ(config.tenants[0].max_sessions, 3u);
}

TEST(GatewayConfig, AddApiKeyRefusals) {
  GatewayConfig config;
  add_api_key(config, "team-a=shared");
  EXPECT_EQ(
      add_key_error(config, "team-b=shared"),
      R"(--api-key: the key given for the tenant "team-b" already belongs to the tenant "team-a")");
  EXPECT_EQ(
      add_key_error(config, "shared"),
      R"(--api-key: the key given for the tenant "default" already belongs to the tenant "team-a")");
  EXPECT_EQ(add_key_error(config, ""), "--api-key: a key must not be empty");
  EXPECT_EQ(add_key_error(config, "team-b="), "--api-key: a key must not be empty");
  EXPECT_EQ(add_key_error(config, "c2VjcmV0=="),
            "--api-key: the key after \"c2VjcmV0\"= is only '=' characters (give a key with '=' "
            "in it as TENANT=KEY, such as default=KEY)");
  EXPECT_EQ(add_key_error(config, "has space"),
            "--api-key: a key must not contain whitespace or control characters");
  EXPECT_EQ(add_key_error(config, "tab\tkey"),
            "--api-key: a key must not contain whitespace or control characters");
  EXPECT_EQ(add_key_error(config, "my team=key"),
            "--api-key: expected TENANT=KEY with a tenant name of 1 to 63 letters, digits, '.', "
            "'_' or '-', starting with a letter or digit, got the tenant \"my team\"");
  EXPECT_EQ(add_key_error(config, "=key"),
            "--api-key: expected TENANT=KEY with a tenant name of 1 to 63 letters, digits, '.', "
            "'_' or '-', starting with a letter or digit, got the tenant \"\"");
  // Nothing was added by the refusals.
  ASSERT_EQ(config.tenants.size(), 1u);
  EXPECT_EQ(config.tenants[0].keys, (std::vector<std::string>{"shared"}));
}

TEST(GatewayConfig, ValidateRefusals) {
  const auto with = [](auto change) {
    GatewayConfig config;
    change(config);
    return validate_error(config);
  };
  EXPECT_EQ(with([](GatewayConfig& c) { c.storage.clear(); }),
            "gateway config: storage: must not be empty");
  EXPECT_EQ(with([](GatewayConfig& c) { c.python_image.clear(); }),
            "gateway config: python_image: must not be empty");
  EXPECT_EQ(with([](GatewayConfig& c) { c.sweep_interval = 0; }),
            "gateway config: sweep_interval: must be more than 0, got 0");
  EXPECT_EQ(with([](GatewayConfig& c) { c.drift_interval = -1; }),
            "gateway config: drift_interval: must not be negative, got -1");
  EXPECT_EQ(with([](GatewayConfig& c) { c.max_lifetime = 0; }),
            "gateway config: max_lifetime: must be more than 0, got 0");
  EXPECT_EQ(with([](GatewayConfig& c) { c.idle_timeout = -0.5; }),
            "gateway config: idle_timeout: must not be negative, got -0.5");
  EXPECT_EQ(
      with([](GatewayConfig& c) { c.orphan_grace = std::numeric_limits<double>::infinity(); }),
      "gateway config: orphan_grace: must be finite, got inf");
  EXPECT_EQ(with([](GatewayConfig& c) { c.creates_per_minute = std::nan(""); }),
            "gateway config: creates_per_minute: must be finite, got nan");
  EXPECT_EQ(with([](GatewayConfig& c) {
              c.tenants.push_back(tenant("a", {"k"}));
              c.tenants.back().creates_per_minute = -2;
            }),
            "gateway config: tenants[0].creates_per_minute: must not be negative, got -2");
  EXPECT_EQ(with([](GatewayConfig& c) { c.tenants.push_back(tenant("no/slash")); }),
            "gateway config: tenants[0].name: expected a tenant name of 1 to 63 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit, got \"no/slash\"");
  EXPECT_EQ(with([](GatewayConfig& c) { c.tenants.push_back(tenant(std::string(64, 'a'))); }),
            "gateway config: tenants[0].name: expected a tenant name of 1 to 63 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit, got \"" +
                std::string(57, 'a') + "...\"");
  EXPECT_EQ(with([](GatewayConfig& c) {
              c.tenants.push_back(tenant("a"));
              c.tenants.push_back(tenant("a"));
            }),
            R"(gateway config: tenants[1].name: the tenant "a" is defined twice)");
  EXPECT_EQ(with([](GatewayConfig& c) {
              c.tenants.push_back(tenant("a", {"k1", "shared"}));
              c.tenants.push_back(tenant("b", {"shared"}));
            }),
            R"(gateway config: tenants[1].keys[0]: this key already belongs to the tenant "a")");
  EXPECT_EQ(with([](GatewayConfig& c) { c.tenants.push_back(tenant("a", {"k\n"})); }),
            "gateway config: tenants[0].keys[0]: a key must not contain whitespace or control "
            "characters");
  EXPECT_EQ(
      with([](GatewayConfig& c) { c.listen = "localhost"; }),
      R"(gateway config: listen: expected HOST:PORT, [IPV6]:PORT or unix:PATH, got "localhost")");
  // 63 characters is the longest name.
  EXPECT_EQ(with([](GatewayConfig& c) { c.tenants.push_back(tenant(std::string(63, 'a'))); }),
            "no error");
}

TEST(GatewayConfig, TenantOfKey) {
  GatewayConfig config;
  EXPECT_EQ(tenant_of_key(config, "anything"), nullptr);
  add_api_key(config, "k0");
  add_api_key(config, "team=k1");
  add_api_key(config, "team=k2");
  ASSERT_NE(tenant_of_key(config, "k2"), nullptr);
  EXPECT_EQ(tenant_of_key(config, "k2")->name, "team");
  EXPECT_EQ(tenant_of_key(config, "k0")->name, "default");
  EXPECT_EQ(tenant_of_key(config, "k"), nullptr);
  EXPECT_EQ(tenant_of_key(config, ""), nullptr);
}

}  // namespace
}  // namespace rex::gateway
