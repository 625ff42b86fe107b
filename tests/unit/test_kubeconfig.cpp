// Kubeconfig: files found and merged as kubectl does, contexts resolved with their cluster,
// user and namespace, inline data and relative paths, in-cluster service accounts, and every
// unusable entry named; ExecCredential output read and exec plugins run (real programs).
#include <rex/core/text.hpp>
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#include <cstdlib>
#include <optional>
#include <string>

namespace {

using namespace rex::kubernetes;
using rex::test::ScopedEnv;
using rex::test::TempDir;
using testing::HasSubstr;

constexpr const char* kTwoContexts = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
    tls-server-name: kubernetes
- name: prod-cluster
  cluster:
    server: https://10.0.0.1
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key: keys/admin.key
- name: robot
  user:
    token: abc.def
contexts:
- name: dev
  context:
    cluster: dev-cluster
    user: admin
    namespace: sandboxes
- name: prod
  context:
    cluster: prod-cluster
    user: robot
)";

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const KubeconfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Kubeconfig, ResolvesTheCurrentContextWithInlineDataAndRelativeFiles) {
  TempDir dir;
  dir.file("ca.crt", "CA PEM");
  std::filesystem::create_directory(dir.path() + "/keys");
  dir.file("keys/admin.key", "KEY PEM");
  const std::string path = dir.file("config", kTwoContexts);
  const ClusterAccess a = load_cluster_access({.path = path, .context = {}});
  EXPECT_EQ(a.context, "dev");
  EXPECT_EQ(a.server, "https://127.0.0.1:6443");
  EXPECT_EQ(a.namespace_name, "sandboxes");
  EXPECT_EQ(a.ca_pem, "CA PEM");
  EXPECT_EQ(a.tls_server_name, "kubernetes");
  EXPECT_FALSE(a.insecure_skip_tls_verify);
  EXPECT_EQ(a.client_cert_pem, "CERT");  // from base64
  EXPECT_EQ(a.client_key_pem, "KEY PEM");
  EXPECT_TRUE(a.token.empty());
  EXPECT_THAT(a.source, HasSubstr(path));
}

TEST(Kubeconfig, ANamedContextAndItsDefaultNamespace) {
  TempDir dir;
  dir.file("ca.crt", "CA PEM");
  const ClusterAccess a =
      load_cluster_access({.path = dir.file("config", kTwoContexts), .context = "prod"});
  EXPECT_EQ(a.server, "https://10.0.0.1");
  EXPECT_TRUE(a.insecure_skip_tls_verify);
  EXPECT_EQ(a.token, "abc.def");
  EXPECT_EQ(a.namespace_name, "default");
  EXPECT_TRUE(a.client_cert_pem.empty());
}

TEST(Kubeconfig, KubeconfigListsMergeFirstDefinitionWins) {
  TempDir dir;
  const std::string first = dir.file("a", R"(current-context: one
clusters:
- name: c
  cluster: {server: "https://first"}
contexts:
- name: one
  context: {cluster: c}
)");
  const std::string second = dir.file("b", R"(current-context: two
clusters:
- name: c
  cluster: {server: "https://second"}
- name: d
  cluster: {server: "https://d"}
contexts:
- name: two
  context: {cluster: d, namespace: other}
)");
  ScopedEnv env("KUBECONFIG", first + ":" + dir.path() + "/missing:" + second);
  const ClusterAccess a = load_cluster_access();
  EXPECT_EQ(a.context, "one");
  EXPECT_EQ(a.server, "https://first");
  const ClusterAccess b = load_cluster_access({.path = {}, .context = "two"});
  EXPECT_EQ(b.server, "https://d");
  EXPECT_EQ(b.namespace_name, "other");
}

TEST(Kubeconfig, TheHomeConfigWhenNothingElseIsSet) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/.kube");
  dir.file(".kube/config", R"(current-context: x
clusters: [{name: c, cluster: {server: "https://home"}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  ScopedEnv no_list("KUBECONFIG", std::nullopt);
  ScopedEnv home("HOME", dir.path());
  EXPECT_EQ(load_cluster_access().server, "https://home");
}

TEST(Kubeconfig, InClusterServiceAccount) {
  TempDir home;
  TempDir sa;
  sa.file("token", "sa-token\n");
  sa.file("ca.crt", "SA CA");
  sa.file("namespace", "team-a\n");
  ScopedEnv no_list("KUBECONFIG", std::nullopt);
  ScopedEnv no_home("HOME", home.path());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  const ClusterAccess a =
      load_cluster_access({.path = {}, .context = {}, .service_account_dir = sa.path()});
  EXPECT_EQ(a.server, "https://[fd00::1]:443");
  EXPECT_EQ(a.token_file, sa.path() + "/token");
  EXPECT_EQ(a.ca_pem, "SA CA");
  EXPECT_EQ(a.namespace_name, "team-a");
  EXPECT_EQ(a.source, "in-cluster service account");
}

TEST(Kubeconfig, NoKubeconfigAnywhereSaysWhatWasTried) {
  TempDir home;
  ScopedEnv no_list("KUBECONFIG", std::nullopt);
  ScopedEnv no_home("HOME", home.path());
  ScopedEnv no_host("KUBERNETES_SERVICE_HOST", std::nullopt);
  const std::string m = message_of([] { load_cluster_access(); });
  EXPECT_THAT(m, HasSubstr(home.path() + "/.kube/config does not exist"));
  EXPECT_THAT(m, HasSubstr("KUBERNETES_SERVICE_HOST"));
}

TEST(Kubeconfig, UnusableEntriesAreNamed) {
  TempDir dir;
  auto load = [&](const std::string& text, const std::string& context = {}) {
    const std::string path = dir.file("config", text);
    return message_of([&] { load_cluster_access({.path = path, .context = context}); });
  };
  EXPECT_THAT(load("clusters: [", ""), HasSubstr("not a valid kubeconfig"));
  EXPECT_THAT(load("- a\n- b\n"), HasSubstr("a kubeconfig is a mapping"));
  EXPECT_THAT(load("contexts: [{name: a, context: {cluster: c}}]\n"),
              HasSubstr("sets no current-context: name one of its contexts (a)"));
  EXPECT_THAT(load("current-context: b\ncontexts: [{name: a, context: {cluster: c}}]\n"),
              HasSubstr("context \"b\" is not in the kubeconfig (its contexts: a)"));
  EXPECT_THAT(load("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"),
              HasSubstr("its cluster \"c\" is not in the kubeconfig (clusters: none)"));
  const std::string cluster = "clusters: [{name: c, cluster: {server: \"https://s\"}}]\n";
  EXPECT_THAT(load("current-context: a\n" + cluster +
                   "contexts: [{name: a, context: {cluster: c, user: u}}]\n"),
              HasSubstr("its user \"u\" is not in the kubeconfig (users: none)"));
  auto with_user = [&](const std::string& user) {
    return load("current-context: a\n" + cluster +
                "contexts: [{name: a, context: {cluster: c, user: u}}]\nusers: [{name: u, user: " +
                user + "}]\n");
  };
  EXPECT_THAT(with_user("{client-certificate-data: '***'}"), HasSubstr("not valid base64"));
  EXPECT_THAT(with_user("{client-certificate-data: Q0VSVA==}"),
              HasSubstr("a client certificate needs its key"));
  EXPECT_THAT(with_user("{client-key: nowhere.key, client-certificate-data: Q0VSVA==}"),
              HasSubstr("user \"u\".client-key: cannot read " + dir.path() + "/nowhere.key"));
  EXPECT_THAT(with_user("{tokenFile: /nonexistent/token}"), HasSubstr("tokenFile: cannot read"));
  EXPECT_THAT(with_user("{token: t, username: me}"), HasSubstr("more than one of"));
  EXPECT_THAT(with_user("{auth-provider: {name: gcp}}"), HasSubstr("auth-provider \"gcp\""));
  EXPECT_THAT(with_user("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}"),
              HasSubstr("interactiveMode is required"));
  EXPECT_THAT(with_user("{exec: {command: x, apiVersion: v0}}"),
              HasSubstr("is not one rex speaks"));
  EXPECT_THAT(load("current-context: a\nclusters: [{name: c, cluster: {}}]\n"
                   "contexts: [{name: a, context: {cluster: c}}]\n"),
              HasSubstr("cluster \"c\": no server"));
  EXPECT_THAT(
      message_of([&] { load_cluster_access({.path = dir.path() + "/absent", .context = {}}); }),
      HasSubstr("the kubeconfig: cannot read " + dir.path() + "/absent"));
}

TEST(Kubeconfig, ExecEntriesAreReadWithTheirCommandAnchored) {
  const Kubeconfig k = parse_kubeconfig(R"(users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: ./bin/get-token
      args: [--cluster, dev]
      env: [{name: A, value: "1"}]
      provideClusterInfo: true
      installHint: install get-token
)",
                                        "/etc/kube/config");
  const auto& exec = k.users.at("u").exec;
  ASSERT_TRUE(exec.has_value());
  EXPECT_EQ(exec->command, "/etc/kube/bin/get-token");
  EXPECT_EQ(exec->args, (std::vector<std::string>{"--cluster", "dev"}));
  ASSERT_EQ(exec->env.size(), 1u);
  EXPECT_EQ(exec->env[0], (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_TRUE(exec->provide_cluster_info);
  EXPECT_EQ(exec->install_hint, "install get-token");
}

ExecPlugin plugin(const std::string& command, const std::string& api = "v1") {
  ExecPlugin p;
  p.command = command;
  p.api_version = "client.authentication.k8s.io/" + api;
  p.interactive_mode = "Never";
  return p;
}

TEST(ExecCredential, ReadsTokensCertificatesAndExpiry) {
  const ExecPlugin p = plugin("get-token");
  const ExecCredential c = parse_exec_credential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
          "status":{"token":"t0k","expirationTimestamp":"2026-11-25T10:00:00.5+01:00"}})",
      p);
  EXPECT_EQ(c.token, "t0k");
  ASSERT_TRUE(c.expires.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c.expires), 1795597200);  // 09:00 UTC
  const ExecCredential cert = parse_exec_credential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
          "status":{"clientCertificateData":"C","clientKeyData":"K"}})",
      p);
  EXPECT_EQ(cert.client_cert_pem, "C");
  EXPECT_EQ(cert.client_key_pem, "K");
  EXPECT_FALSE(cert.expires.has_value());
}

TEST(ExecCredential, RefusesWhatIsNotACredential) {
  const ExecPlugin p = plugin("get-token");
  auto m = [&](const std::string& out) {
    return message_of([&] { parse_exec_credential(out, p); });
  };
  EXPECT_THAT(m("token"), HasSubstr("not a JSON object"));
  EXPECT_THAT(m(R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential"})"),
              HasSubstr("printed apiVersion \"client.authentication.k8s.io/v1beta1\""));
  EXPECT_THAT(m(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Other"})"),
              HasSubstr("kind ExecCredential"));
  EXPECT_THAT(m(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})"),
              HasSubstr("without a status"));
  EXPECT_THAT(m(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                    "status":{}})"),
              HasSubstr("neither a token nor"));
  EXPECT_THAT(m(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                    "status":{"token":"t","expirationTimestamp":"tomorrow"}})"),
              HasSubstr("is not RFC 3339"));
}

TEST(ExecCredential, RunsThePluginWithItsEnvironmentAndClusterInfo) {
  TempDir dir;
  // A real plugin: prints its arguments, an entry of its env and the cluster it was told about
  // inside the token.
  const std::string script = dir.file("plugin.sh", R"(#!/bin/sh
info=$(printf %s "$KUBERNETES_EXEC_INFO" | tr -d '"{}' | tr ',' ' ')
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s|%s|%s"}}' "$*" "$EXTRA" "$info"
)",
                                      0755);
  ExecPlugin p = plugin(script);
  p.args = {"a", "b"};
  p.env = {{"EXTRA", "x1"}};
  p.provide_cluster_info = true;
  ClusterAccess cluster;
  cluster.server = "https://127.0.0.1:6443";
  const ExecCredential c = rex::test::run_async(run_exec_plugin(p, cluster));
  EXPECT_THAT(c.token, HasSubstr("a b|x1|"));
  EXPECT_THAT(c.token, HasSubstr("interactive:false"));
  EXPECT_THAT(c.token, HasSubstr("server:https://127.0.0.1:6443"));
}

TEST(ExecCredential, PluginFailuresNameTheCommand) {
  TempDir dir;
  const std::string failing =
      dir.file("fail.sh", "#!/bin/sh\necho 'no credentials for you' >&2\nexit 3\n", 0755);
  auto m = [&](ExecPlugin p,
               std::chrono::steady_clock::duration timeout = std::chrono::seconds(10)) {
    try {
      rex::test::run_async(run_exec_plugin(p, ClusterAccess{}, timeout));
    } catch (const KubeconfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(m(plugin(failing)), HasSubstr("failed (exit code 3): no credentials for you"));
  ExecPlugin missing = plugin(dir.path() + "/absent");
  missing.install_hint = "install it with: apt-get install absent";
  const std::string not_found = m(missing);
  EXPECT_THAT(not_found, HasSubstr("cannot run the exec plugin"));
  EXPECT_THAT(not_found, HasSubstr("install it with: apt-get install absent"));
  const std::string slow = dir.file("slow.sh", "#!/bin/sh\nexec sleep 30\n", 0755);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(m(plugin(slow), std::chrono::milliseconds(300)), HasSubstr("did not finish within"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ExecPlugin always = plugin(failing);
  always.interactive_mode = "Always";
  EXPECT_THAT(m(always), HasSubstr("needs a terminal"));
}

}  // namespace
