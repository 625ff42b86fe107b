// The registry: built-in environments, environment files (every field, every refusal with its
// whole message), a registry directory with environments and agents/tools/prompts data, and
// the conversion of data files to JSON.
#include <rex/gateway/registry.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>

#include "support/test_helpers.hpp"

namespace rex::gateway {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

Environment parse_yaml(std::string_view text, std::string_view stem = "py") {
  return parse_environment(text, "envs/py.yaml", stem);
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const GatewayConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string env_error(std::string_view text, std::string_view stem = "py") {
  return error_of([&] { parse_yaml(text, stem); });
}

std::string data_error(std::string_view text, std::string_view extension = ".yaml") {
  const std::string source = "tools/t" + std::string(extension);
  return error_of([&] { parse_data_file(text, source, extension); });
}

// Writes `content` at `relative` under `dir`, making the folders on the way.
void put(const test::TempDir& dir, const std::string& relative, const std::string& content) {
  fs::create_directories(fs::path(dir.path() + "/" + relative).parent_path());
  dir.file(relative, content);
}

constexpr std::string_view kKnownEnvironments =
    "known: name, description, provider, image, template, memory, cpus, network, env, "
    "working_dir, mounts, idle_timeout, max_lifetime, collect, spares, user, start_cmd, "
    "ready_cmd, code_interpreter";
constexpr std::string_view kNameRule =
    "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit";

TEST(Registry, BuiltInsWithoutADirectory) {
  const Registry registry;
  const Environment* local = registry.find("local");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->provider, "local");
  EXPECT_EQ(local->image, "");
  EXPECT_EQ(local->idle_timeout, 600);
  EXPECT_EQ(local->max_lifetime, 3600);
  EXPECT_EQ(local->spares, 2u);
  const Environment* python = registry.find("Python3");
  ASSERT_NE(python, nullptr);
  EXPECT_EQ(python->provider, "docker");
  EXPECT_EQ(python->image, "rex-python:3.11");
  EXPECT_NE(python->description.find("python3"), std::string::npos) << python->description;
  EXPECT_EQ(python->idle_timeout, 600);
  EXPECT_EQ(python->max_lifetime, 3600);
  EXPECT_EQ(python->spares, 0u);
  EXPECT_EQ(registry.find("python3"), nullptr);  // exact names
  EXPECT_EQ(registry.find(""), nullptr);
  const auto all = registry.environments();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->name, "Python3");
  EXPECT_EQ(all[1]->name, "code-interpreter-v1");
  EXPECT_EQ(all[2]->name, "local");
  EXPECT_TRUE(all[1]->code_interpreter);
  EXPECT_EQ(all[1]->image, "rex-code-interpreter:latest");
  for (std::string_view kind : {"agents", "tools", "prompts", "other"})
    EXPECT_TRUE(registry.data(kind).empty()) << kind;

  EXPECT_EQ(Registry("my/python:3.12").find("Python3")->image, "my/python:3.12");
}

TEST(Registry, EveryEnvironmentField) {
  const Environment env = parse_yaml(R"(name: python-data
description: Python 3 with numpy
provider: docker
image: rex-python:3.11
template: code-interpreter-v1
memory: 2g
cpus: 1.5
network: none
env: {PYTHONUNBUFFERED: "1", DEBUG: true, LEVEL: 3, EMPTY: ""}
working_dir: /work
mounts: ["/data:/data:ro"]
idle_timeout: 300
max_lifetime: 7200
collect: ["/work/out/*.csv", "/work/report.html"]
spares: 3
user: analyst
start_cmd: jupyter lab
ready_cmd: curl -fs localhost:8888
code_interpreter: true
)");
  EXPECT_EQ(env.name, "python-data");
  EXPECT_EQ(env.description, "Python 3 with numpy");
  EXPECT_EQ(env.provider, "docker");
  EXPECT_EQ(env.image, "rex-python:3.11");
  EXPECT_EQ(env.e2b_template, "code-interpreter-v1");
  EXPECT_EQ(env.memory, "2g");
  EXPECT_EQ(env.cpus, 1.5);
  EXPECT_EQ(env.network, "none");
  EXPECT_EQ(env.env,
            (std::map<std::string, std::string>{
                {"PYTHONUNBUFFERED", "1"}, {"DEBUG", "true"}, {"LEVEL", "3"}, {"EMPTY", ""}}));
  EXPECT_EQ(env.working_dir, "/work");
  EXPECT_EQ(env.mounts, (std::vector<std::string>{"/data:/data:ro"}));
  EXPECT_EQ(env.idle_timeout, 300);
  EXPECT_EQ(env.max_lifetime, 7200);
  EXPECT_EQ(env.collect, (std::vector<std::string>{"/work/out/*.csv", "/work/report.html"}));
  EXPECT_EQ(env.spares, 3u);
  EXPECT_EQ(env.user, "analyst");
  EXPECT_EQ(env.start_cmd, "jupyter lab");
  EXPECT_EQ(env.ready_cmd, "curl -fs localhost:8888");

  // Every field under its own name (json::object compares regardless of order).
  EXPECT_EQ(env.to_json(), json::parse(R"({
    "name": "python-data", "description": "Python 3 with numpy", "provider": "docker",
    "image": "rex-python:3.11", "template": "code-interpreter-v1", "memory": "2g", "cpus": 1.5,
    "network": "none",
    "env": {"DEBUG": "true", "EMPTY": "", "LEVEL": "3", "PYTHONUNBUFFERED": "1"},
    "working_dir": "/work", "mounts": ["/data:/data:ro"], "idle_timeout": 300.0,
    "max_lifetime": 7200.0, "collect": ["/work/out/*.csv", "/work/report.html"],
    "spares": 3, "user": "analyst", "start_cmd": "jupyter lab",
    "ready_cmd": "curl -fs localhost:8888", "code_interpreter": true})")
                               .as_object());
}

TEST(Registry, DefaultsAndTheFileStem) {
  for (std::string_view text : {"", "# just a comment\n", "~\n"}) {
    const Environment env = parse_yaml(text, "my-env");
    EXPECT_EQ(env.name, "my-env");
    EXPECT_EQ(env.provider, "local");
    EXPECT_FALSE(env.memory);
    EXPECT_FALSE(env.cpus);
    EXPECT_EQ(env.idle_timeout, 600);
    EXPECT_EQ(env.max_lifetime, 3600);
    const json::object o = env.to_json();
    EXPECT_TRUE(o.at("memory").is_null());
    EXPECT_TRUE(o.at("cpus").is_null());
  }
  const Environment env = parse_yaml("memory: ~\ncpus: null\nenv:\nmounts:\ncollect: []\n", "x");
  EXPECT_FALSE(env.memory);
  EXPECT_FALSE(env.cpus);
  EXPECT_TRUE(env.env.empty());
  EXPECT_TRUE(env.mounts.empty());
  EXPECT_EQ(parse_yaml("max_lifetime: 0\nidle_timeout: 0\n").max_lifetime, 0);
  EXPECT_EQ(parse_yaml("memory: 1073741824\n").memory, "1073741824");
}

TEST(Registry, EnvironmentFieldErrors) {
  // The brief's example, whole.
  EXPECT_EQ(env_error("name: py\nimage: x\nidle_timeout: soon\n"),
            R"(envs/py.yaml:3: idle_timeout: expected a number of seconds, got "soon")");
  EXPECT_EQ(env_error("image: x\nidle_timout: 5\n"),
            "envs/py.yaml:2: idle_timout: unknown field (" + std::string(kKnownEnvironments) + ")");
  EXPECT_EQ(env_error("max_lifetime: -1\n"),
            "envs/py.yaml:1: max_lifetime: must not be negative, got -1");
  EXPECT_EQ(env_error("max_lifetime: .inf\n"),
            "envs/py.yaml:1: max_lifetime: must be finite, got .inf");
  EXPECT_EQ(env_error("cpus: 0\n"), "envs/py.yaml:1: cpus: must be more than 0, got 0");
  EXPECT_EQ(env_error("cpus: two\n"),
            R"(envs/py.yaml:1: cpus: expected a number of CPUs, got "two")");
  EXPECT_EQ(env_error("memory: lots\n"),
            R"(envs/py.yaml:1: memory: expected a size such as 512m or 2g, got "lots")");
  EXPECT_EQ(env_error("memory: [2g]\n"),
            "envs/py.yaml:1: memory: expected a size such as 512m or 2g, got a list");
  EXPECT_EQ(env_error("image: [a, b]\n"), "envs/py.yaml:1: image: expected a string, got a list");
  EXPECT_EQ(env_error("description:\n"),
            "envs/py.yaml:1: description: expected a string, got null");
  EXPECT_EQ(env_error("provider: my provider\n"),
            "envs/py.yaml:1: provider: expected a provider name (local, docker, podman...) of " +
                std::string(kNameRule) + ", got \"my provider\"");
  EXPECT_EQ(env_error("env: [A=1]\n"),
            "envs/py.yaml:1: env: expected a mapping of variables to their values, got a list");
  EXPECT_EQ(env_error("env:\n  A: 1\n  B: [x]\n"),
            "envs/py.yaml:3: env.B: expected a string, got a list");
  EXPECT_EQ(env_error("env:\n  A: 1\n  B:\n"),
            "envs/py.yaml:3: env.B: expected a string, got null");
  EXPECT_EQ(env_error("env:\n  A=B: 1\n"),
            "envs/py.yaml:2: env.A=B: a variable's name must be non-empty, without '=' or NUL");
  EXPECT_EQ(env_error("env:\n  A: 1\n  A: 2\n"), "envs/py.yaml:3: env.A: given twice");
  EXPECT_EQ(env_error("mounts: /data:/data\n"),
            R"(envs/py.yaml:1: mounts: expected a list of strings, got "/data:/data")");
  EXPECT_EQ(env_error("mounts:\n  - /a:/a\n  - {b: c}\n"),
            "envs/py.yaml:3: mounts[1]: expected a string, got a mapping");
  EXPECT_EQ(env_error("collect:\n  - \"\"\n"), "envs/py.yaml:2: collect[0]: must not be empty");
  EXPECT_EQ(env_error("collect:\n  -\n  - x\n"),
            "envs/py.yaml:1: collect[0]: expected a string, got null");
  EXPECT_EQ(env_error("image: a\nimage: b\n"), "envs/py.yaml:2: image: given twice");
  EXPECT_EQ(env_error("spares: -1\n"), "envs/py.yaml:1: spares: must not be negative, got -1");
  EXPECT_EQ(env_error("spares: 1.5\n"),
            R"(envs/py.yaml:1: spares: expected a whole number of sandboxes, got "1.5")");
  EXPECT_EQ(env_error("spares: 65\n"),
            "envs/py.yaml:1: spares: at most 64 sandboxes may be kept ahead of time, got 65");
}

TEST(Registry, EnvironmentNames) {
  EXPECT_EQ(parse_yaml("name: a.b_c-9\n").name, "a.b_c-9");
  EXPECT_EQ(parse_yaml("name: " + std::string(63, 'n') + "\n").name, std::string(63, 'n'));
  EXPECT_EQ(parse_yaml("name: 3\n").name, "3");
  EXPECT_EQ(env_error("name: -leading\n"),
            "envs/py.yaml:1: name: expected an environment name of " + std::string(kNameRule) +
                ", got \"-leading\"");
  EXPECT_EQ(env_error("name: a/b\n"), "envs/py.yaml:1: name: expected an environment name of " +
                                          std::string(kNameRule) + ", got \"a/b\"");
  EXPECT_EQ(env_error("name: \"\"\n"), "envs/py.yaml:1: name: expected an environment name of " +
                                           std::string(kNameRule) + ", got \"\"");
  EXPECT_EQ(env_error("name: {a: b}\n"), "envs/py.yaml:1: name: expected an environment name of " +
                                             std::string(kNameRule) + ", got a mapping");
  // Without `name`, the file's stem must be a name; there is no line to point at.
  EXPECT_EQ(env_error("image: x\n", "my env"),
            "envs/py.yaml: name: expected an environment name of " + std::string(kNameRule) +
                ", got the file's name \"my env\"");
  EXPECT_EQ(parse_yaml("name: fine\n", "my env").name, "fine");
}

TEST(Registry, EnvironmentDocumentErrors) {
  EXPECT_EQ(env_error("- a\n- b\n"),
            "envs/py.yaml:1: expected a mapping of environment fields, got a list");
  EXPECT_EQ(env_error("image: a\n---\nimage: b\n"),
            "envs/py.yaml:3: a second YAML document (a file holds one)");
  EXPECT_EQ(env_error("image: x\n  bad: indent\n"),
            "envs/py.yaml:2: invalid YAML: illegal map value");
  EXPECT_EQ(env_error("env: {A: 1\n"), "envs/py.yaml:2: invalid YAML: end of map flow not found");
  // Aliases are fine where the types fit, and refused where they do not.
  EXPECT_EQ(parse_yaml("collect: &c [a, b]\nmounts: *c\n").mounts,
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(env_error("mounts: &m [*m]\n"),
            "envs/py.yaml:1: mounts[0]: expected a string, got a list");
}

TEST(Registry, LoadsADirectory) {
  const test::TempDir dir;
  put(dir, "environments/python.yaml",
      "name: python-data\nprovider: docker\nimage: rex-python:3.11\nmemory: 2g\n");
  put(dir, "environments/shell.yml", "description: a plain shell\n");
  put(dir, "environments/README.md", "not an environment\n");
  put(dir, "environments/.draft.yaml", "this: is ignored\n");
  fs::create_directories(dir.path() + "/environments/nested");
  put(dir, "environments/nested/deep.yaml", "ignored: too\n");
  put(dir, "agents/coder.yaml", "model: some-model\nmax_steps: 50\ntools: [shell, edit]\n");
  put(dir, "tools/shell.json", R"({"name": "shell", "parameters": {"cmd": "string"}})");
  put(dir, "prompts/system.md", "# System\nYou are helpful.\n");
  put(dir, "prompts/short.txt", "hello");

  const Registry registry = Registry::load(dir.path(), "img:1");
  const auto all = registry.environments();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0]->name, "Python3");
  EXPECT_EQ(all[1]->name, "code-interpreter-v1");
  EXPECT_EQ(all[2]->name, "local");
  EXPECT_EQ(all[3]->name, "python-data");
  EXPECT_EQ(all[4]->name, "shell");
  EXPECT_EQ(registry.find("Python3")->image, "img:1");
  EXPECT_EQ(registry.find("python-data")->memory, "2g");
  EXPECT_EQ(registry.find("shell")->description, "a plain shell");
  EXPECT_EQ(registry.find("shell")->provider, "local");

  const auto& agents = registry.data("agents");
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents.at("coder"), json::parse(R"({"model":"some-model","max_steps":50,)"
                                            R"("tools":["shell","edit"]})"));
  const auto& tools = registry.data("tools");
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools.at("shell"), json::parse(R"({"name":"shell","parameters":{"cmd":"string"}})"));
  const auto& prompts = registry.data("prompts");
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts.at("system"), json::value("# System\nYou are helpful.\n"));
  EXPECT_EQ(prompts.at("short"), json::value("hello"));
}

TEST(Registry, AFileReplacesABuiltIn) {
  const test::TempDir dir;
  put(dir, "environments/python.yaml",
      "name: Python3\nprovider: podman\nimage: my-python\nidle_timeout: 60\n");
  put(dir, "environments/local.yaml", "working_dir: /srv/work\n");  // named by its stem
  const Registry registry = Registry::load(dir.path());
  ASSERT_EQ(registry.environments().size(), 3u);
  EXPECT_EQ(registry.find("Python3")->provider, "podman");
  EXPECT_EQ(registry.find("Python3")->image, "my-python");
  EXPECT_EQ(registry.find("Python3")->idle_timeout, 60);
  EXPECT_EQ(registry.find("local")->working_dir, "/srv/work");
  EXPECT_EQ(registry.find("local")->description, "");  // the whole built-in is replaced
}

TEST(Registry, MissingPartsAndDirectoryErrors) {
  const test::TempDir dir;
  const Registry empty = Registry::load(dir.path());  // no subfolders: the built-ins
  EXPECT_EQ(empty.environments().size(), 3u);

  EXPECT_EQ(error_of([&] { Registry::load(dir.path() + "/nope"); }),
            dir.path() + "/nope: the registry directory does not exist");
  dir.file("plain", "x");
  EXPECT_EQ(error_of([&] { Registry::load(dir.path() + "/plain"); }),
            dir.path() + "/plain: the registry is not a directory");
  dir.file("environments", "a file, not a folder");
  EXPECT_EQ(error_of([&] { Registry::load(dir.path()); }),
            dir.path() + "/environments: not a directory");
}

TEST(Registry, ErrorsNameTheFile) {
  const test::TempDir dir;
  put(dir, "environments/py.yaml", "name: py\nimage: x\nidle_timeout: soon\n");
  EXPECT_EQ(
      error_of([&] { Registry::load(dir.path()); }),
      dir.path() +
          R"(/environments/py.yaml:3: idle_timeout: expected a number of seconds, got "soon")");

  const test::TempDir data;
  put(data, "tools/bad.json", "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  EXPECT_EQ(error_of([&] { Registry::load(data.path()); }),
            data.path() + "/tools/bad.json:3: invalid JSON: syntax error");
}

TEST(Registry, TwoEnvironmentsOfOneName) {
  const test::TempDir dir;
  put(dir, "environments/a.yaml", "name: py\n");
  put(dir, "environments/b.yml", "name: py\n");
  EXPECT_EQ(error_of([&] { Registry::load(dir.path()); }),
            dir.path() + "/environments/b.yml: name: the environment \"py\" is also defined by " +
                dir.path() + "/environments/a.yaml");

  const test::TempDir stems;
  put(stems, "environments/py.yaml", "image: a\n");
  put(stems, "environments/py.yml", "image: b\n");
  EXPECT_EQ(error_of([&] { Registry::load(stems.path()); }),
            stems.path() +
                "/environments/py.yml: name: the environment \"py\" is also defined by " +
                stems.path() + "/environments/py.yaml");
}

TEST(Registry, TwoDataFilesOfOneName) {
  const test::TempDir dir;
  put(dir, "tools/shell.json", "{}");
  put(dir, "tools/shell.yaml", "a: 1\n");
  EXPECT_EQ(error_of([&] { Registry::load(dir.path()); }),
            dir.path() + "/tools/shell.yaml: the tools entry \"shell\" is also defined by " +
                dir.path() + "/tools/shell.json");
}

TEST(Registry, YamlDataTypes) {
  const json::value v = parse_data_file(R"(
int: 42
negative: -7
plus: +7
hex: 0x1F
octal: 0o17
big: 18446744073709551615
huge: 123456789012345678901234567890
float: 2.5
exp: 1e3
dot: .5
inf: .inf
nan: .nan
yes_is_text: yes
on_is_text: on
t: true
f: False
n1: null
n2: ~
n3:
quoted_int: "42"
quoted_bool: 'true'
tagged: !!str 7
version: 1.2.3
date: 2024-01-02
list: [1, two, 3.0]
nested: {a: {b: [x, {c: d}]}}
multi: |
  line one
  line two
)",
                                        "agents/a.yaml", ".yaml");
  EXPECT_EQ(v, json::parse(R"({
    "int": 42, "negative": -7, "plus": 7, "hex": 31, "octal": 15,
    "big": 18446744073709551615, "huge": 1.2345678901234568e29,
    "float": 2.5, "exp": 1000.0, "dot": 0.5, "inf": ".inf", "nan": ".nan",
    "yes_is_text": "yes", "on_is_text": "on", "t": true, "f": false,
    "n1": null, "n2": null, "n3": null,
    "quoted_int": "42", "quoted_bool": "true", "tagged": "7",
    "version": "1.2.3", "date": "2024-01-02",
    "list": [1, "two", 3.0],
    "nested": {"a": {"b": ["x", {"c": "d"}]}},
    "multi": "line one\nline two\n"})"));
  EXPECT_EQ(parse_data_file("", "a.yaml", ".yaml"), json::value(nullptr));
  // yaml-cpp 0.7's LoadAll never returns on this one (jbeder/yaml-cpp#1040); it takes it for
  // empty documents.
  EXPECT_EQ(parse_data_file(",:&x a[", "a.yaml", ".yaml"), json::value(nullptr));
  EXPECT_EQ(parse_data_file("[1]", "a.YML", ".YML"), json::parse("[1]"));
}

TEST(Registry, DataErrors) {
  EXPECT_EQ(data_error("a: 1\na: 2\n"), "tools/t.yaml:2: a: given twice");
  EXPECT_EQ(data_error("outer:\n  [x]: 1\n"),
            "tools/t.yaml:2: outer: expected a name as the key, got a list");
  EXPECT_EQ(data_error("a: [1, 2\n"),
            "tools/t.yaml:2: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(data_error("a: 1\n---\nb: 2\n"),
            "tools/t.yaml:3: a second YAML document (a file holds one)");
  std::string deep;
  for (int i = 0; i < 70; ++i)
    deep += "[";
  for (int i = 0; i < 70; ++i)
    deep += "]";
  std::string path;  // the 65th level is the one refused
  for (int i = 0; i < 65; ++i)
    path += "[0]";
  EXPECT_EQ(data_error(deep), "tools/t.yaml:1: " + path + ": nested more than 64 levels deep");
  // An anchor inside its own definition, and an alias bomb: both stop.
  EXPECT_NE(data_error("a: &x [*x]\n").find("nested more than 64 levels deep"), std::string::npos);
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const std::string previous(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i)
      bomb += (i == 0 ? "*" : ", *") + previous;
    bomb += "]\n";
  }
  EXPECT_NE(data_error(bomb).find("more than 1000000 values (aliases expanded)"), std::string::npos)
      << data_error(bomb);
}

TEST(Registry, JsonAndTextData) {
  EXPECT_EQ(parse_data_file(R"({"a": [1, 2.5, null]})", "t.json", ".json"),
            json::parse(R"({"a": [1, 2.5, null]})"));
  EXPECT_EQ(data_error("{\"a\": 1,\n\"b\": }", ".json"),
            "tools/t.json:2: invalid JSON: syntax error");
  EXPECT_EQ(data_error("{\"a\": 1} x", ".json"), "tools/t.json:1: invalid JSON: extra data");
  EXPECT_EQ(data_error("", ".json"), "tools/t.json:1: invalid JSON: incomplete JSON");
  EXPECT_EQ(parse_data_file("héllo\n", "p.md", ".md"), json::value("héllo\n"));
  EXPECT_EQ(parse_data_file("no extension", "p", ""), json::value("no extension"));
  EXPECT_EQ(data_error("good\nbad \xff byte", ".txt"), "tools/t.txt:2: not UTF-8 text");
  EXPECT_EQ(data_error("a: 1\nb: \xc3\x28\n", ".yaml"), "tools/t.yaml:2: not UTF-8 text");
  EXPECT_EQ(env_error("description: \xed\xa0\x80\n"), "envs/py.yaml:1: not UTF-8 text");
  EXPECT_EQ(data_error(std::string("a\0\0\0: x\n", 8)),
            "tools/t.yaml:1: a NUL byte (YAML text has none)");
  EXPECT_EQ(parse_data_file(std::string("a\0b", 3), "p.txt", ".txt"),
            json::value(json::string_view("a\0b", 3)));
}

}  // namespace
}  // namespace rex::gateway
