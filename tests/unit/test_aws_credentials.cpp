// AWS credentials and region as the AWS CLI finds them: the environment, the shared
// credentials file and the config file, in real files of a scratch HOME.
#include <rex/aws/credentials.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "support/test_helpers.hpp"

namespace {

using namespace rex::aws;
namespace fs = std::filesystem;

class AwsCredentials : public ::testing::Test {
 protected:
  rex::test::TempDir home;
  std::map<std::string, std::string> vars;

  void SetUp() override {
    vars["HOME"] = home.path();
    fs::create_directories(fs::path(home.path()) / ".aws");
  }
  EnvLookup env() const {
    return [vars = vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end())
        return std::nullopt;
      return it->second;
    };
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(home.path()) / ".aws" / name) << text;
  }
  std::string error_of(const std::string& profile = {}) {
    try {
      find_credentials(profile, env());
    } catch (const CredentialsError& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(AwsCredentials, TheEnvironmentComesFirst) {
  write("credentials", "[default]\naws_access_key_id = FILE\naws_secret_access_key = s\n");
  vars["AWS_ACCESS_KEY_ID"] = "ENV";
  vars["AWS_SECRET_ACCESS_KEY"] = "secret";
  vars["AWS_SESSION_TOKEN"] = "token";
  const Credentials c = find_credentials({}, env());
  EXPECT_EQ(c.access_key_id, "ENV");
  EXPECT_EQ(c.secret_access_key, "secret");
  EXPECT_EQ(c.session_token, "token");
  EXPECT_EQ(c.source, "environment");
  // A profile named explicitly skips the environment, as the CLI's --profile does.
  EXPECT_EQ(find_credentials("default", env()).access_key_id, "FILE");
}

TEST_F(AwsCredentials, HalfAKeyPairInTheEnvironmentIsNamed) {
  vars["AWS_ACCESS_KEY_ID"] = "ENV";
  EXPECT_EQ(error_of(), "the environment has AWS_ACCESS_KEY_ID but not AWS_SECRET_ACCESS_KEY");
}

TEST_F(AwsCredentials, ProfilesFromTheCredentialsFileThenTheConfigFile) {
  write("credentials",
        "# keys\n[default]\naws_access_key_id=DEF\naws_secret_access_key=d\n\n"
        "[work]\n  aws_access_key_id = WORK \n aws_secret_access_key = w\n"
        "aws_session_token = t\n");
  write("config",
        "[default]\nregion = eu-west-1\n[profile ci]\naws_access_key_id = CI\n"
        "aws_secret_access_key = c\nregion = us-east-2\ns3 =\n  max_concurrent_requests = 2\n");
  EXPECT_EQ(find_credentials({}, env()).access_key_id, "DEF");
  const Credentials work = find_credentials("work", env());
  EXPECT_EQ(work.access_key_id, "WORK");
  EXPECT_EQ(work.session_token, "t");
  EXPECT_EQ(work.source, (fs::path(home.path()) / ".aws/credentials").string() + ", profile work");
  vars["AWS_PROFILE"] = "ci";
  EXPECT_EQ(find_credentials({}, env()).access_key_id, "CI");
  EXPECT_EQ(find_region({}, env()), "us-east-2");
  EXPECT_EQ(find_region("default", env()), "eu-west-1");
  vars["AWS_DEFAULT_REGION"] = "ap-south-1";
  EXPECT_EQ(find_region({}, env()), "ap-south-1");
  vars["AWS_REGION"] = "sa-east-1";
  EXPECT_EQ(find_region({}, env()), "sa-east-1");
}

TEST_F(AwsCredentials, FilesNamedByTheEnvironment) {
  const fs::path other = fs::path(home.path()) / "elsewhere";
  std::ofstream(other) << "[default]\naws_access_key_id = OTHER\naws_secret_access_key = o\n";
  vars["AWS_SHARED_CREDENTIALS_FILE"] = other.string();
  EXPECT_EQ(find_credentials({}, env()).access_key_id, "OTHER");
}

TEST_F(AwsCredentials, WhatCannotBeUsedIsNamed) {
  const std::string credentials = (fs::path(home.path()) / ".aws/credentials").string();
  const std::string config = (fs::path(home.path()) / ".aws/config").string();
  EXPECT_EQ(error_of(),
            "no AWS credentials found (looked in the environment (AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY); " +
                credentials + " [default]; " + config + " [default])");
  EXPECT_EQ(error_of("nope"), "the AWS profile 'nope' was not found (looked in " + credentials +
                                  " [nope]; " + config + " [profile nope])");
  write("credentials", "[default]\naws_access_key_id = A\n");
  EXPECT_EQ(error_of(), credentials +
                            ", profile default: has aws_access_key_id but not "
                            "aws_secret_access_key");
  write("credentials", "[default]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = b\n");
  EXPECT_NE(error_of().find("uses role_arn, which rex does not support"), std::string::npos)
      << error_of();
  write("credentials", "[default]\nthis is not a setting\n");
  EXPECT_EQ(error_of(), credentials + ", line 2: expected `key = value` or [section]");
  write("credentials", "aws_access_key_id = A\n");
  EXPECT_EQ(error_of(), credentials + ", line 1: a setting before any [section]");
  EXPECT_THROW(find_region({}, env()), CredentialsError);
}

TEST(AwsIni, Dialect) {
  const IniFile f =
      parse_ini("; comment\n[a]\nk = v = w\n\t\n[ b ]\nx=1\nnested =\n  y = 2\nz = 3\r\n", "f");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f.at("a").at("k"), "v = w");
  EXPECT_EQ(f.at("b").at("x"), "1");
  EXPECT_EQ(f.at("b").count("y"), 0u);
  EXPECT_EQ(f.at("b").at("z"), "3");
  EXPECT_THROW(parse_ini("[]\n", "f"), CredentialsError);
  EXPECT_THROW(parse_ini("[a\n", "f"), CredentialsError);
  EXPECT_THROW(parse_ini("[a]\n= v\n", "f"), CredentialsError);
}

}  // namespace
