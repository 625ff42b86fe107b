// AWS Signature Version 4. The expected signatures were computed by botocore 1.35.99's
// SigV4Auth (AWS's own Python SDK core) for the same requests, keys and time.
#include <rex/aws/sigv4.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace {

using namespace rex::aws;

const Credentials kKeys{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "", "test"};

// 2026-11-27T12:36:00Z
std::chrono::system_clock::time_point at() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1795782960));
}

std::string header(const Headers& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (k == name)
      return v;
  return "<missing>";
}

TEST(SigV4, Json11CallToEcs) {
  SigningRequest r;
  r.method = "POST";
  r.host = "ecs.us-east-1.amazonaws.com";
  r.headers = {{"Content-Type", "application/x-amz-json-1.1"},
               {"X-Amz-Target", "AmazonEC2ContainerServiceV20141113.CreateCluster"}};
  const std::string body = R"({"clusterName":"rex"})";
  r.body = body;
  const Headers added = sign_v4(r, kKeys, Scope{"us-east-1", "ecs"}, at());
  EXPECT_EQ(header(added, "X-Amz-Date"), "20261127T123600Z");
  EXPECT_EQ(header(added, "X-Amz-Security-Token"), "<missing>");
  EXPECT_EQ(header(added, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261127/us-east-1/ecs/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "
            "Signature=8bc5d20f64691468f058a204f7b5d8b61f7f862a3f8750ca2bd8396ec1e83d58");
}

TEST(SigV4, QueryCallToIamWithASessionToken) {
  SigningRequest r;
  r.method = "POST";
  r.host = "iam.amazonaws.com";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
  const std::string body = "Action=GetRole&RoleName=rex-task&Version=2010-05-08";
  r.body = body;
  Credentials temporary = kKeys;
  temporary.session_token = "FQoGZXIvYXdzEXAMPLE/token+==";
  const Headers added = sign_v4(r, temporary, Scope{"us-east-1", "iam"}, at());
  EXPECT_EQ(header(added, "X-Amz-Security-Token"), "FQoGZXIvYXdzEXAMPLE/token+==");
  EXPECT_EQ(header(added, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261127/us-east-1/iam/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, "
            "Signature=0a6dc7f481bc9b11f395566e1cb1ad89e47f27eed9f4268220d33c4f32914a03");
}

TEST(SigV4, QueryParametersAreEncodedAndSorted) {
  SigningRequest r;
  r.method = "GET";
  r.host = "ec2.eu-west-3.amazonaws.com";
  // In another order than signed, decoded: the signer encodes and sorts them.
  r.query = {{"Odd", "a b~c/d/\xc3\xa9"},  {"Version", "2016-11-15"},
             {"Filter.1.Value.1", "true"}, {"Empty", ""},
             {"Action", "DescribeVpcs"},   {"Filter.1.Name", "isDefault"}};
  const Headers added = sign_v4(r, kKeys, Scope{"eu-west-3", "ec2"}, at());
  EXPECT_EQ(header(added, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261127/eu-west-3/ec2/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=71eb07dcf5f4f5a272d52c406ace7dc35e62a65829391c990a56a094e00340fa");
  EXPECT_EQ(canonical_query(r.query),
            "Action=DescribeVpcs&Empty=&Filter.1.Name=isDefault&Filter.1.Value.1=true&"
            "Odd=a%20b~c%2Fd%2F%C3%A9&Version=2016-11-15");
}

TEST(SigV4, PathIsEncodedTwiceAndRepeatedKeysSortByValue) {
  SigningRequest r;
  r.method = "GET";
  r.host = "127.0.0.1:5000";
  r.path = "/some%20path/x~y";
  r.query = {{"b", "2"}, {"a", "1"}, {"a", "0"}};
  const auto parts = detail::signing_parts(r, kKeys, Scope{"us-east-1", "ecs"}, at());
  EXPECT_EQ(parts.canonical_request.substr(0, parts.canonical_request.find('\n', 4) + 1),
            "GET\n/some%2520path/x~y\n");
  EXPECT_NE(parts.canonical_request.find("\na=0&a=1&b=2\n"), std::string::npos);
  EXPECT_EQ(parts.signature, "35faa6cb9ced837fa2111b834302b4e8f710b872ac9291aa50de7eefb8dc7a13");
}

TEST(SigV4, HeaderValuesAreTrimmedAndRepeatedNamesJoined) {
  SigningRequest r;
  r.method = "POST";
  r.host = "example.amazonaws.com";
  r.headers = {{"X-Amz-Meta", "  a   b  "}, {"x-amz-meta", "c"}, {"Host", "ignored"}};
  const auto parts = detail::signing_parts(r, kKeys, Scope{"us-east-1", "ecs"}, at());
  EXPECT_NE(parts.canonical_request.find("\nhost:example.amazonaws.com\nx-amz-date:"
                                         "20261127T123600Z\nx-amz-meta:a b,c\n"),
            std::string::npos)
      << parts.canonical_request;
  EXPECT_EQ(parts.signed_headers, "host;x-amz-date;x-amz-meta");
  EXPECT_EQ(parts.string_to_sign.substr(0, 70),
            "AWS4-HMAC-SHA256\n20261127T123600Z\n20261127/us-east-1/ecs/aws4_request\n");
}

TEST(SigV4, AnotherSecretSignsDifferently) {
  SigningRequest r;
  r.method = "POST";
  r.host = "ecs.us-east-1.amazonaws.com";
  Credentials other = kKeys;
  other.secret_access_key = "another";
  EXPECT_NE(detail::signing_parts(r, kKeys, Scope{"us-east-1", "ecs"}, at()).signature,
            detail::signing_parts(r, other, Scope{"us-east-1", "ecs"}, at()).signature);
}

TEST(SigV4, MissingKeysOrScopeAreRefused) {
  SigningRequest r;
  r.method = "GET";
  r.host = "h";
  EXPECT_THROW(sign_v4(r, Credentials{}, Scope{"us-east-1", "ecs"}, at()), std::invalid_argument);
  EXPECT_THROW(sign_v4(r, kKeys, Scope{"", "ecs"}, at()), std::invalid_argument);
  EXPECT_THROW(sign_v4(r, kKeys, Scope{"us-east-1", ""}, at()), std::invalid_argument);
}

TEST(SigV4, Encoding) {
  EXPECT_EQ(uri_encode("AZaz09-_.~ /+=&\xff"), "AZaz09-_.~%20%2F%2B%3D%26%FF");
  EXPECT_EQ(uri_encode("/a b/c", true), "/a%20b/c");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(amz_date(at()), "20261127T123600Z");
}

}  // namespace
