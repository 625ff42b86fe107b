// Modal's settings file (~/.modal.toml) as Modal's client reads it: the TOML it holds, the
// profile chosen (MODAL_PROFILE, the active one, "default"), and the files refused, in real
// files of a scratch HOME.
#include <rex/backends/modal/modal_profile.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "support/test_helpers.hpp"

namespace {

using namespace rex;
namespace fs = std::filesystem;

std::string refusal(std::string_view text) {
  try {
    parse_modal_toml(text, "t.toml");
  } catch (const DeploymentConfigError& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(ModalToml, ReadsWhatModalsClientWrites) {
  const ModalToml t = parse_modal_toml(
      "# written by modal token set\n"
      "[default]\n"
      "token_id = \"ak-1\"\n"
      "token_secret = \"as-1\"\n"
      "active = true\n"
      "\n"
      "[\"other team\"]   # a quoted name\n"
      "token_id = 'ak-2'\r\n"
      "server_url = \"http://127.0.0.1:1\\u0041\"\n"
      "  loglevel = \"DEBUG\"\n"
      "logs_timeout = 10\n"
      "max_throttle_wait = 1.5e1\n",
      "t.toml");
  ASSERT_EQ(t.size(), 2u);
  const auto& d = t.at("default");
  EXPECT_EQ(d.at("token_id").text, "ak-1");
  EXPECT_EQ(d.at("active").kind, ModalTomlValue::Kind::boolean);
  EXPECT_TRUE(d.at("active").flag);
  const auto& o = t.at("other team");
  EXPECT_EQ(o.at("token_id").text, "ak-2");
  EXPECT_EQ(o.at("server_url").text, "http://127.0.0.1:1A");
  EXPECT_EQ(o.at("loglevel").text, "DEBUG");
  EXPECT_EQ(o.at("logs_timeout").kind, ModalTomlValue::Kind::number);
  EXPECT_EQ(o.at("max_throttle_wait").text, "1.5e1");
  EXPECT_TRUE(parse_modal_toml("", "t.toml").empty());
  EXPECT_EQ(
      parse_modal_toml("[a]\nx = \"\\t\\\"\\\\\\U0001F600\"\n", "t.toml").at("a").at("x").text,
      "\t\"\\\xF0\x9F\x98\x80");
}

TEST(ModalToml, RefusesWhatItDoesNotReadNamingTheLine) {
  EXPECT_EQ(refusal("token_id = \"x\"\n"),
            "t.toml, line 1: token_id is outside a [profile] table: Modal's settings are tables, "
            "one per profile");
  EXPECT_EQ(refusal("[a]\nx = [1, 2]\n"),
            "t.toml, line 2: arrays and inline tables are not read here (strings, booleans and "
            "numbers are)");
  EXPECT_EQ(refusal("[a]\n\nx = \"\"\"\nlong\n\"\"\"\n"),
            "t.toml, line 3: multi-line strings are not read here");
  EXPECT_EQ(refusal("[a.b]\n"),
            "t.toml, line 1: dotted names are not read here (a profile is one table of plain "
            "keys)");
  EXPECT_EQ(refusal("[[a]]\n"),
            "t.toml, line 1: arrays of tables are not read here (a profile is one [name] table)");
  EXPECT_EQ(refusal("[a]\n[a]\n"), "t.toml, line 2: the table [a] is there twice");
  EXPECT_EQ(refusal("[a]\nx = 1\nx = 2\n"), "t.toml, line 3: the key x is there twice");
  EXPECT_EQ(refusal("[a]\nx = \"open\n"), "t.toml, line 2: a string without its closing quote");
  EXPECT_EQ(refusal("[a]\nx = 1979-05-27\n"),
            "t.toml, line 2: 1979-05-27 is not a string, a boolean or a number");
  EXPECT_EQ(refusal("[a]\nx = \"\\q\"\n"), "t.toml, line 2: an unknown escape \\q in a string");
  EXPECT_EQ(refusal("[a]\nx = \"\\uD800\"\n"),
            "t.toml, line 2: U+D800 is not a Unicode scalar value");
  EXPECT_EQ(refusal("[a]\nx = \"a\" b\n"), "t.toml, line 2: unexpected text after the value: b");
  EXPECT_EQ(refusal("[a]\nx =\n"), "t.toml, line 2: a key without a value");
  EXPECT_EQ(refusal("[a]\n= 1\n"), "t.toml, line 2: expected a name before '='");
  EXPECT_EQ(refusal("[a]\nx = \"\x01\"\n"),
            "t.toml, line 2: a control character (0x01) in a string");
  EXPECT_EQ(refusal("[a]\nx = 1__0\n"),
            "t.toml, line 2: 1__0 is not a string, a boolean or a number");
}

class ModalProfileFile : public ::testing::Test {
 protected:
  rex::test::TempDir home;
  std::map<std::string, std::string> vars;

  void SetUp() override { vars["HOME"] = home.path(); }
  EnvLookup env() const {
    return [vars = vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end())
        return std::nullopt;
      return it->second;
    };
  }
  std::string file() const { return (fs::path(home.path()) / ".modal.toml").string(); }
  void write(const std::string& text) const { std::ofstream(file()) << text; }
  std::string error_of() const {
    try {
      find_modal_profile(env());
    } catch (const DeploymentConfigError& e) {
      return e.what();
    }
    return "(found)";
  }
};

TEST_F(ModalProfileFile, NoFileIsNoProfile) {
  EXPECT_FALSE(find_modal_profile(env()).has_value());
  vars.erase("HOME");
  EXPECT_FALSE(find_modal_profile(env()).has_value());
}

TEST_F(ModalProfileFile, TheActiveProfileElseDefaultElseMODAL_PROFILE) {
  write("[default]\ntoken_id = \"ak-d\"\n[work]\ntoken_id = \"ak-w\"\nactive = true\n");
  auto p = find_modal_profile(env());
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "work");
  EXPECT_EQ(p->file, file());
  EXPECT_EQ(p->settings.at("token_id"), "ak-w");
  vars["MODAL_PROFILE"] = "default";
  EXPECT_EQ(find_modal_profile(env())->settings.at("token_id"), "ak-d");
  vars.erase("MODAL_PROFILE");
  write("[default]\ntoken_id = \"ak-d\"\n");
  EXPECT_EQ(find_modal_profile(env())->name, "default");
  // A string "true" is not an active mark, as in Modal's client.
  write("[default]\ntoken_id = \"ak-d\"\n[x]\nactive = \"true\"\n");
  EXPECT_NE(error_of().find("no profile is active"), std::string::npos) << error_of();
}

TEST_F(ModalProfileFile, MODAL_CONFIG_PATHAndMODAL_IS_REMOTE) {
  const std::string other = (fs::path(home.path()) / "elsewhere.toml").string();
  std::ofstream(other) << "[default]\ntoken_id = \"ak-e\"\n";
  write("[default]\ntoken_id = \"ak-home\"\n");
  vars["MODAL_CONFIG_PATH"] = other;
  EXPECT_EQ(find_modal_profile(env())->settings.at("token_id"), "ak-e");
  vars["MODAL_IS_REMOTE"] = "1";
  EXPECT_FALSE(find_modal_profile(env()).has_value());
}

TEST_F(ModalProfileFile, FilesModalsClientRefusesAreRefusedNamingTheFile) {
  write("[a]\nactive = true\n[b]\nactive = true\n");
  EXPECT_EQ(error_of(), "modal: " + file() +
                            ": more than one profile is active (a, b): mark one with `active = "
                            "true`");
  write("[a]\ntoken_id = \"1\"\n[b]\ntoken_id = \"2\"\n");
  EXPECT_EQ(error_of(), "modal: " + file() +
                            ": no profile is active among its 2: set MODAL_PROFILE, or mark one "
                            "with `active = true` (`modal profile activate NAME`)");
  vars["MODAL_PROFILE"] = "c";
  EXPECT_EQ(error_of(), "modal: MODAL_PROFILE is c, and " + file() + " has no such profile");
  vars["MODAL_PROFILE"] = "b";
  EXPECT_EQ(find_modal_profile(env())->settings.at("token_id"), "2");
  write("[a]\ntoken_id = [\"1\"]\n");
  EXPECT_EQ(error_of(), file() +
                            ", line 2: arrays and inline tables are not read here (strings, "
                            "booleans and numbers are)");
}

}  // namespace
