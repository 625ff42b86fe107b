// ApiClient against the real API server of the local cluster (scripts/k8s.sh): each way a
// kubeconfig can say who the user is (client certificate, bearer token, token file, exec plugin)
// is checked by asking the server who it thinks we are (a SelfSubjectReview); wrong credentials
// are refused with the server's own answer.
#include <rex/core/random.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "kubernetes/local_cluster.hpp"
#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

namespace json = boost::json;
using namespace rex::kubernetes;
using rex::test::admin_kubeconfig;
using rex::test::run_async;
using rex::test::TempDir;
using testing::Contains;
using testing::HasSubstr;

// Who the server takes the client's user for: its name and groups.
struct Identity {
  std::string username;
  std::vector<std::string> groups;
};

boost::asio::awaitable<Identity> who_am_i(ApiClient& api) {
  json::value review =
      json::object{{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}};
  const json::value answer = co_await api.call(
      "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", std::move(review));
  const auto& user = answer.at("status").at("userInfo").as_object();
  Identity id;
  id.username = std::string(user.at("username").as_string());
  if (const auto* groups = user.if_contains("groups"))
    for (const auto& g : groups->as_array())
      id.groups.emplace_back(g.as_string());
  co_return id;
}

class KubeCredentials : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = rex::test::no_cluster_reason(); !why.empty())
      GTEST_SKIP() << why;
    admin_access_ = load_cluster_access({.path = admin_kubeconfig(), .context = {}});
    admin_ = std::make_unique<ApiClient>(io_.get_executor(), admin_access_);
    ns_ = "rex-cred-" + rex::random_hex(4);
    run_async(io_, admin_->call("POST", "/api/v1/namespaces",
                                json::object{{"metadata", json::object{{"name", ns_}}}}));
    run_async(io_, admin_->call("POST", "/api/v1/namespaces/" + ns_ + "/serviceaccounts",
                                json::object{{"metadata", json::object{{"name", "robot"}}}}));
    const json::value issued = run_async(
        io_, admin_->call("POST", "/api/v1/namespaces/" + ns_ + "/serviceaccounts/robot/token",
                          json::object{{"apiVersion", "authentication.k8s.io/v1"},
                                       {"kind", "TokenRequest"},
                                       {"spec", json::object{{"expirationSeconds", 600}}}}));
    token_ = std::string(issued.at("status").at("token").as_string());
  }

  void TearDown() override {
    if (admin_ && !ns_.empty()) {
      try {
        run_async(io_, admin_->call("DELETE", "/api/v1/namespaces/" + ns_));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "deleting the test's namespace: " << e.what();
      }
    }
  }

  // The admin's cluster with another user.
  ClusterAccess as_user() const {
    ClusterAccess a;
    a.server = admin_access_.server;
    a.ca_pem = admin_access_.ca_pem;
    a.tls_server_name = admin_access_.tls_server_name;
    return a;
  }

  std::string robot() const { return "system:serviceaccount:" + ns_ + ":robot"; }

  // A kubeconfig in the test's folder, as a user would write it: the cluster with its CA file,
  // `user` (a YAML mapping) and, when given, the context's namespace. Returns its path.
  std::string user_kubeconfig(const std::string& user, const std::string& ns = {}) const {
    return dir_.file("config", "current-context: c\nclusters: [{name: k, cluster: {server: \"" +
                                   admin_access_.server + "\", certificate-authority: \"" +
                                   rex::test::cluster_pki_dir() +
                                   "/ca.crt\"}}]\nusers: [{name: "
                                   "u, user: " +
                                   user +
                                   "}]\ncontexts: [{name: c, context: "
                                   "{cluster: k, user: u" +
                                   (ns.empty() ? "" : ", namespace: " + ns) + "}}]\n");
  }

  boost::asio::io_context io_;
  ClusterAccess admin_access_;
  std::unique_ptr<ApiClient> admin_;
  std::string ns_;
  std::string token_;
  TempDir dir_;
};

TEST_F(KubeCredentials, AdminKubeconfigIsAClientCertificateOfSystemMasters) {
  EXPECT_FALSE(admin_access_.client_cert_pem.empty());
  const Identity id = run_async(io_, who_am_i(*admin_));
  EXPECT_THAT(id.groups, Contains("system:masters"));
  const json::value version = run_async(io_, admin_->call("GET", "/version"));
  EXPECT_EQ(version.at("major").as_string(), "1");
}

TEST_F(KubeCredentials, ClientCertificateSignedByTheClusterCa) {
  const std::string key = dir_.path() + "/user.key";
  const std::string cert = dir_.path() + "/user.crt";
  const std::string make =
      "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + key +
      " -subj '/O=rex-testers/CN=rex-cert-user' 2>/dev/null | openssl x509 -req -CA " +
      rex::test::cluster_pki_dir() + "/ca.crt -CAkey " + rex::test::cluster_pki_dir() +
      "/ca.key -days 1 -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  // Through a kubeconfig with the files, as a user would write it.
  const std::string config =
      user_kubeconfig("{client-certificate: user.crt, client-key: user.key}", ns_);
  const ClusterAccess access = load_cluster_access({.path = config, .context = {}});
  EXPECT_EQ(access.namespace_name, ns_);
  ApiClient api(io_.get_executor(), access);
  const Identity id = run_async(io_, who_am_i(api));
  EXPECT_EQ(id.username, "rex-cert-user");
  EXPECT_THAT(id.groups, Contains("rex-testers"));
}

TEST_F(KubeCredentials, BearerToken) {
  ClusterAccess a = as_user();
  a.token = token_;
  ApiClient api(io_.get_executor(), a);
  EXPECT_EQ(run_async(io_, who_am_i(api)).username, robot());
  // The service account may not list pods: the server's refusal, named.
  try {
    run_async(io_, api.call("GET", "/api/v1/namespaces/" + ns_ + "/pods"));
    ADD_FAILURE() << "a service account without roles listed pods";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 403u);
    EXPECT_EQ(e.reason(), "Forbidden");
    EXPECT_THAT(e.message(), HasSubstr("cannot list resource \"pods\""));
    EXPECT_THAT(e.what(), HasSubstr("GET /api/v1/namespaces/" + ns_ + "/pods: 403 Forbidden"));
  }
}

TEST_F(KubeCredentials, TokenFile) {
  ClusterAccess a = as_user();
  a.token_file = dir_.file("token", token_ + "\n");
  ApiClient api(io_.get_executor(), a);
  EXPECT_EQ(run_async(io_, who_am_i(api)).username, robot());
}

TEST_F(KubeCredentials, ExecPluginRunsOnceWhileItsCredentialLasts) {
  const std::string counter = dir_.path() + "/runs";
  const std::string plugin =
      dir_.file("plugin.sh",
                "#!/bin/sh\necho run >> " + counter +
                    "\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                    "\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$ROBOT_TOKEN\"\n",
                0755);
  const std::string config = user_kubeconfig(
      "{exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.sh, "
      "interactiveMode: Never, env: [{name: ROBOT_TOKEN, value: \"" +
      token_ + "\"}]}}");
  ApiClient api(io_.get_executor(), load_cluster_access({.path = config, .context = {}}));
  EXPECT_EQ(run_async(io_, who_am_i(api)).username, robot());
  EXPECT_EQ(run_async(io_, who_am_i(api)).username, robot());
  EXPECT_EQ(api.exec_runs(), 1u);
  EXPECT_EQ(rex::test::read_text(counter), "run\n");
}

TEST_F(KubeCredentials, ExecPluginRunsAgainAfterA401) {
  // The first credential is refused: the client asks the plugin again and retries once.
  const std::string plugin =
      dir_.file("plugin.sh",
                "#!/bin/sh\nif [ -e " + dir_.path() +
                    "/ran ]; then t=\"$ROBOT_TOKEN\"; else t=stale; touch " + dir_.path() +
                    "/ran; fi\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                    "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$t\"\n",
                0755);
  ClusterAccess a = as_user();
  ExecPlugin p;
  p.command = plugin;
  p.api_version = "client.authentication.k8s.io/v1beta1";
  p.env = {{"ROBOT_TOKEN", token_}};
  a.exec = p;
  ApiClient api(io_.get_executor(), a);
  EXPECT_EQ(run_async(io_, who_am_i(api)).username, robot());
  EXPECT_EQ(api.exec_runs(), 2u);
}

TEST_F(KubeCredentials, AWrongTokenIsRefusedByTheServer) {
  ClusterAccess a = as_user();
  a.token = "not-a-token";
  ApiClient api(io_.get_executor(), a);
  try {
    run_async(io_, who_am_i(api));
    ADD_FAILURE() << "a wrong token was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 401u);
    EXPECT_THAT(e.what(), HasSubstr("POST /apis/authentication.k8s.io/v1/selfsubjectreviews: 401"));
  }
}

TEST_F(KubeCredentials, AServerNotTrustedWithoutItsCa) {
  ClusterAccess a = as_user();
  a.ca_pem.clear();
  a.token = token_;
  ApiClient api(io_.get_executor(), a);
  try {
    run_async(io_, who_am_i(api));
    ADD_FAILURE() << "a server signed by an unknown CA was trusted";
  } catch (const rex::http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("certificate verify failed"));
  }
}

}  // namespace
