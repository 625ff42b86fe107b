// JSON mapping of the protocol types: defaults, tolerance, error messages and exact wire forms.
#include <rex/protocol/json.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace {

namespace json = boost::json;
using rex::parse_json;
using rex::ProtocolError;

// The ProtocolError message parse_json<T> raises for `text`, or "" when it decodes.
template <class T>
std::string error_of(std::string_view text) {
  try {
    (void)parse_json<T>(text);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

// Encoding `value` gives exactly `wire`, and decoding `wire` gives a value that encodes to it.
template <class T>
void expect_wire_form(const T& value, std::string_view wire) {
  const json::value expected = json::parse(wire);
  EXPECT_EQ(rex::to_json(value), expected);
  EXPECT_EQ(rex::to_json(rex::from_json<T>(expected)), expected);
}

TEST(ProtocolJson, MissingFieldsTakeDefaults) {
  const auto bash = parse_json<rex::BashAction>(R"({"command": "ls"})");
  EXPECT_EQ(bash.command, "ls");
  EXPECT_EQ(bash.session, "default");
  EXPECT_FALSE(bash.timeout);
  EXPECT_FALSE(bash.is_interactive_command);
  EXPECT_FALSE(bash.is_interactive_quit);
  EXPECT_EQ(bash.check, "raise");
  EXPECT_EQ(bash.error_msg, "");
  EXPECT_TRUE(bash.expect.empty());
  EXPECT_EQ(bash.action_type, "bash");
  EXPECT_FALSE(bash.no_output_timeout);
  EXPECT_FALSE(bash.max_output_bytes);

  const auto interrupt = parse_json<rex::BashInterruptAction>("{}");
  EXPECT_EQ(interrupt.session, "default");
  EXPECT_DOUBLE_EQ(interrupt.timeout, 0.2);
  EXPECT_EQ(interrupt.n_retry, 3);

  const auto create = parse_json<rex::CreateBashSessionRequest>("{}");
  EXPECT_TRUE(create.startup_source.empty());
  EXPECT_EQ(create.session, "default");
  EXPECT_EQ(create.session_type, "bash");
  EXPECT_DOUBLE_EQ(create.startup_timeout, 1.0);

  const auto command = parse_json<rex::Command>(R"({"command": "ls"})");
  EXPECT_FALSE(command.timeout);
  EXPECT_FALSE(command.shell);
  EXPECT_FALSE(command.check);
  EXPECT_FALSE(command.env);
  EXPECT_FALSE(command.cwd);
  EXPECT_FALSE(command.merge_output_streams);

  EXPECT_FALSE(parse_json<rex::UploadRequest>(R"({"source_path": "a", "target_path": "b"})").unzip);
  EXPECT_EQ(parse_json<rex::CloseBashSessionRequest>("{}").session, "default");
  EXPECT_TRUE(parse_json<rex::IsAliveResponse>("{}").is_alive);
}

TEST(ProtocolJson, UnknownFieldsAreIgnored) {
  const auto bash =
      parse_json<rex::BashAction>(R"({"command": "ls", "future": {"x": [1, 2]}, "n": null})");
  EXPECT_EQ(bash.command, "ls");
  EXPECT_NO_THROW((void)parse_json<rex::WriteFileResponse>(R"({"anything": 1})"));
}

TEST(ProtocolJson, WrongTypesNameTheField) {
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "timeout": "5"})"),
            "BashAction.timeout: expected a number or null, got string");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": 5})"),
            "BashAction.command: expected a string, got integer");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "session": null})"),
            "BashAction.session: expected a string, got null");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "is_interactive_command": "yes"})"),
            "BashAction.is_interactive_command: expected a boolean, got string");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "expect": "$"})"),
            "BashAction.expect: expected an array, got string");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "expect": ["$", 1]})"),
            "BashAction.expect[1]: expected a string, got integer");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "max_output_bytes": 1.5})"),
            "BashAction.max_output_bytes: expected an integer or null, got float");
  EXPECT_EQ(error_of<rex::BashInterruptAction>(R"({"n_retry": 3.0})"),
            "BashInterruptAction.n_retry: expected an integer, got float");
  EXPECT_EQ(error_of<rex::BashInterruptAction>(R"({"n_retry": 4294967296})"),
            "BashInterruptAction.n_retry: integer out of range");
  EXPECT_EQ(error_of<rex::BashInterruptAction>(R"({"timeout": 1e400})"),
            "BashInterruptAction.timeout: number out of range");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "timeout": -1e999})"),
            "BashAction.timeout: number out of range");
  EXPECT_EQ(error_of<rex::BashInterruptAction>(R"({"timeout": true})"),
            "BashInterruptAction.timeout: expected a number, got boolean");
  EXPECT_EQ(error_of<rex::CreateBashSessionRequest>(R"({"startup_source": {}})"),
            "CreateBashSessionRequest.startup_source: expected an array, got object");
  EXPECT_EQ(error_of<rex::Command>(R"({"command": 5})"),
            "Command.command: expected a string or an array of strings, got integer");
  EXPECT_EQ(error_of<rex::Command>(R"({"command": ["ls", 1]})"),
            "Command.command[1]: expected a string, got integer");
  EXPECT_EQ(error_of<rex::Command>(R"({"command": "ls", "env": []})"),
            "Command.env: expected an object or null, got array");
  EXPECT_EQ(error_of<rex::Command>(R"({"command": "ls", "env": {"A": 1}})"),
            "Command.env.A: expected a string, got integer");
  EXPECT_EQ(error_of<rex::ReadFileRequest>(R"({"path": "/a", "encoding": 8})"),
            "ReadFileRequest.encoding: expected a string or null, got integer");
  EXPECT_EQ(error_of<rex::UploadRequest>(R"({"source_path": "a", "target_path": "b", "unzip": 1})"),
            "UploadRequest.unzip: expected a boolean, got integer");
  EXPECT_EQ(error_of<rex::CommandResponse>(R"({"stdout": []})"),
            "CommandResponse.stdout: expected a string, got array");
}

TEST(ProtocolJson, IntegersAreAcceptedForNumbers) {
  EXPECT_EQ(parse_json<rex::BashAction>(R"({"command": "ls", "timeout": 5})").timeout, 5.0);
  EXPECT_DOUBLE_EQ(parse_json<rex::BashInterruptAction>(R"({"timeout": 1})").timeout, 1.0);
}

TEST(ProtocolJson, BodyMustBeAnObjectOfValidJson) {
  EXPECT_EQ(error_of<rex::BashAction>("[1]"), "BashAction: expected an object, got array");
  EXPECT_EQ(error_of<rex::CloseResponse>("null"), "CloseResponse: expected an object, got null");
  EXPECT_TRUE(error_of<rex::BashAction>(R"({"command": )").starts_with("invalid JSON: "));
  EXPECT_TRUE(error_of<rex::Action>("").starts_with("invalid JSON: "));
}

TEST(ProtocolJson, RequiredFieldsMustBePresent) {
  EXPECT_EQ(error_of<rex::BashAction>("{}"), "BashAction.command: required field missing");
  EXPECT_EQ(error_of<rex::Command>("{}"), "Command.command: required field missing");
  EXPECT_EQ(error_of<rex::ReadFileRequest>("{}"), "ReadFileRequest.path: required field missing");
  EXPECT_EQ(error_of<rex::WriteFileRequest>(R"({"path": "/a"})"),
            "WriteFileRequest.content: required field missing");
  EXPECT_EQ(error_of<rex::WriteFileRequest>(R"({"content": ""})"),
            "WriteFileRequest.path: required field missing");
  EXPECT_EQ(error_of<rex::UploadRequest>(R"({"target_path": "/b"})"),
            "UploadRequest.source_path: required field missing");
  EXPECT_EQ(error_of<rex::UploadRequest>(R"({"source_path": "/a"})"),
            "UploadRequest.target_path: required field missing");
  EXPECT_EQ(error_of<rex::DownloadRequest>(R"({"target_path": "/b"})"),
            "DownloadRequest.path: required field missing");
  EXPECT_EQ(error_of<rex::DownloadRequest>(R"({"path": "/a"})"),
            "DownloadRequest.target_path: required field missing");
  // Present but empty is fine: only absence is an error.
  EXPECT_EQ(error_of<rex::WriteFileRequest>(R"({"content": "", "path": ""})"), "");
}

TEST(ProtocolJson, EnumeratedStringsAreChecked) {
  for (const char* check : {"raise", "silent", "ignore"}) {
    const std::string body = std::string(R"({"command": "ls", "check": ")") + check + "\"}";
    EXPECT_EQ(parse_json<rex::BashAction>(body).check, check);
  }
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "check": "maybe"})"),
            R"(BashAction.check: expected one of "raise", "silent", "ignore", got "maybe")");
  EXPECT_EQ(error_of<rex::CreateBashSessionRequest>(R"({"session_type": "zsh"})"),
            R"(CreateBashSessionRequest.session_type: expected one of "bash", got "zsh")");
  EXPECT_EQ(error_of<rex::CloseBashSessionRequest>(R"({"session_type": "python"})"),
            R"(CloseBashSessionRequest.session_type: expected one of "bash", got "python")");
  EXPECT_EQ(error_of<rex::BashAction>(R"({"command": "ls", "action_type": "bash_interrupt"})"),
            R"(BashAction.action_type: expected one of "bash", got "bash_interrupt")");
}

TEST(ProtocolJson, NullMeansAbsentForOptionals) {
  const auto bash = parse_json<rex::BashAction>(
      R"({"command": "ls", "timeout": null, "no_output_timeout": null, "max_output_bytes": null})");
  EXPECT_FALSE(bash.timeout);
  EXPECT_FALSE(bash.no_output_timeout);
  EXPECT_FALSE(bash.max_output_bytes);

  const auto command =
      parse_json<rex::Command>(R"({"command": "ls", "timeout": null, "env": null, "cwd": null})");
  EXPECT_FALSE(command.timeout);
  EXPECT_FALSE(command.env);
  EXPECT_FALSE(command.cwd);

  const auto read =
      parse_json<rex::ReadFileRequest>(R"({"path": "/a", "encoding": null, "errors": "replace"})");
  EXPECT_FALSE(read.encoding);
  EXPECT_EQ(read.errors, "replace");

  EXPECT_FALSE(parse_json<rex::BashObservation>(R"({"exit_code": null})").exit_code);
  EXPECT_EQ(parse_json<rex::BashObservation>(R"({"exit_code": 2})").exit_code, 2);
}

TEST(ProtocolJson, CommandIsAStringOrAList) {
  const auto line = parse_json<rex::Command>(R"({"command": "echo hi", "shell": true})");
  ASSERT_TRUE(std::holds_alternative<std::string>(line.command));
  EXPECT_EQ(std::get<std::string>(line.command), "echo hi");

  const auto argv = parse_json<rex::Command>(R"({"command": ["echo", "hi"]})");
  ASSERT_TRUE(std::holds_alternative<std::vector<std::string>>(argv.command));
  EXPECT_EQ(std::get<std::vector<std::string>>(argv.command),
            (std::vector<std::string>{"echo", "hi"}));

  EXPECT_EQ(rex::to_json(line).at("command"), json::value("echo hi"));
  EXPECT_EQ(rex::to_json(argv).at("command"), json::parse(R"(["echo", "hi"])"));
}

TEST(ProtocolJson, StdoutAndStderrDropTheUnderscore) {
  const auto response =
      parse_json<rex::CommandResponse>(R"({"stdout": "out", "stderr": "err", "exit_code": 0})");
  EXPECT_EQ(response.stdout_, "out");
  EXPECT_EQ(response.stderr_, "err");
  EXPECT_EQ(response.exit_code, 0);

  const json::object encoded = rex::to_json(response).as_object();
  EXPECT_EQ(encoded.at("stdout"), json::value("out"));
  EXPECT_EQ(encoded.at("stderr"), json::value("err"));
  EXPECT_FALSE(encoded.contains("stdout_"));
  EXPECT_FALSE(encoded.contains("stderr_"));
}

TEST(ProtocolJson, ActionDispatchesOnActionType) {
  const auto untagged = parse_json<rex::Action>(R"({"command": "ls"})");
  ASSERT_TRUE(std::holds_alternative<rex::BashAction>(untagged));
  EXPECT_EQ(std::get<rex::BashAction>(untagged).command, "ls");

  const auto bash = parse_json<rex::Action>(R"({"action_type": "bash", "command": "pwd"})");
  ASSERT_TRUE(std::holds_alternative<rex::BashAction>(bash));
  EXPECT_EQ(std::get<rex::BashAction>(bash).command, "pwd");

  const auto interrupt =
      parse_json<rex::Action>(R"({"action_type": "bash_interrupt", "session": "s", "n_retry": 5})");
  ASSERT_TRUE(std::holds_alternative<rex::BashInterruptAction>(interrupt));
  EXPECT_EQ(std::get<rex::BashInterruptAction>(interrupt).n_retry, 5);
  EXPECT_EQ(rex::session_of(interrupt), "s");

  EXPECT_EQ(error_of<rex::Action>(R"({"action_type": "python", "command": "ls"})"),
            R"(Action.action_type: unknown action type "python")");
  EXPECT_EQ(error_of<rex::Action>(R"({"action_type": 1})"),
            "Action.action_type: expected a string, got integer");
  EXPECT_EQ(error_of<rex::Action>(R"("ls")"), "Action: expected an object, got string");
  // The chosen alternative's own rules still apply.
  EXPECT_EQ(error_of<rex::Action>(R"({"action_type": "bash"})"),
            "BashAction.command: required field missing");

  EXPECT_EQ(rex::to_json(interrupt).at("action_type"), json::value("bash_interrupt"));
  EXPECT_EQ(rex::to_json(untagged).at("action_type"), json::value("bash"));
}

TEST(ProtocolJson, EncodingWritesEveryFieldWithNullForEmptyOptionals) {
  expect_wire_form(rex::BashAction{.command = "ls"}, R"({
    "command": "ls", "session": "default", "timeout": null, "is_interactive_command": false,
    "is_interactive_quit": false, "check": "raise", "error_msg": "", "expect": [],
    "action_type": "bash", "no_output_timeout": null, "max_output_bytes": null})");
  expect_wire_form(rex::Command{.command = "ls"}, R"({
    "command": "ls", "timeout": null, "shell": false, "check": false, "error_msg": "",
    "env": null, "cwd": null, "merge_output_streams": false})");
}

TEST(ProtocolJson, RoundTripsSessionTypes) {
  expect_wire_form(rex::CreateBashSessionRequest{.startup_source = {"/root/.bashrc", "/env"},
                                                 .session = "s1",
                                                 .session_type = "bash",
                                                 .startup_timeout = 2.5},
                   R"({"startup_source": ["/root/.bashrc", "/env"], "session": "s1",
                       "session_type": "bash", "startup_timeout": 2.5})");
  expect_wire_form(rex::CreateBashSessionResponse{.output = "hello\n"},
                   R"({"output": "hello\n", "session_type": "bash"})");
  expect_wire_form(rex::CloseBashSessionRequest{.session = "s1"},
                   R"({"session": "s1", "session_type": "bash"})");
  expect_wire_form(rex::CloseBashSessionResponse{}, R"({"session_type": "bash"})");
}

TEST(ProtocolJson, RoundTripsActionTypes) {
  const rex::BashAction bash{.command = "vim",
                             .session = "s2",
                             .timeout = 1.5,
                             .is_interactive_command = true,
                             .is_interactive_quit = true,
                             .check = "silent",
                             .error_msg = "failed",
                             .expect = {"$ ", "> "},
                             .no_output_timeout = 0.5,
                             .max_output_bytes = 1 << 20};
  constexpr std::string_view kBashWire = R"({
    "command": "vim", "session": "s2", "timeout": 1.5, "is_interactive_command": true,
    "is_interactive_quit": true, "check": "silent", "error_msg": "failed",
    "expect": ["$ ", "> "], "action_type": "bash", "no_output_timeout": 0.5,
    "max_output_bytes": 1048576})";
  expect_wire_form(bash, kBashWire);
  expect_wire_form(rex::Action{bash}, kBashWire);

  const rex::BashInterruptAction interrupt{
      .session = "s3", .timeout = 0.75, .n_retry = 7, .expect = {"#"}};
  constexpr std::string_view kInterruptWire = R"({
    "session": "s3", "timeout": 0.75, "n_retry": 7, "expect": ["#"],
    "action_type": "bash_interrupt"})";
  expect_wire_form(interrupt, kInterruptWire);
  expect_wire_form(rex::Action{interrupt}, kInterruptWire);

  expect_wire_form(
      rex::BashObservation{
          .output = "x", .exit_code = 1, .failure_reason = "why", .expect_string = "$ "},
      R"({"output": "x", "exit_code": 1, "failure_reason": "why",
                       "expect_string": "$ ", "session_type": "bash"})");
  expect_wire_form(rex::BashObservation{},
                   R"({"output": "", "exit_code": null, "failure_reason": "",
                       "expect_string": "", "session_type": "bash"})");
}

TEST(ProtocolJson, RoundTripsCommandTypes) {
  expect_wire_form(
      rex::Command{.command = std::vector<std::string>{"env"},
                   .timeout = 2.5,
                   .shell = true,
                   .check = true,
                   .error_msg = "oops",
                   .env = std::map<std::string, std::string>{{"A", "1"}, {"PATH", "/bin"}},
                   .cwd = "/tmp",
                   .merge_output_streams = true},
      R"({"command": ["env"], "timeout": 2.5, "shell": true, "check": true, "error_msg": "oops",
          "env": {"A": "1", "PATH": "/bin"}, "cwd": "/tmp", "merge_output_streams": true})");
  expect_wire_form(rex::CommandResponse{.stdout_ = "o", .stderr_ = "e", .exit_code = 3},
                   R"({"stdout": "o", "stderr": "e", "exit_code": 3})");
  expect_wire_form(rex::CommandResponse{}, R"({"stdout": "", "stderr": "", "exit_code": null})");
}

TEST(ProtocolJson, RoundTripsFileTypes) {
  expect_wire_form(rex::ReadFileRequest{.path = "/a", .encoding = "latin-1", .errors = "replace"},
                   R"({"path": "/a", "encoding": "latin-1", "errors": "replace"})");
  expect_wire_form(rex::ReadFileRequest{.path = "/a"},
                   R"({"path": "/a", "encoding": null, "errors": null})");
  expect_wire_form(rex::ReadFileResponse{.content = "text\n"}, R"({"content": "text\n"})");
  expect_wire_form(rex::WriteFileRequest{.content = "c", .path = "/p"},
                   R"({"content": "c", "path": "/p"})");
  expect_wire_form(rex::WriteFileResponse{}, "{}");
  expect_wire_form(rex::UploadRequest{.source_path = "/s", .target_path = "/t", .unzip = true},
                   R"({"source_path": "/s", "target_path": "/t", "unzip": true})");
  expect_wire_form(rex::UploadResponse{}, "{}");
  expect_wire_form(rex::DownloadRequest{.path = "/s", .target_path = "/t"},
                   R"({"path": "/s", "target_path": "/t"})");
  expect_wire_form(rex::DownloadResponse{}, "{}");
}

TEST(ProtocolJson, RoundTripsRuntimeResponses) {
  expect_wire_form(rex::IsAliveResponse{.is_alive = false, .message = "starting"},
                   R"({"is_alive": false, "message": "starting"})");
  expect_wire_form(rex::CloseResponse{}, "{}");
}

}  // namespace
