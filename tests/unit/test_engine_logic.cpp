// The Docker engine client's pure parts: configuration from the environment, engine addresses,
// error bodies, log frames, pull progress, image references, container lists.
#include <rex/docker/engine.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "docker/engine_logic.hpp"
#include "support/test_helpers.hpp"

namespace rex::docker {
namespace {

namespace json = boost::json;
using rex::test::ScopedEnv;
using ::testing::HasSubstr;

TEST(EngineConfigFromEnvironment, DockerDefaults) {
  ScopedEnv host("DOCKER_HOST", std::nullopt);
  ScopedEnv verify("DOCKER_TLS_VERIFY", std::nullopt);
  ScopedEnv tls("DOCKER_TLS", std::nullopt);
  ScopedEnv certs("DOCKER_CERT_PATH", std::nullopt);
  ScopedEnv api("DOCKER_API_VERSION", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  const EngineConfig c = engine_config_from_environment();
  EXPECT_EQ(c.host, "");
  EXPECT_FALSE(c.tls);
  EXPECT_EQ(c.cert_path, "/home/someone/.docker");
  EXPECT_EQ(c.api_version, "1.41");
  EXPECT_EQ(c.runtime, "docker");
  const auto address = detail::engine_address(c);
  EXPECT_EQ(address.endpoint, "unix:///var/run/docker.sock");
  EXPECT_EQ(address.base_url, "http+unix://%2Fvar%2Frun%2Fdocker.sock");
  EXPECT_TRUE(address.local);
}

TEST(EngineConfigFromEnvironment, DockerTcpWithTls) {
  ScopedEnv host("DOCKER_HOST", "tcp://engine.example:2376");
  ScopedEnv verify("DOCKER_TLS_VERIFY", "1");
  ScopedEnv tls("DOCKER_TLS", std::nullopt);
  ScopedEnv certs("DOCKER_CERT_PATH", "/etc/rex-certs");
  ScopedEnv api("DOCKER_API_VERSION", "1.43");
  const EngineConfig c = engine_config_from_environment("docker");
  EXPECT_EQ(c.host, "tcp://engine.example:2376");
  EXPECT_TRUE(c.tls);
  EXPECT_TRUE(c.tls_verify);
  EXPECT_EQ(c.cert_path, "/etc/rex-certs");
  EXPECT_EQ(c.api_version, "1.43");
  const auto address = detail::engine_address(c);
  EXPECT_EQ(address.endpoint, "tcp://engine.example:2376");
  EXPECT_EQ(address.base_url, "https://engine.example:2376");
  EXPECT_FALSE(address.local);
}

TEST(EngineConfigFromEnvironment, DockerTlsWithoutVerification) {
  ScopedEnv host("DOCKER_HOST", "tcp://10.0.0.5");
  ScopedEnv verify("DOCKER_TLS_VERIFY", std::nullopt);
  ScopedEnv tls("DOCKER_TLS", "1");
  const EngineConfig c = engine_config_from_environment();
  EXPECT_TRUE(c.tls);
  EXPECT_FALSE(c.tls_verify);
  EXPECT_EQ(detail::engine_address(c).base_url, "https://10.0.0.5:2376");
}

TEST(EngineConfigFromEnvironment, DockerTcpWithoutTls) {
  ScopedEnv host("DOCKER_HOST", "tcp://[::1]");
  ScopedEnv verify("DOCKER_TLS_VERIFY", "");  // empty counts as unset, as for the docker CLI
  ScopedEnv tls("DOCKER_TLS", std::nullopt);
  const EngineConfig c = engine_config_from_environment();
  EXPECT_FALSE(c.tls);
  const auto address = detail::engine_address(c);
  EXPECT_EQ(address.base_url, "http://[::1]:2375");
  EXPECT_EQ(address.endpoint, "tcp://[::1]:2375");
}

TEST(EngineConfigFromEnvironment, Podman) {
  {
    ScopedEnv host("CONTAINER_HOST", "unix:///tmp/podman.sock");
    const EngineConfig c = engine_config_from_environment("podman");
    EXPECT_EQ(c.host, "unix:///tmp/podman.sock");
    EXPECT_EQ(c.runtime, "podman");
    EXPECT_FALSE(c.tls);
  }
  ScopedEnv host("CONTAINER_HOST", std::nullopt);
  ScopedEnv runtime_dir("XDG_RUNTIME_DIR", "/run/user/1000");
  const EngineConfig c = engine_config_from_environment("podman");
  if (::geteuid() == 0)
    EXPECT_EQ(c.host, "unix:///run/podman/podman.sock");
  else
    EXPECT_EQ(c.host, "unix:///run/user/1000/podman/podman.sock");
}

TEST(EngineConfigFromEnvironment, UnknownRuntimeIsRefused) {
  EXPECT_THROW_MESSAGE(engine_config_from_environment("containerd"), std::invalid_argument,
                       "unknown container runtime 'containerd': expected 'docker' or 'podman'");
}

TEST(EngineAddress, UnusableHostsAreRefusedWithTheReason) {
  EngineConfig c;
  c.host = "ssh://me@box";
  EXPECT_THROW_MESSAGE(detail::engine_address(c), std::invalid_argument,
                       "container engine host 'ssh://me@box': scheme 'ssh' is not supported; use "
                       "unix:///PATH or tcp://HOST:PORT");
  c.host = "unix://relative.sock";
  EXPECT_THROW_CONTAINING(detail::engine_address(c), std::invalid_argument,
                          "a unix socket needs an absolute path");
  c.host = "tcp://";
  EXPECT_THROW_CONTAINING(detail::engine_address(c), std::invalid_argument, "no host name");
  c.host = "tcp://h:notaport";
  EXPECT_THROW_CONTAINING(detail::engine_address(c), std::invalid_argument,
                          "container engine host 'tcp://h:notaport' cannot be used");
  c.host = "unix:///run/docker.sock";
  c.tls = true;
  EXPECT_THROW_CONTAINING(detail::engine_address(c), std::invalid_argument, "TLS is for tcp://");
}

TEST(EngineAddress, SocketPathsAreEncodedWhole) {
  EngineConfig c;
  c.host = "unix:///tmp/a.sock/engine";  // a directory named like a socket
  const auto address = detail::engine_address(c);
  EXPECT_EQ(address.socket_path, "/tmp/a.sock/engine");
  EXPECT_EQ(address.base_url, "http+unix://%2Ftmp%2Fa.sock%2Fengine");
}

TEST(EngineLogic, ClientSettingsFollowTheTlsConfig) {
  EngineConfig c;
  c.request_timeout = std::chrono::seconds(7);
  http::ClientConfig h = detail::engine_client_config(c);
  EXPECT_EQ(h.timeout, std::chrono::seconds(7));
  EXPECT_EQ(h.retry.max_retries, 0u);
  EXPECT_TRUE(h.ca_file.empty());
  EXPECT_TRUE(h.cert_file.empty());

  test::TempDir certs;
  c.host = "tcp://engine:2376";
  c.tls = true;
  c.cert_path = certs.path();
  h = detail::engine_client_config(c);
  EXPECT_TRUE(h.verify_peer);
  EXPECT_EQ(h.ca_file, certs.path() + "/ca.pem");
  EXPECT_TRUE(h.cert_file.empty()) << "no client certificate in the directory";
  certs.file("cert.pem", "x");
  certs.file("key.pem", "y");
  h = detail::engine_client_config(c);
  EXPECT_EQ(h.cert_file, certs.path() + "/cert.pem");
  EXPECT_EQ(h.key_file, certs.path() + "/key.pem");
  c.tls_verify = false;
  h = detail::engine_client_config(c);
  EXPECT_FALSE(h.verify_peer);
  EXPECT_TRUE(h.ca_file.empty());
  EXPECT_EQ(h.cert_file, certs.path() + "/cert.pem");
}

TEST(EngineLogic, UrlEncode) {
  EXPECT_EQ(detail::url_encode("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
  EXPECT_EQ(detail::url_encode("reg:5000/img:tag", "/:@"), "reg:5000/img:tag");
  EXPECT_EQ(detail::url_encode("{\"label\":[\"x=y\"]}"), "%7B%22label%22%3A%5B%22x%3Dy%22%5D%7D");
}

TEST(EngineLogic, EngineMessages) {
  EXPECT_EQ(detail::engine_message_of(R"({"message":"No such image: x:latest"})"),
            "No such image: x:latest");
  // Podman: cause and response besides the message.
  EXPECT_EQ(detail::engine_message_of(
                R"({"cause":"no such image","message":"x: image not known","response":404})"),
            "x: image not known (cause: no such image)");
  EXPECT_EQ(detail::engine_message_of(
                R"({"cause":"no such container","message":"abc: no such container"})"),
            "abc: no such container");
  EXPECT_EQ(detail::engine_message_of("  plain text\n"), "plain text");
  EXPECT_EQ(detail::engine_message_of(""), "");
}

std::string frame(unsigned char stream, const std::string& payload) {
  std::string f(8, '\0');
  f[0] = static_cast<char>(stream);
  const auto n = static_cast<std::uint32_t>(payload.size());
  f[4] = static_cast<char>((n >> 24) & 0xff);
  f[5] = static_cast<char>((n >> 16) & 0xff);
  f[6] = static_cast<char>((n >> 8) & 0xff);
  f[7] = static_cast<char>(n & 0xff);
  return f + payload;
}

TEST(EngineLogic, LogFramesAreDecodedAndRawStreamsRecognised) {
  const std::string big(70000, 'z');  // a size that needs more than one byte
  const std::string raw = frame(1, "out\n") + frame(2, "err\n") + frame(1, big) + frame(1, "");
  EXPECT_EQ(detail::demultiplex_logs(raw), "out\nerr\n" + big);
  EXPECT_EQ(detail::demultiplex_logs(""), "");
  // A TTY container's output is not frames.
  EXPECT_EQ(detail::demultiplex_logs("hello\r\n"), std::nullopt);
  // A cut frame is not a multiplexed stream either.
  EXPECT_EQ(detail::demultiplex_logs(frame(1, "abcdef").substr(0, 10)), std::nullopt);
  EXPECT_EQ(detail::demultiplex_logs(frame(3, "x")), std::nullopt);
}

TEST(EngineLogic, LastLinesIsWhatTailAnswers) {
  EXPECT_EQ(detail::last_lines("a\nb\nc\n", 1), "c\n");
  EXPECT_EQ(detail::last_lines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(detail::last_lines("a\nb\nc\n", 3), "a\nb\nc\n");
  EXPECT_EQ(detail::last_lines("a\nb\nc\n", 30), "a\nb\nc\n");
  EXPECT_EQ(detail::last_lines("a\nb\nc\n", 0), "");
  // An unterminated end is a line; empty lines count; "\r\n" ends a line too.
  EXPECT_EQ(detail::last_lines("a\nb", 1), "b");
  EXPECT_EQ(detail::last_lines("a\n\n\n", 2), "\n\n");
  EXPECT_EQ(detail::last_lines("hi\r\nthere\r\n", 1), "there\r\n");
  EXPECT_EQ(detail::last_lines("\n", 1), "\n");
  EXPECT_EQ(detail::last_lines("", 5), "");
}

TEST(EngineLogic, ImageReferences) {
  const auto check = [](std::string_view name, std::string image, std::string tag) {
    const auto ref = detail::split_image_reference(name);
    EXPECT_EQ(ref.from_image, image) << name;
    EXPECT_EQ(ref.tag, tag) << name;
  };
  check("busybox", "busybox", "latest");
  check("busybox:1.36", "busybox", "1.36");
  check("localhost:5000/team/img", "localhost:5000/team/img", "latest");
  check("localhost:5000/team/img:v2", "localhost:5000/team/img", "v2");
  check("img@sha256:0123", "img@sha256:0123", "");
}

PullProgress feed(detail::PullProgressTracker& t, std::string_view line) {
  return t.update(json::parse(line).as_object());
}

TEST(EngineLogic, PullProgressSumsLayers) {
  detail::PullProgressTracker t;
  PullProgress p = feed(t, R"({"status":"Pulling from library/busybox","id":"latest"})");
  EXPECT_EQ(p.status, "Pulling from library/busybox");
  EXPECT_EQ(p.layer, "");
  EXPECT_EQ(p.percent, -1);
  p = feed(t, R"({"status":"Pulling fs layer","progressDetail":{},"id":"aaa"})");
  EXPECT_EQ(p.layer, "aaa");
  EXPECT_EQ(p.percent, -1);
  feed(t, R"({"status":"Pulling fs layer","progressDetail":{},"id":"bbb"})");
  p = feed(t,
           R"({"status":"Downloading","progressDetail":{"current":100,"total":400},"id":"aaa"})");
  EXPECT_EQ(p.bytes_done, 100u);
  EXPECT_EQ(p.bytes_total, 400u);
  EXPECT_DOUBLE_EQ(p.percent, 25.0);
  p = feed(t, R"({"status":"Downloading","progressDetail":{"current":50,"total":600},"id":"bbb"})");
  EXPECT_EQ(p.bytes_done, 150u);
  EXPECT_EQ(p.bytes_total, 1000u);
  EXPECT_DOUBLE_EQ(p.percent, 15.0);
  p = feed(t, R"({"status":"Download complete","progressDetail":{},"id":"aaa"})");
  EXPECT_EQ(p.bytes_done, 450u);
  // Extraction progress counts bytes of another kind: the download total stays.
  p = feed(t, R"({"status":"Extracting","progressDetail":{"current":7,"total":9999},"id":"aaa"})");
  EXPECT_EQ(p.bytes_done, 450u);
  EXPECT_EQ(p.bytes_total, 1000u);
  p = feed(t, R"({"status":"Pull complete","progressDetail":{},"id":"bbb"})");
  EXPECT_EQ(p.bytes_done, 1000u);
  EXPECT_DOUBLE_EQ(p.percent, 100.0);
  p = feed(t, R"({"status":"Status: Downloaded newer image for busybox:latest"})");
  EXPECT_EQ(p.layer, "");
  EXPECT_DOUBLE_EQ(p.percent, 100.0);
  EXPECT_FALSE(t.error());
}

// What dockerd 20.10 prints when a layer's connection breaks at 3 MiB: a full bar, retries,
// then counts from 0 towards the rest (it resumed with a Range request).
TEST(EngineLogic, PullProgressContinuesThroughARetriedDownload) {
  detail::PullProgressTracker t;
  feed(t, R"({"status":"Pulling fs layer","progressDetail":{},"id":"l"})");
  PullProgress p = feed(
      t,
      R"({"status":"Downloading","progressDetail":{"current":2850816,"total":8391438},"id":"l"})");
  EXPECT_EQ(p.bytes_done, 2850816u);
  p = feed(
      t,
      R"({"status":"Downloading","progressDetail":{"current":8391438,"total":8391438},"id":"l"})");
  EXPECT_EQ(p.bytes_done, 2850816u) << "a full bar is no complete download";
  p = feed(t, R"({"status":"Retrying in 5 seconds","progressDetail":{},"id":"l"})");
  EXPECT_EQ(p.status, "Retrying in 5 seconds");
  EXPECT_EQ(p.bytes_done, 2850816u);
  p = feed(
      t, R"({"status":"Downloading","progressDetail":{"current":65536,"total":5245710},"id":"l"})");
  EXPECT_EQ(p.bytes_done, 3145728u + 65536u);
  EXPECT_EQ(p.bytes_total, 8391438u);
  p = feed(
      t,
      R"({"status":"Downloading","progressDetail":{"current":4653056,"total":5245710},"id":"l"})");
  EXPECT_EQ(p.bytes_done, 3145728u + 4653056u);
  p = feed(t, R"({"status":"Download complete","progressDetail":{},"id":"l"})");
  EXPECT_EQ(p.bytes_done, 8391438u);
  EXPECT_DOUBLE_EQ(p.percent, 100.0);
}

TEST(EngineLogic, PullProgressNeverGoesBack) {
  detail::PullProgressTracker t;
  // A retry that starts over from byte 0 (same total).
  feed(t, R"({"status":"Downloading","progressDetail":{"current":600,"total":1000},"id":"a"})");
  PullProgress p =
      feed(t, R"({"status":"Downloading","progressDetail":{"current":100,"total":1000},"id":"a"})");
  EXPECT_EQ(p.bytes_done, 600u);
  p = feed(t, R"({"status":"Downloading","progressDetail":{"current":900,"total":1000},"id":"a"})");
  EXPECT_EQ(p.bytes_done, 900u);
  // A layer whose size never came: its bytes stay counted when it completes.
  p = feed(t, R"({"status":"Downloading","progressDetail":{"current":50},"id":"b"})");
  EXPECT_EQ(p.bytes_done, 950u);
  p = feed(t, R"({"status":"Pull complete","progressDetail":{},"id":"b"})");
  EXPECT_GE(p.bytes_done, 950u);
}

TEST(EngineLogic, PullErrorLineIsRemembered) {
  detail::PullProgressTracker t;
  feed(t, R"({"status":"Pulling from library/nothing","id":"latest"})");
  const PullProgress p = feed(
      t, R"({"errorDetail":{"message":"manifest unknown"},"error":"manifest for x not found"})");
  EXPECT_EQ(p.status, "manifest for x not found");
  ASSERT_TRUE(t.error());
  EXPECT_EQ(*t.error(), "manifest for x not found");
  feed(t, R"({"error":"a second one"})");
  EXPECT_EQ(*t.error(), "manifest for x not found") << "the first error is the one reported";
  detail::PullProgressTracker only_detail;
  feed(only_detail, R"({"errorDetail":{"message":"denied"}})");
  EXPECT_EQ(only_detail.error().value_or(""), "denied");
}

TEST(EngineLogic, LinesSplitAcrossPieces) {
  detail::LineSplitter s;
  std::vector<std::string> lines;
  const std::function<void(std::string_view)> keep = [&](std::string_view l) {
    lines.emplace_back(l);
  };
  s.feed("{\"a\":", keep);
  s.feed("1}\n{\"b\":2}\n{\"c\"", keep);
  s.feed(":3}", keep);
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  s.finish(keep);
  EXPECT_EQ(lines.back(), "{\"c\":3}");
  s.finish(keep);
  EXPECT_EQ(lines.size(), 3u);
}

TEST(EngineLogic, ContainerList) {
  const auto list = detail::parse_container_list(json::parse(R"([
    {"Id":"abc","Names":["/rex-1"],"Image":"rex-test-nopython","State":"running",
     "Labels":{"rex.test":"t1","other":"x"},"Created":1700000000},
    {"Id":"def","Names":[],"Image":"busybox","State":"exited","Labels":null,"Created":5}
  ])"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, "abc");
  EXPECT_EQ(list[0].names, (std::vector<std::string>{"/rex-1"}));
  EXPECT_EQ(list[0].image, "rex-test-nopython");
  EXPECT_EQ(list[0].state, "running");
  EXPECT_EQ(list[0].labels.at("rex.test"), "t1");
  EXPECT_EQ(list[0].created, 1700000000);
  EXPECT_TRUE(list[1].labels.empty());
  EXPECT_THROW(detail::parse_container_list(json::parse("{}")), std::invalid_argument);
  EXPECT_EQ(detail::label_filters_json({"rex.test", "a=b"}), R"({"label":["rex.test","a=b"]})");
}

TEST(EngineLogic, ImageList) {
  const auto list = detail::parse_image_list(json::parse(R"([
    {"Id":"sha256:aa","RepoTags":["rex-checkpoint:ckpt-1"],"Labels":{"rex.checkpoint":"ckpt-1"},
     "Created":1700000000,"Size":1234},
    {"Id":"sha256:bb","RepoTags":null,"Labels":null,"Created":5}
  ])"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, "sha256:aa");
  EXPECT_EQ(list[0].tags, (std::vector<std::string>{"rex-checkpoint:ckpt-1"}));
  EXPECT_EQ(list[0].labels.at("rex.checkpoint"), "ckpt-1");
  EXPECT_EQ(list[0].created, 1700000000);
  EXPECT_EQ(list[0].size, 1234);
  EXPECT_TRUE(list[1].tags.empty());
  EXPECT_THROW(detail::parse_image_list(json::parse("{}")), std::invalid_argument);
}

// Docker's formula: the container's share of the machine's CPU time between the two samples;
// memory without the page cache it can give back (cgroup v2's inactive_file, v1's total_).
TEST(EngineLogic, ContainerStats) {
  const auto v2 = detail::parse_container_stats(json::parse(R"({
    "cpu_stats":{"cpu_usage":{"total_usage":3000000},"system_cpu_usage":20000000,"online_cpus":2},
    "precpu_stats":{"cpu_usage":{"total_usage":1000000},"system_cpu_usage":10000000},
    "memory_stats":{"usage":50000000,"limit":536870912,"stats":{"inactive_file":10000000}}
  })")
                                                    .as_object());
  EXPECT_DOUBLE_EQ(v2.cpu_percent, 20.0);
  EXPECT_EQ(v2.cpu_count, 2);
  EXPECT_EQ(v2.memory_used, 40000000u);
  EXPECT_EQ(v2.memory_limit, 536870912u);
  const auto v1 = detail::parse_container_stats(json::parse(R"({
    "cpu_stats":{"cpu_usage":{"total_usage":5,"percpu_usage":[1,2,3,4]}},
    "memory_stats":{"usage":100,"stats":{"total_inactive_file":30}}
  })")
                                                    .as_object());
  EXPECT_EQ(v1.cpu_count, 4);
  EXPECT_DOUBLE_EQ(v1.cpu_percent, 0.0);  // no previous sample: no rate
  EXPECT_EQ(v1.memory_used, 70u);
  const auto empty = detail::parse_container_stats(json::object{});
  EXPECT_EQ(empty.cpu_count, 0);
  EXPECT_EQ(empty.memory_used, 0u);
}

TEST(EngineLogic, EngineWithABadHostFailsAtConstruction) {
  boost::asio::io_context io;
  EngineConfig c;
  c.host = "npipe:////./pipe/docker_engine";
  EXPECT_THROW_CONTAINING(Engine(io.get_executor(), c), std::invalid_argument,
                          "scheme 'npipe' is not supported");
}

}  // namespace
}  // namespace rex::docker
