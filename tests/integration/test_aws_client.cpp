// rex's AWS client against a scripted HTTP server on loopback: what it sends (signed JSON 1.1
// and Query calls), which errors it tries again and how many times, and what it says when it
// gives up. (Against an AWS emulator that checks signatures: tests/aws.)
#include <rex/aws/client.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <chrono>
#include <string>

#include "support/async_test.hpp"
#include "support/scripted_server.hpp"

namespace {

using namespace rex;
using namespace rex::aws;
using rex::test::Reply;
using rex::test::ScriptedServer;
using rex::test::Seen;
namespace json = boost::json;
using namespace std::chrono_literals;

AwsConfig config_for(const std::string& url) {
  AwsConfig c;
  c.credentials = Credentials{"AKIDTEST", "secret", "", "the test's keys"};
  c.region = "eu-west-3";
  c.endpoint_url = url;
  c.backoff.initial_delay = 1ms;
  c.backoff.max_delay = 5ms;
  c.max_attempts = 4;
  return c;
}

Reply error_reply(unsigned status, std::string body, std::string type = "application/json") {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(type);
  return r;
}

TEST(AwsClient, AJsonCallIsSignedAndItsAnswerRead) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    return Reply::json_body(R"({"cluster":{"clusterName":"rex","status":"ACTIVE"}})");
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  const json::object answer = test::run_async(
      io, client.json_call(kEcs, "CreateCluster", json::object{{"clusterName", "rex"}}));
  EXPECT_EQ(answer.at("cluster").at("status"), "ACTIVE");
  ASSERT_EQ(server.requests.size(), 1u);
  const Seen& seen = server.requests[0];
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/");
  EXPECT_EQ(seen.headers.at("x-amz-target"), "AmazonEC2ContainerServiceV20141113.CreateCluster");
  EXPECT_EQ(seen.headers.at("content-type"), "application/x-amz-json-1.1");
  EXPECT_EQ(json::parse(seen.body), (json::object{{"clusterName", "rex"}}));
  const std::string& auth = seen.headers.at("authorization");
  EXPECT_EQ(auth.rfind("AWS4-HMAC-SHA256 Credential=AKIDTEST/", 0), 0u) << auth;
  EXPECT_NE(auth.find("/eu-west-3/ecs/aws4_request, SignedHeaders=content-type;host;x-amz-date;"
                      "x-amz-target, Signature="),
            std::string::npos)
      << auth;
  EXPECT_EQ(seen.headers.at("host").rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(seen.headers.count("x-amz-security-token"), 0u);
}

TEST(AwsClient, AQueryCallSendsAFormAndReadsXml) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.content_type = "text/xml";
    r.body =
        "<GetRoleResponse><GetRoleResult><Role><Arn>arn:aws:iam::1:role/rex</Arn></Role>"
        "</GetRoleResult></GetRoleResponse>";
    return r;
  });
  AwsConfig cfg = config_for(server.listen_tcp());
  cfg.credentials.session_token = "session";
  AwsClient client(io.get_executor(), cfg);
  const XmlElement root =
      test::run_async(io, client.query_call(kIam, "GetRole", {{"RoleName", "rex task"}}));
  EXPECT_EQ(root.text_at("GetRoleResult/Role/Arn"), "arn:aws:iam::1:role/rex");
  const Seen& seen = server.requests.at(0);
  EXPECT_EQ(seen.body, "Action=GetRole&RoleName=rex+task&Version=2010-05-08");
  EXPECT_EQ(seen.headers.at("x-amz-security-token"), "session");
  // IAM is global: signed for us-east-1 whatever the region.
  EXPECT_NE(seen.headers.at("authorization").find("/us-east-1/iam/aws4_request"),
            std::string::npos);
}

TEST(AwsClient, ThrottlingAndServerErrorsAreTriedAgain) {
  asio::io_context io;
  int calls = 0;
  ScriptedServer server(io, [&calls](const Seen&) {
    ++calls;
    if (calls == 1)
      return error_reply(400, R"({"__type":"ThrottlingException","message":"Rate exceeded"})");
    if (calls == 2)
      return error_reply(503,
                         "<Response><Errors><Error><Code>RequestLimitExceeded</Code>"
                         "<Message>Request limit exceeded.</Message></Error></Errors>"
                         "</Response>",
                         "text/xml");
    if (calls == 3)
      return error_reply(502, "Bad Gateway", "text/plain");
    return Reply::json_body(R"({"tasks":[]})");
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  const json::object answer =
      test::run_async(io, client.json_call(kEcs, "DescribeTasks", json::object{}));
  EXPECT_TRUE(answer.at("tasks").as_array().empty());
  EXPECT_EQ(calls, 4);
  // Each attempt is signed anew.
  EXPECT_NE(server.requests[0].headers.at("authorization"), "");
}

TEST(AwsClient, GivingUpNamesTheCallTheCodeAndTheAttempts) {
  asio::io_context io;
  int calls = 0;
  ScriptedServer server(io, [&calls](const Seen&) {
    ++calls;
    return error_reply(400, R"({"__type":"ThrottlingException","message":"Rate exceeded"})");
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, client.json_call(kEcs, "RunTask", json::object{}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ECS RunTask: ThrottlingException: Rate exceeded (4 attempts)");
    EXPECT_EQ(e.code(), "ThrottlingException");
    EXPECT_EQ(e.status(), 400u);
  }
  EXPECT_EQ(calls, 4);
}

TEST(AwsClient, ACallersMistakeFailsAtOnce) {
  asio::io_context io;
  int calls = 0;
  ScriptedServer server(io, [&calls](const Seen&) {
    ++calls;
    return error_reply(
        400, R"({"__type":"InvalidParameterException","message":"Task definition is bad"})");
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, client.json_call(kEcs, "RegisterTaskDefinition", json::object{}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ECS RegisterTaskDefinition: InvalidParameterException: Task definition is bad");
  }
  EXPECT_EQ(calls, 1);
}

TEST(AwsClient, AnExpiredCredentialFailsAtOnceNamingWhereItCameFrom) {
  asio::io_context io;
  int calls = 0;
  ScriptedServer server(io, [&calls](const Seen&) {
    ++calls;
    return error_reply(400,
                       "<ErrorResponse><Error><Code>ExpiredToken</Code><Message>The security "
                       "token included in the request is expired</Message></Error>"
                       "</ErrorResponse>",
                       "text/xml");
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, client.query_call(kEc2, "DescribeVpcs", {}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_EQ(std::string(e.what()),
              "EC2 DescribeVpcs: ExpiredToken: The security token included in the request is "
              "expired (credentials from the test's keys)");
  }
  EXPECT_EQ(calls, 1);
}

TEST(AwsClient, AnswersThatAreNotTheProtocolsAreNamed) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    Reply r;
    r.content_type = "text/plain";
    r.body = seen.headers.count("x-amz-target") != 0 ? "[1, 2]" : "not xml";
    return r;
  });
  AwsClient client(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, client.json_call(kEcs, "ListClusters", json::object{}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_EQ(std::string(e.what()), "ECS ListClusters: the answer is not a JSON object: [1, 2]");
  }
  try {
    test::run_async(io, client.query_call(kEc2, "DescribeVpcs", {}));
    FAIL() << "no error";
  } catch (const AwsError& e) {
    EXPECT_NE(std::string(e.what()).find("EC2 DescribeVpcs: the answer is not XML"),
              std::string::npos)
        << e.what();
  }
}

TEST(AwsClient, EndpointsFollowTheServiceTheRegionAndTheEnvironment) {
  asio::io_context io;
  AwsConfig c;
  c.credentials = Credentials{"A", "B", "", ""};
  c.region = "ap-south-1";
  AwsClient plain(io.get_executor(), c);
  EXPECT_EQ(plain.endpoint_of(kEcs), "https://ecs.ap-south-1.amazonaws.com");
  EXPECT_EQ(plain.endpoint_of(kEc2), "https://ec2.ap-south-1.amazonaws.com");
  EXPECT_EQ(plain.endpoint_of(kIam), "https://iam.amazonaws.com");

  std::map<std::string, std::string> vars{{"AWS_ACCESS_KEY_ID", "A"},
                                          {"AWS_SECRET_ACCESS_KEY", "B"},
                                          {"AWS_REGION", "us-west-2"},
                                          {"AWS_ENDPOINT_URL", "http://127.0.0.1:5000"},
                                          {"AWS_ENDPOINT_URL_IAM", "http://127.0.0.1:5001"}};
  const AwsConfig from_env =
      config_from_environment({}, {}, [&vars](const std::string& n) -> std::optional<std::string> {
        auto it = vars.find(n);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
      });
  AwsClient emulated(io.get_executor(), from_env);
  EXPECT_EQ(emulated.endpoint_of(kEcs), "http://127.0.0.1:5000");
  EXPECT_EQ(emulated.endpoint_of(kIam), "http://127.0.0.1:5001");
  EXPECT_EQ(from_env.region, "us-west-2");
}

}  // namespace
