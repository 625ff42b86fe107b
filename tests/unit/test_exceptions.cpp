// Exception transfer: exact class paths, and to_wire / throw_wire rebuilding the same C++ type.
#include <rex/protocol/exceptions.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <exception>
#include <string>
#include <typeindex>
#include <typeinfo>

namespace {

namespace json = boost::json;
using rex::SwerexException;

// What throw_wire(wire) throws, caught as the base type; its dynamic type is kept.
std::exception_ptr thrown_by(const json::object& wire) {
  try {
    rex::throw_wire(wire);
  } catch (...) {
    return std::current_exception();
  }
}

// Runs `check` on the SwerexException that throw_wire(wire) throws.
template <class Check>
void expect_thrown(const json::object& wire, Check check) {
  try {
    std::rethrow_exception(thrown_by(wire));
  } catch (const SwerexException& e) {
    check(e);
  } catch (...) {
    ADD_FAILURE() << "throw_wire threw something that is not a SwerexException";
  }
}

TEST(Exceptions, ClassPathsMatchTheProtocol) {
  EXPECT_EQ(SwerexException("").class_path(), "swerex.exceptions.SwerexException");
  EXPECT_EQ(rex::CommandTimeoutError("").class_path(), "swerex.exceptions.CommandTimeoutError");
  EXPECT_EQ(rex::NonZeroExitCodeError("").class_path(), "swerex.exceptions.NonZeroExitCodeError");
  EXPECT_EQ(rex::BashIncorrectSyntaxError("").class_path(),
            "swerex.exceptions.BashIncorrectSyntaxError");
  EXPECT_EQ(rex::SessionExistsError("").class_path(), "swerex.exceptions.SessionExistsError");
  EXPECT_EQ(rex::SessionDoesNotExistError("").class_path(),
            "swerex.exceptions.SessionDoesNotExistError");
  EXPECT_EQ(rex::NoExitCodeError("").class_path(), "swerex.exceptions.NoExitCodeError");
  EXPECT_EQ(rex::PexpectTimeout("").class_path(), "pexpect.exceptions.TIMEOUT");
  EXPECT_EQ(rex::FileNotFoundError("").class_path(), "builtins.FileNotFoundError");
  // Not in the protocol's table, but real SWE-ReX / Python class paths.
  EXPECT_EQ(rex::SessionNotInitializedError("").class_path(),
            "swerex.exceptions.SessionNotInitializedError");
  EXPECT_EQ(rex::IsADirectoryError("").class_path(), "builtins.IsADirectoryError");
  EXPECT_EQ(rex::NotADirectoryError("").class_path(), "builtins.NotADirectoryError");
  EXPECT_EQ(rex::FileExistsError("").class_path(), "builtins.FileExistsError");
  EXPECT_EQ(rex::PermissionError("").class_path(), "builtins.PermissionError");
  EXPECT_EQ(rex::ValueError("").class_path(), "builtins.ValueError");
  EXPECT_EQ(rex::LookupError("").class_path(), "builtins.LookupError");
  EXPECT_EQ(rex::OSError("").class_path(), "builtins.OSError");
  // rex-only types travel as the base class, the only one stock clients can import.
  EXPECT_EQ(rex::SessionDiedError("").class_path(), "swerex.exceptions.SwerexException");
  EXPECT_EQ(rex::SessionBusyError("").class_path(), "swerex.exceptions.SwerexException");
}

TEST(Exceptions, WireFormHasTheFourFields) {
  const rex::BashIncorrectSyntaxError e(
      "syntax error", json::object{{"bash_stdout", ""}, {"bash_stderr", "unexpected EOF"}});
  EXPECT_EQ(rex::to_wire(e), json::parse(R"({
    "message": "syntax error", "class_path": "swerex.exceptions.BashIncorrectSyntaxError",
    "traceback": "", "extra_info": {"bash_stdout": "", "bash_stderr": "unexpected EOF"}})"));
}

template <class E>
void expect_round_trip() {
  SCOPED_TRACE(typeid(E).name());
  const E original("it broke", json::object{{"output", "partial"}, {"exit_code", 2}});
  expect_thrown(rex::to_wire(original), [&](const SwerexException& e) {
    EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(E)));
    EXPECT_STREQ(e.what(), "it broke");
    EXPECT_EQ(e.class_path(), original.class_path());
    EXPECT_EQ(e.extra_info(), original.extra_info());
  });
}

TEST(Exceptions, RoundTripKeepsTypeMessageAndExtraInfo) {
  expect_round_trip<SwerexException>();
  expect_round_trip<rex::CommandTimeoutError>();
  expect_round_trip<rex::NonZeroExitCodeError>();
  expect_round_trip<rex::BashIncorrectSyntaxError>();
  expect_round_trip<rex::SessionExistsError>();
  expect_round_trip<rex::SessionDoesNotExistError>();
  expect_round_trip<rex::SessionNotInitializedError>();
  expect_round_trip<rex::NoExitCodeError>();
  expect_round_trip<rex::PexpectTimeout>();
  expect_round_trip<rex::FileNotFoundError>();
  expect_round_trip<rex::IsADirectoryError>();
  expect_round_trip<rex::FileExistsError>();
  expect_round_trip<rex::NotADirectoryError>();
  expect_round_trip<rex::PermissionError>();
  expect_round_trip<rex::ValueError>();
  expect_round_trip<rex::LookupError>();
  expect_round_trip<rex::OSError>();
  expect_round_trip<rex::SessionDiedError>();
  expect_round_trip<rex::SessionBusyError>();
}

TEST(Exceptions, RexOnlyTypesAreTaggedInExtraInfo) {
  const rex::SessionDiedError died("shell exited", json::object{{"session", "s"}});
  const json::object wire = rex::to_wire(died);
  EXPECT_EQ(wire.at("class_path"), json::value("swerex.exceptions.SwerexException"));
  EXPECT_EQ(wire.at("extra_info"),
            json::parse(R"({"session": "s", "rex_error": "SessionDiedError"})"));
  EXPECT_FALSE(died.extra_info().contains("rex_error"));  // to_wire leaves the exception alone

  const json::object busy = rex::to_wire(rex::SessionBusyError("busy"));
  EXPECT_EQ(busy.at("extra_info"), json::parse(R"({"rex_error": "SessionBusyError"})"));

  // A stock SWE-ReX exception carries no tag.
  EXPECT_TRUE(rex::to_wire(SwerexException("x")).at("extra_info").as_object().empty());
}

TEST(Exceptions, RexErrorTagRebuildsTheRexType) {
  expect_thrown(
      json::parse(R"({"message": "busy", "class_path": "swerex.exceptions.SwerexException",
                                "traceback": "", "extra_info": {"rex_error": "SessionBusyError"}})")
          .as_object(),
      [](const SwerexException& e) {
        EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(rex::SessionBusyError)));
        EXPECT_TRUE(e.extra_info().empty());
      });
  // The tag only counts under the base class path, and an unknown tag is kept for diagnosis.
  expect_thrown(json::parse(R"({"message": "m", "class_path": "swerex.exceptions.NoExitCodeError",
                                "traceback": "", "extra_info": {"rex_error": "SessionDiedError"}})")
                    .as_object(),
                [](const SwerexException& e) {
                  EXPECT_EQ(std::type_index(typeid(e)),
                            std::type_index(typeid(rex::NoExitCodeError)));
                });
  expect_thrown(json::parse(R"({"message": "m", "class_path": "swerex.exceptions.SwerexException",
                                "traceback": "", "extra_info": {"rex_error": "FutureError"}})")
                    .as_object(),
                [](const SwerexException& e) {
                  EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(SwerexException)));
                  EXPECT_EQ(e.extra_info(), json::parse(R"({"rex_error": "FutureError"})"));
                });
}

// Found by fuzz/fuzz_protocol_json: a rex-only tag under another class path used to stay in
// extra_info, so relaying the exception (a server in front of a remote runtime) turned it into
// SessionDiedError on the next hop.
TEST(Exceptions, RexOnlyTagUnderAnotherClassPathIsDroppedNotRelayed) {
  const auto wire =
      json::parse(R"({"message": "died", "class_path": "swerex.excpetions.SwerexException",
                      "extra_info": {"rex_error": "SessionDiedError"}})")
          .as_object();
  expect_thrown(wire, [](const SwerexException& first) {
    EXPECT_EQ(std::type_index(typeid(first)), std::type_index(typeid(SwerexException)));
    EXPECT_EQ(first.extra_info(),
              json::parse(R"({"class_path": "swerex.excpetions.SwerexException"})"));
    expect_thrown(rex::to_wire(first), [&](const SwerexException& relayed) {
      EXPECT_EQ(std::type_index(typeid(relayed)), std::type_index(typeid(SwerexException)));
      EXPECT_EQ(relayed.extra_info(), first.extra_info());
    });
  });
}

// Found by fuzz/fuzz_protocol_json: what() ends at a NUL byte, and the wire message used to.
TEST(Exceptions, MessageWithNulTravelsWhole) {
  const std::string message("output: a\0b", 11);
  const rex::NonZeroExitCodeError error(message);
  EXPECT_EQ(error.message(), message);
  const json::object wire = rex::to_wire(error);
  EXPECT_EQ(wire.at("message").as_string(), message);
  expect_thrown(wire, [&](const SwerexException& e) { EXPECT_EQ(e.message(), message); });
}

TEST(Exceptions, UnknownClassPathBecomesSwerexException) {
  // What a Python SWE-ReX server sends for an exception rex has no type for.
  expect_thrown(json::parse(R"({"message": "'x'", "class_path": "builtins.KeyError",
                                "traceback": "Traceback (most recent call last): ...",
                                "extra_info": {"key": "x"}})")
                    .as_object(),
                [](const SwerexException& e) {
                  EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(SwerexException)));
                  EXPECT_STREQ(e.what(), "'x'");
                  EXPECT_EQ(e.extra_info(),
                            json::parse(R"({"key": "x", "class_path": "builtins.KeyError"})"));
                });
}

TEST(Exceptions, MalformedWireFormsBecomeSwerexException) {
  const auto expect_malformed = [](std::string_view wire, std::string_view problem) {
    SCOPED_TRACE(wire);
    expect_thrown(json::parse(wire).as_object(), [&](const SwerexException& e) {
      EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(SwerexException)));
      EXPECT_EQ(e.what(), "malformed exception transfer: " + std::string(problem));
      EXPECT_EQ(e.extra_info().at("wire"), json::parse(wire));
    });
  };
  expect_malformed(R"({"class_path": "builtins.OSError"})",
                   R"("message" is missing or not a string)");
  expect_malformed(R"({"message": 1, "class_path": "builtins.OSError"})",
                   R"("message" is missing or not a string)");
  expect_malformed(R"({"message": "m"})", R"("class_path" is missing or not a string)");
  expect_malformed(R"({"message": "m", "class_path": "builtins.OSError", "extra_info": [1]})",
                   R"("extra_info" is not an object)");

  // extra_info and traceback may be absent: only message and class path are needed.
  expect_thrown(json::parse(R"({"message": "m", "class_path": "builtins.OSError"})").as_object(),
                [](const SwerexException& e) {
                  EXPECT_EQ(std::type_index(typeid(e)), std::type_index(typeid(rex::OSError)));
                  EXPECT_TRUE(e.extra_info().empty());
                });
}

}  // namespace
