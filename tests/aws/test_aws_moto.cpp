// rex's AWS client against moto's server with signature checking on: the emulator re-computes
// every signature from the request it received, as AWS does, and answers AWS's own errors.
#include <rex/aws/client.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <string>

#include "aws/moto_server.hpp"
#include "support/async_test.hpp"

namespace {

using namespace rex;
using namespace rex::aws;
namespace json = boost::json;

class AwsMoto : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test::MotoServer::unavailable(); !why.empty())
      GTEST_SKIP() << why;
    moto.emplace();
    keys = moto->make_user(io);
  }

  std::string error_of(const Credentials& c, const Service& s, const std::string& operation) {
    AwsClient client(io.get_executor(), moto->config(c));
    try {
      if (s.json_target.empty())
        test::run_async(io, client.query_call(s, operation, {}));
      else
        test::run_async(io, client.json_call(s, operation, json::object{}));
    } catch (const AwsError& e) {
      return e.what();
    }
    return "no error";
  }

  asio::io_context io;
  std::optional<test::MotoServer> moto;
  Credentials keys;
};

TEST_F(AwsMoto, SignedCallsOfBothProtocolsAreAccepted) {
  AwsClient client(io.get_executor(), moto->config(keys, "eu-west-3"));
  const json::object created = test::run_async(
      io, client.json_call(kEcs, "CreateCluster", json::object{{"clusterName", "rex"}}));
  EXPECT_EQ(created.at("cluster").at("clusterName"), "rex");
  EXPECT_EQ(created.at("cluster").at("status"), "ACTIVE");
  // A parameter that needs encoding in the form body, and a filter.
  const XmlElement vpcs = test::run_async(
      io, client.query_call(kEc2, "DescribeVpcs",
                            {{"Filter.1.Name", "is-default"}, {"Filter.1.Value.1", "true"}}));
  const XmlElement* set = vpcs.child("vpcSet");
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->children.size(), 1u);
  EXPECT_EQ(set->children[0].text_at("isDefault"), "true");
  EXPECT_EQ(set->children[0].text_at("vpcId").rfind("vpc-", 0), 0u);
  const XmlElement user =
      test::run_async(io, client.query_call(kIam, "GetUser", {{"UserName", "rex-test"}}));
  EXPECT_EQ(user.text_at("GetUserResult/User/UserName"), "rex-test");
}

TEST_F(AwsMoto, AwsErrorsComeWithTheirCodeAndMessage) {
  AwsClient client(io.get_executor(), moto->config(keys));
  try {
    test::run_async(io, client.query_call(kIam, "GetRole", {{"RoleName", "no such role"}}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_EQ(e.code(), "NoSuchEntity");
    EXPECT_EQ(e.status(), 404u);
    EXPECT_EQ(std::string(e.what()).rfind("IAM GetRole: NoSuchEntity: ", 0), 0u) << e.what();
  }
}

TEST_F(AwsMoto, AWrongSecretIsRefusedAtOnceWithTheEmulatorsOwnError) {
  Credentials wrong = keys;
  wrong.secret_access_key = "not the secret";
  wrong.source = "a test's wrong secret";
  // ECS is a JSON service; the emulator answers this one in XML.
  const std::string ecs = error_of(wrong, kEcs, "ListClusters");
  EXPECT_EQ(ecs.rfind("ECS ListClusters: SignatureDoesNotMatch: The request signature we "
                      "calculated does not match",
                      0),
            0u)
      << ecs;
  EXPECT_NE(ecs.find("(credentials from a test's wrong secret)"), std::string::npos) << ecs;
  EXPECT_EQ(ecs.find("attempts"), std::string::npos) << "a wrong secret was tried again: " << ecs;
  EXPECT_EQ(error_of(wrong, kEc2, "DescribeVpcs").rfind("EC2 DescribeVpcs: AuthFailure: ", 0), 0u);
  EXPECT_EQ(error_of(wrong, kIam, "ListRoles").rfind("IAM ListRoles: SignatureDoesNotMatch: ", 0),
            0u);
  Credentials unknown{"AKIDUNKNOWN", "x", "", "a test's unknown key"};
  const std::string who = error_of(unknown, kIam, "ListRoles");
  EXPECT_EQ(who.rfind("IAM ListRoles: InvalidClientTokenId: ", 0), 0u) << who;
}

}  // namespace
