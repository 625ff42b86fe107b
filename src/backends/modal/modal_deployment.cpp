#include <rex/backends/modal/modal_deployment.hpp>
#include <rex/backends/modal/modal_profile.hpp>

#include <rex/core/backoff.hpp>
#include <rex/core/random.hpp>
#include <rex/core/retry.hpp>
#include <rex/core/text.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include "backends/modal/api.grpc.pb.h"
#include "backends/modal/modal_calls.hpp"
#include "core/clock.hpp"
#include "core/offload.hpp"
#include "deployment/cloud_start.hpp"
#include "deployment/hand_over.hpp"
#include "deployment/service_client.hpp"
#include "deployment/setting_from_env.hpp"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

namespace rex {

namespace api = modal::client;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kDefaultServerUrl = "https://api.modal.com";
constexpr std::string_view kServerPath = "/rex/rex-server";  // where the mount puts it
constexpr std::uint64_t kInlineLimit = 4 * 1024 * 1024;      // larger files go through a blob
// What this client tells Modal it is: the Python SDK's client type and the version whose
// protocol definition api.proto was taken from (Modal's Go and JavaScript SDKs likewise name the
// Python SDK version they behave like).
constexpr std::string_view kClientType = "1";
constexpr std::string_view kClientVersion = "1.6.4";

using detail::from_env;

bool retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::string_view code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "an unknown status";
  }
}

// How a sandbox or an image build ended, from Modal's GenericResult.
std::string describe(const api::GenericResult& r) {
  std::string what;
  switch (r.status()) {
    case api::GenericResult::GENERIC_STATUS_SUCCESS:
      what = fmt::format("exited with code {}", r.exitcode());
      break;
    case api::GenericResult::GENERIC_STATUS_TERMINATED:
      what = "was terminated";
      break;
    case api::GenericResult::GENERIC_STATUS_TIMEOUT:
      what = "timed out";
      break;
    case api::GenericResult::GENERIC_STATUS_IDLE_TIMEOUT:
      what = "timed out idle";
      break;
    case api::GenericResult::GENERIC_STATUS_FAILURE:
      what = fmt::format("failed (exit code {})", r.exitcode());
      break;
    default:
      what = fmt::format("ended ({})", api::GenericResult::GenericStatus_Name(r.status()));
  }
  if (!r.exception().empty())
    what += ": " + r.exception();
  return what;
}

struct FileDigests {
  std::string sha256_hex, sha256_base64, md5_hex, md5_base64;
  std::uint64_t size = 0;
};

FileDigests digests_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DeploymentStartupError("modal: cannot read " + path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md5(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
  EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr);
  FileDigests d;
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    const auto n = static_cast<std::size_t>(in.gcount());
    EVP_DigestUpdate(sha.get(), buf.data(), n);
    EVP_DigestUpdate(md5.get(), buf.data(), n);
    d.size += n;
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(sha.get(), out, &len);
  d.sha256_hex = hex_of(out, len);
  d.sha256_base64 = base64_encode(std::string_view(reinterpret_cast<const char*>(out), len));
  EVP_DigestFinal_ex(md5.get(), out, &len);
  d.md5_hex = hex_of(out, len);
  d.md5_base64 = base64_encode(std::string_view(reinterpret_cast<const char*>(out), len));
  return d;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DeploymentConfigError("modal: cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct ModalSandbox {
  asio::any_io_executor executor;
  ModalDeploymentConfig config;
  std::string token_source;  // where the token pair came from, for a refused token's message
  api::Sandbox definition_overrides;
  std::function<void(DeploymentStage, std::string)> report;
  asio::thread_pool calls{1};  // gRPC's blocking calls
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<api::ModalClient::Stub> stub;

  std::string id = random_hex(8);  // the deployment's, in the sandbox's tags
  std::string token;               // rex-server's
  std::string app_id;
  std::string sandbox_id;
  std::string url;
  std::unique_ptr<RemoteRuntime> runtime;
  bool terminated = false;  // the sandbox is ended (or was never made)

  ~ModalSandbox() { calls.join(); }

  void emit(DeploymentStage stage, std::string message) const {
    if (report)
      report(stage, std::move(message));
  }

  void connect() {
    if (stub)
      return;
    const http::Url u = http::parse_url(config.server_url);
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (u.scheme == http::Url::Scheme::https) {
      grpc::SslCredentialsOptions tls;
      for (const char* bundle :
           {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}) {
        if (std::filesystem::exists(bundle)) {
          tls.pem_root_certs = read_file(bundle);
          break;
        }
      }
      if (!config.ca_file.empty())
        tls.pem_root_certs += "\n" + read_file(config.ca_file);
      credentials = grpc::SslCredentials(tls);
    } else {
      credentials = grpc::InsecureChannelCredentials();
    }
    channel = grpc::CreateChannel(fmt::format("{}:{}", u.host, u.port), credentials);
    stub = api::ModalClient::NewStub(channel);
  }

  void prepare(grpc::ClientContext& context, const std::string& idempotency_key, unsigned attempt,
               std::chrono::seconds deadline) const {
    context.AddMetadata("x-modal-token-id", config.token_id);
    context.AddMetadata("x-modal-token-secret", config.token_secret);
    context.AddMetadata("x-modal-client-type", std::string(kClientType));
    context.AddMetadata("x-modal-client-version", std::string(kClientVersion));
    if (!idempotency_key.empty()) {
      context.AddMetadata("x-idempotency-key", idempotency_key);
      context.AddMetadata("x-retry-attempt", std::to_string(attempt - 1));
    }
    context.set_deadline(std::chrono::system_clock::now() + deadline);
  }

  // A failed call's error: a refused token at once, naming where it came from.
  std::string failure(std::string_view rpc, const grpc::Status& status, unsigned attempts) const {
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED)
      return fmt::format("modal: {}: the token from {} was refused: {}: {}", rpc, token_source,
                         code_name(status.error_code()), status.error_message());
    return fmt::format("modal: {}: {}: {}{}", rpc, code_name(status.error_code()),
                       status.error_message(),
                       attempts > 1 ? fmt::format(" ({} attempts)", attempts) : "");
  }

  // One unary call on the calls thread, Modal's transient failures tried again with the same
  // idempotency key.
  template <class Request, class Response>
  asio::awaitable<Response> unary(std::string_view rpc,
                                  grpc::Status (api::ModalClient::Stub::*method)(
                                      grpc::ClientContext*, const Request&, Response*),
                                  Request request,
                                  std::chrono::seconds deadline = std::chrono::seconds(60)) {
    connect();
    const std::string key = random_hex(16);
    auto attempt = [&](unsigned n, bool last) -> asio::awaitable<std::optional<Response>> {
      Response response;
      auto work = [&]() {
        grpc::ClientContext context;
        prepare(context, key, n, deadline);
        return ((*stub).*method)(&context, request, &response);
      };
      auto calling = detail::offload(calls, executor, std::move(work));
      const grpc::Status status = co_await std::move(calling);
      if (status.ok())
        co_return response;
      if (!retryable(status.error_code()) || last)
        throw DeploymentStartupError(failure(rpc, status, n));
      co_return std::nullopt;
    };
    auto calling = retrying<Response>(executor, RetryLoop{}, std::move(attempt));
    co_return co_await std::move(calling);
  }

  std::map<std::string, std::string> labels() const {
    std::map<std::string, std::string> l = config.labels;
    for (auto& [k, v] : owner_labels())
      l[k] = v;
    l[std::string(labels::managed)] = "1";
    l[std::string(labels::deployment)] = id;
    const auto now = rex::detail::unix_seconds();
    l[std::string(labels::expires)] =
        std::to_string(now + static_cast<std::int64_t>(config.deployment_timeout.count()) + 60);
    return l;
  }

  asio::awaitable<std::string> build_image() {
    api::EnvironmentGetOrCreateRequest env_request;
    env_request.set_deployment_name(config.environment);
    auto asking = unary("EnvironmentGetOrCreate", &api::ModalClient::Stub::EnvironmentGetOrCreate,
                        std::move(env_request));
    const api::EnvironmentGetOrCreateResponse environment = co_await std::move(asking);

    api::ImageGetOrCreateRequest request;
    request.mutable_image()->add_dockerfile_commands("FROM " + config.image);
    request.mutable_image()->mutable_gpu_config();
    request.mutable_image()->mutable_image_registry_config();
    request.set_app_id(app_id);
    request.set_namespace_(api::DEPLOYMENT_NAMESPACE_WORKSPACE);
    request.set_builder_version(environment.metadata().settings().image_builder_version());
    auto making =
        unary("ImageGetOrCreate", &api::ModalClient::Stub::ImageGetOrCreate, std::move(request));
    const api::ImageGetOrCreateResponse image = co_await std::move(making);
    api::GenericResult result = image.result();
    std::string log;  // the build's last output, for a failure
    std::string last_entry;
    const auto until = Clock::now() + detail::seconds_to_ms(config.startup_timeout);
    while (result.status() == api::GenericResult::GENERIC_STATUS_UNSPECIFIED) {
      if (Clock::now() > until)
        throw DeploymentStartupError(
            fmt::format("modal: the image {} ({}) was not built within {:g} s", image.image_id(),
                        config.image, config.startup_timeout.count()));
      grpc::Status status;
      auto work = [&]() {
        grpc::ClientContext context;
        prepare(context, {}, 1, std::chrono::seconds(70));
        api::ImageJoinStreamingRequest join;
        join.set_image_id(image.image_id());
        join.set_timeout(55);
        join.set_last_entry_id(last_entry);
        auto reader = stub->ImageJoinStreaming(&context, join);
        api::ImageJoinStreamingResponse message;
        while (reader->Read(&message)) {
          if (!message.entry_id().empty())
            last_entry = message.entry_id();
          for (const auto& l : message.task_logs())
            log += l.data();
          if (log.size() > 4000)
            log.erase(0, log.size() - 4000);
          if (message.has_result() &&
              message.result().status() != api::GenericResult::GENERIC_STATUS_UNSPECIFIED) {
            result = message.result();
            context.TryCancel();
            break;
          }
        }
        status = reader->Finish();
      };
      auto joining = detail::offload(calls, executor, std::move(work));
      co_await std::move(joining);
      if (result.status() == api::GenericResult::GENERIC_STATUS_UNSPECIFIED && !status.ok() &&
          !retryable(status.error_code()))
        throw DeploymentStartupError(failure("ImageJoinStreaming", status, 1));
    }
    if (result.status() != api::GenericResult::GENERIC_STATUS_SUCCESS)
      throw DeploymentStartupError(fmt::format("modal: the image {} ({}) did not build: {}{}",
                                               image.image_id(), config.image, describe(result),
                                               log.empty() ? "" : "; its log ends: " + log));
    co_return image.image_id();
  }

  // PUT of a blob's bytes to the URL BlobCreate gave; Modal's storage answers the MD5 as ETag.
  asio::awaitable<void> put_blob(std::string upload_url, std::string path, const FileDigests& d) {
    const auto scheme_end = upload_url.find("://");
    const auto path_start =
        scheme_end == std::string::npos ? std::string::npos : upload_url.find('/', scheme_end + 3);
    const std::string base = upload_url.substr(0, path_start);
    http::ClientConfig cc;
    cc.timeout = std::chrono::minutes(5);
    cc.ca_file = config.ca_file;
    http::Client client(executor, base, cc);
    http::ClientRequest r;
    r.method = "PUT";
    r.target = path_start == std::string::npos ? "/" : upload_url.substr(path_start);
    r.body_file = std::move(path);
    r.headers.emplace_back("Content-Type", "application/octet-stream");
    const std::string host = client.base_url().host;
    if (host.ends_with(".amazonaws.com") || host.ends_with(".r2.cloudflarestorage.com"))
      r.headers.emplace_back("Content-MD5", d.md5_base64);
    auto putting = client.request(std::move(r));
    const http::ClientResponse got = co_await std::move(putting);
    if (got.status / 100 != 2)
      throw DeploymentStartupError(fmt::format("modal: uploading rex-server to {}: HTTP {}: {}",
                                               base, got.status, got.body.substr(0, 300)));
    std::string etag(got.header("ETag").value_or(""));
    std::erase(etag, '"');
    if (etag != d.md5_hex)
      throw DeploymentStartupError(
          fmt::format("modal: uploading rex-server to {}: the storage's ETag {} is not the "
                      "file's MD5 {}",
                      base, etag.empty() ? "(none)" : etag, d.md5_hex));
  }

  asio::awaitable<std::string> mount_server(std::string local) {
    auto hashing = detail::offload(calls, executor, [local] { return digests_of(local); });
    const FileDigests d = co_await std::move(hashing);
    api::MountBatchedCheckExistenceRequest check;
    check.add_sha256_hex_hashes(d.sha256_hex);
    auto checking = unary("MountBatchedCheckExistence",
                          &api::ModalClient::Stub::MountBatchedCheckExistence, std::move(check));
    const api::MountBatchedCheckExistenceResponse existence = co_await std::move(checking);
    if (existence.missing_sha256_hex_hashes_size() > 0) {
      emit(DeploymentStage::creating, fmt::format("uploading rex-server ({} bytes)", d.size));
      api::MountPutFileRequest put;
      put.set_sha256_hex(d.sha256_hex);
      if (d.size < kInlineLimit) {
        auto reading = detail::offload(calls, executor, [local] { return read_file(local); });
        std::string bytes = co_await std::move(reading);
        put.set_data(std::move(bytes));
      } else {
        api::BlobCreateRequest blob;
        blob.set_content_md5(d.md5_base64);
        blob.set_content_sha256_base64(d.sha256_base64);
        blob.set_content_length(static_cast<std::int64_t>(d.size));
        auto creating = unary("BlobCreate", &api::ModalClient::Stub::BlobCreate, std::move(blob));
        const api::BlobCreateResponse created = co_await std::move(creating);
        std::string upload_url, blob_id;
        if (created.has_upload_urls() && created.upload_urls().items_size() > 0 &&
            created.blob_ids_size() > 0) {
          upload_url = created.upload_urls().items(0);
          blob_id = created.blob_ids(0);
        } else if (created.upload_type_oneof_case() == api::BlobCreateResponse::kUploadUrl) {
          upload_url = created.upload_url();
          blob_id = created.blob_id();
        } else {
          throw DeploymentStartupError(
              "modal: BlobCreate asked for a multipart upload, which this client does not make "
              "(rex-server is a few MB)");
        }
        auto putting = put_blob(upload_url, local, d);
        co_await std::move(putting);
        put.set_data_blob_id(blob_id);
      }
      // Until Modal has the file, at most 10 times.
      auto store = [&](unsigned, bool last) -> asio::awaitable<std::optional<bool>> {
        auto storing = unary("MountPutFile", &api::ModalClient::Stub::MountPutFile,
                             api::MountPutFileRequest(put));
        const api::MountPutFileResponse stored = co_await std::move(storing);
        if (stored.exists())
          co_return true;
        if (last)
          throw DeploymentStartupError("modal: MountPutFile: the file was not stored");
        co_return std::nullopt;
      };
      auto storing = retrying<bool>(executor, RetryLoop{.max_attempts = 10}, std::move(store));
      co_await std::move(storing);
    }
    api::MountGetOrCreateRequest mount;
    mount.set_object_creation_type(api::OBJECT_CREATION_TYPE_ANONYMOUS_OWNED_BY_APP);
    mount.set_app_id(app_id);
    mount.set_environment_name(config.environment);
    api::MountFile* file = mount.add_files();
    file->set_filename(std::string(kServerPath));
    file->set_sha256_hex(d.sha256_hex);
    file->set_size(d.size);
    file->set_mode(0755);
    auto mounting =
        unary("MountGetOrCreate", &api::ModalClient::Stub::MountGetOrCreate, std::move(mount));
    const api::MountGetOrCreateResponse mounted = co_await std::move(mounting);
    co_return mounted.mount_id();
  }

  asio::awaitable<std::string> make_secret() {
    api::SecretGetOrCreateRequest request;
    request.set_object_creation_type(api::OBJECT_CREATION_TYPE_ANONYMOUS_OWNED_BY_APP);
    request.set_app_id(app_id);
    request.set_environment_name(config.environment);
    for (const auto& [k, v] : config.env)
      (*request.mutable_env_dict())[k] = v;
    (*request.mutable_env_dict())["REX_AUTH_TOKEN"] = token;
    auto making =
        unary("SecretGetOrCreate", &api::ModalClient::Stub::SecretGetOrCreate, std::move(request));
    const api::SecretGetOrCreateResponse secret = co_await std::move(making);
    co_return secret.secret_id();
  }

  asio::awaitable<void> create_sandbox(std::string image_id, std::string mount_id,
                                       std::string secret_id) {
    api::SandboxCreateRequest request;
    request.set_app_id(app_id);
    request.set_environment_name(config.environment);
    api::Sandbox& d = *request.mutable_definition();
    for (const std::string& arg :
         {std::string(kServerPath), std::string("--host"), std::string("0.0.0.0"),
          std::string("--port"), std::to_string(config.port), std::string("--max-lifetime"),
          std::to_string(static_cast<std::int64_t>(std::ceil(config.deployment_timeout.count())))})
      d.add_entrypoint_args(arg);
    d.add_mount_ids(mount_id);
    d.set_image_id(image_id);
    d.add_secret_ids(secret_id);
    d.mutable_resources();
    d.set_timeout_secs(static_cast<std::uint32_t>(std::ceil(config.deployment_timeout.count())));
    api::PortSpec* port = d.mutable_open_ports()->add_ports();
    port->set_port(static_cast<std::uint32_t>(config.port));
    port->set_unencrypted(false);
    d.mutable_network_access()->set_network_access_type(api::NetworkAccess::OPEN);
    d.MergeFrom(definition_overrides);
    for (const auto& [k, v] : labels()) {
      api::SandboxTag* tag = request.add_tags();
      tag->set_tag_name(k);
      tag->set_tag_value(v);
    }
    auto creating =
        unary("SandboxCreate", &api::ModalClient::Stub::SandboxCreate, std::move(request));
    const api::SandboxCreateResponse created = co_await std::move(creating);
    sandbox_id = created.sandbox_id();
    terminated = false;
    if (sandbox_id.empty())
      throw DeploymentStartupError("modal: SandboxCreate answered without a sandbox id");
  }

  // SandboxGetTaskId until the sandbox is scheduled; Modal's result if it ended first.
  asio::awaitable<void> wait_until_scheduled() {
    const auto until = Clock::now() + detail::seconds_to_ms(config.startup_timeout);
    asio::steady_timer pause(executor);
    for (;;) {
      api::SandboxGetTaskIdRequest request;
      request.set_sandbox_id(sandbox_id);
      auto asking =
          unary("SandboxGetTaskId", &api::ModalClient::Stub::SandboxGetTaskId, std::move(request));
      const api::SandboxGetTaskIdResponse got = co_await std::move(asking);
      if (got.has_task_result())
        throw DeploymentStartupError(fmt::format("modal: the sandbox {} {} before it was scheduled",
                                                 sandbox_id, describe(got.task_result())));
      if (got.has_task_id() && !got.task_id().empty())
        co_return;
      if (Clock::now() > until)
        throw DeploymentStartupError(
            fmt::format("modal: the sandbox {} was not scheduled within {:g} s", sandbox_id,
                        config.startup_timeout.count()));
      pause.expires_after(std::chrono::milliseconds(500));
      co_await pause.async_wait(asio::use_awaitable);
    }
  }

  asio::awaitable<void> open_tunnel() {
    api::SandboxGetTunnelsRequest request;
    request.set_sandbox_id(sandbox_id);
    request.set_timeout(static_cast<float>(std::min(config.startup_timeout.count(), 50.0)));
    auto asking = unary("SandboxGetTunnels", &api::ModalClient::Stub::SandboxGetTunnels,
                        std::move(request), std::chrono::seconds(70));
    const api::SandboxGetTunnelsResponse got = co_await std::move(asking);
    if (got.result().status() == api::GenericResult::GENERIC_STATUS_TIMEOUT)
      throw DeploymentStartupError(
          fmt::format("modal: the sandbox {}'s tunnel did not open in time", sandbox_id));
    for (const auto& t : got.tunnels()) {
      if (t.container_port() != static_cast<std::uint32_t>(config.port))
        continue;
      url = t.port() == 443 ? "https://" + t.host()
                            : fmt::format("https://{}:{}", t.host(), t.port());
      co_return;
    }
    throw DeploymentStartupError(
        fmt::format("modal: the sandbox {} has no tunnel for port {}", sandbox_id, config.port));
  }

  // How the sandbox ended (SandboxWait, without waiting), or nothing while it runs.
  asio::awaitable<std::optional<api::GenericResult>> poll() {
    api::SandboxWaitRequest request;
    request.set_sandbox_id(sandbox_id);
    request.set_timeout(0);
    auto asking = unary("SandboxWait", &api::ModalClient::Stub::SandboxWait, std::move(request));
    const api::SandboxWaitResponse got = co_await std::move(asking);
    if (got.result().status() == api::GenericResult::GENERIC_STATUS_UNSPECIFIED)
      co_return std::nullopt;
    co_return got.result();
  }

  // "the sandbox ... exited with ..." once it has ended, else empty (also when Modal cannot say).
  asio::awaitable<std::string> how_it_ended() {
    try {
      auto polling = poll();
      if (const auto result = co_await std::move(polling))
        co_return fmt::format("the sandbox {}", describe(*result));
    } catch (const std::exception&) {
    }
    co_return std::string();
  }

  // The entrypoint's stderr so far (SandboxGetLogs, its first 2,000 bytes, or "(none)"), for a
  // server that did not answer or ended its sandbox.
  asio::awaitable<std::string> server_stderr() {
    std::string out;
    auto work = [&]() {
      grpc::ClientContext context;
      prepare(context, {}, 1, std::chrono::seconds(5));
      api::SandboxGetLogsRequest request;
      request.set_sandbox_id(sandbox_id);
      request.set_file_descriptor(api::FILE_DESCRIPTOR_STDERR);
      request.set_timeout(3);
      auto reader = stub->SandboxGetLogs(&context, request);
      api::TaskLogsBatch batch;
      while (reader->Read(&batch) && out.size() < 4000) {
        for (const auto& item : batch.items())
          out += item.data();
        if (batch.eof()) {
          context.TryCancel();
          break;
        }
      }
      (void)reader->Finish();
    };
    try {
      auto reading = detail::offload(calls, executor, std::move(work));
      co_await std::move(reading);
    } catch (const std::exception& e) {
      out += fmt::format("(its logs could not be read: {})", e.what());
    }
    co_return out.empty() ? std::string("(none)") : out.substr(0, 2000);
  }

  asio::awaitable<void> start() {
    const std::string local_server = find_rex_server(config.server_path);
    token = random_hex(16);
    emit(DeploymentStage::creating,
         fmt::format("creating a Modal sandbox from {} at {}", config.image, config.server_url));
    api::AppGetOrCreateRequest app;
    app.set_app_name(config.app_name);
    app.set_environment_name(config.environment);
    app.set_object_creation_type(api::OBJECT_CREATION_TYPE_CREATE_IF_MISSING);
    auto looking = unary("AppGetOrCreate", &api::ModalClient::Stub::AppGetOrCreate, std::move(app));
    const api::AppGetOrCreateResponse found = co_await std::move(looking);
    app_id = found.app_id();

    auto building = build_image();
    const std::string image_id = co_await std::move(building);
    auto mounting = mount_server(local_server);
    const std::string mount_id = co_await std::move(mounting);
    auto keeping = make_secret();
    const std::string secret_id = co_await std::move(keeping);
    auto creating = create_sandbox(image_id, mount_id, secret_id);
    co_await std::move(creating);
    emit(DeploymentStage::starting, fmt::format("sandbox {}: waiting for it to run", sandbox_id));
    // A server that exits at once may end the sandbox before it is scheduled or before its
    // tunnel is asked for: the failure then says how it ended and what the server wrote.
    std::exception_ptr early;
    std::string failure;
    try {
      auto scheduling = wait_until_scheduled();
      co_await std::move(scheduling);
      auto tunneling = open_tunnel();
      co_await std::move(tunneling);
    } catch (const std::exception& e) {
      early = std::current_exception();
      failure = e.what();
    }
    if (early) {
      auto asking = how_it_ended();
      const std::string ended = co_await std::move(asking);
      if (ended.empty())
        std::rethrow_exception(early);
      auto reading = server_stderr();
      const std::string output = co_await std::move(reading);
      throw DeploymentStartupError(fmt::format("{}; {}; its stderr: {}", failure, ended, output));
    }

    RemoteRuntimeConfig rc;
    rc.url = url;
    rc.auth_token = token;
    rc.client.ca_file = config.ca_file;
    runtime = std::make_unique<RemoteRuntime>(executor, std::move(rc));
    emit(DeploymentStage::waiting, "waiting for rex-server at " + url);
    try {
      co_await runtime->wait_until_alive(detail::seconds_to_ms(config.runtime_timeout));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      auto asking = how_it_ended();
      const std::string ended = co_await std::move(asking);
      auto reading = server_stderr();
      const std::string output = co_await std::move(reading);
      throw DeploymentStartupError(fmt::format(
          "modal: rex-server at {} (sandbox {}) did not answer within {:g} s: {}{}; its stderr: {}",
          url, sandbox_id, config.runtime_timeout.count(), failure,
          ended.empty() ? "" : "; " + ended, output));
    }
  }

  asio::awaitable<void> terminate() {
    if (sandbox_id.empty() || terminated)
      co_return;
    api::SandboxTerminateRequest request;
    request.set_sandbox_id(sandbox_id);
    auto ending =
        unary("SandboxTerminate", &api::ModalClient::Stub::SandboxTerminate, std::move(request));
    co_await std::move(ending);
    terminated = true;
  }
};

// A ModalSandbox for `config` with the environment's values filled in and checked.
std::shared_ptr<ModalSandbox> make_impl(asio::any_io_executor executor,
                                        ModalDeploymentConfig config) {
  auto impl = std::make_shared<ModalSandbox>();
  // As Modal's client: the config, else the environment, else the profile of ~/.modal.toml.
  const std::optional<ModalProfile> profile = find_modal_profile();
  auto from_profile = [&profile](std::string value, const char* key) {
    if (value.empty() && profile) {
      const auto it = profile->settings.find(key);
      if (it != profile->settings.end())
        value = it->second;
    }
    return value;
  };
  const std::string profile_name =
      profile ? fmt::format("profile {} of {}", profile->name, profile->file) : std::string();
  if (!config.token_id.empty() || !config.token_secret.empty())
    impl->token_source = "the config";
  else if (!from_env({}, "MODAL_TOKEN_ID").empty())
    impl->token_source = "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET";
  else
    impl->token_source = profile_name;
  config.token_id = from_profile(from_env(config.token_id, "MODAL_TOKEN_ID"), "token_id");
  config.token_secret =
      from_profile(from_env(config.token_secret, "MODAL_TOKEN_SECRET"), "token_secret");
  if (config.token_id.empty() || config.token_secret.empty())
    throw DeploymentConfigError(fmt::format(
        "modal: no token: set token_id and token_secret in the config, MODAL_TOKEN_ID and "
        "MODAL_TOKEN_SECRET, or both in a profile of ~/.modal.toml (`modal token new` writes "
        "one){}",
        profile ? fmt::format("; {} has {}", profile_name,
                              config.token_id.empty() && config.token_secret.empty()
                                  ? "neither"
                                  : "only one of them")
                : std::string()));
  std::string server = from_profile(from_env(config.server_url, "MODAL_SERVER_URL"), "server_url");
  if (const auto comma = server.find(','); comma != std::string::npos)
    server.resize(comma);  // Modal's SDKs race a list of fallbacks; the first is the service
  config.server_url = detail::checked_base_url(
      server.empty() ? std::string(kDefaultServerUrl) : std::move(server), "modal.server_url");
  if (http::parse_url(config.server_url).scheme == http::Url::Scheme::http_unix)
    throw DeploymentConfigError("modal.server_url: expected an http:// or https:// URL");
  config.environment =
      from_profile(from_env(config.environment, "MODAL_ENVIRONMENT"), "environment");
  if (config.port <= 0 || config.port > 65535)
    throw DeploymentConfigError(fmt::format("modal.port: {} is not a TCP port", config.port));
  if (!config.ca_file.empty() && !std::filesystem::is_regular_file(config.ca_file))
    throw DeploymentConfigError("modal.ca_file: no such file: " + config.ca_file);
  if (!config.sandbox_definition.empty()) {
    const auto status = google::protobuf::util::JsonStringToMessage(
        boost::json::serialize(config.sandbox_definition), &impl->definition_overrides);
    if (!status.ok())
      throw DeploymentConfigError(
          fmt::format("modal.sandbox_definition: not fields of Modal's Sandbox message: {}",
                      std::string(status.message())));
  }
  impl->executor = std::move(executor);
  impl->config = std::move(config);
  return impl;
}

}  // namespace

ModalDeploymentConfig resolve_modal_config(ModalDeploymentConfig config) {
  return make_impl(asio::any_io_executor(), std::move(config))->config;
}

asio::awaitable<StartedSandbox> create_modal_sandbox(asio::any_io_executor executor,
                                                     ModalDeploymentConfig config,
                                                     std::string working_dir,
                                                     std::string deployment_id,
                                                     SandboxProgress progress) {
  auto s = make_impl(std::move(executor), std::move(config));
  if (!deployment_id.empty())
    s->id = std::move(deployment_id);
  // Nothing is left running: a sandbox this start made is terminated.
  return detail::start_cloud_sandbox("modal", std::move(s), &ModalSandbox::terminate, "terminating",
                                     std::move(working_dir), std::move(progress));
}

asio::awaitable<std::optional<std::string>> modal_sandbox_lost(asio::any_io_executor executor,
                                                               ModalDeploymentConfig config,
                                                               std::string sandbox_id) {
  auto s = make_impl(std::move(executor), std::move(config));
  s->sandbox_id = std::move(sandbox_id);
  auto polling = s->poll();
  const std::optional<api::GenericResult> result = co_await std::move(polling);
  if (!result)
    co_return std::nullopt;
  co_return fmt::format("the sandbox {} {}", s->sandbox_id, describe(*result));
}

ModalDeployment::ModalDeployment(asio::any_io_executor executor, ModalDeploymentConfig config)
    : SandboxDeployment(executor, open_modal_backend(executor, config), SandboxRequest{}),
      config_(resolve_modal_config(std::move(config))) {}

asio::awaitable<void> terminate_modal_sandbox(asio::any_io_executor executor,
                                              ModalDeploymentConfig config,
                                              std::string sandbox_id) {
  auto impl = make_impl(std::move(executor), std::move(config));
  impl->sandbox_id = std::move(sandbox_id);
  auto ending = impl->terminate();
  co_await std::move(ending);
}

asio::awaitable<std::vector<ModalSandboxListing>> list_modal_sandboxes(
    asio::any_io_executor executor, ModalDeploymentConfig config,
    std::map<std::string, std::string> tags) {
  auto impl = make_impl(std::move(executor), std::move(config));
  std::vector<ModalSandboxListing> out;
  double before = 0;  // newest first: each page asks for those older than the last one's
  for (int page = 0; page < 100; ++page) {
    api::SandboxListRequest request;
    request.set_environment_name(impl->config.environment);
    request.set_before_timestamp(before);
    for (const auto& [k, v] : tags) {
      api::SandboxTag* tag = request.add_tags();
      tag->set_tag_name(k);
      tag->set_tag_value(v);
    }
    auto listing =
        impl->unary("SandboxList", &api::ModalClient::Stub::SandboxList, std::move(request));
    const api::SandboxListResponse got = co_await std::move(listing);
    if (got.sandboxes_size() == 0)
      break;
    for (const auto& info : got.sandboxes()) {
      ModalSandboxListing l;
      l.sandbox_id = info.id();
      l.created_at = info.created_at();
      l.running =
          info.task_info().result().status() == api::GenericResult::GENERIC_STATUS_UNSPECIFIED;
      for (const auto& t : info.tags())
        l.tags[t.tag_name()] = t.tag_value();
      bool all = true;  // the filter is the server's; this checks it
      for (const auto& [k, v] : tags)
        all = all && l.tags.contains(k) && l.tags.at(k) == v;
      if (all)
        out.push_back(std::move(l));
      before = before == 0 ? info.created_at() : std::min(before, info.created_at());
    }
  }
  co_return out;
}

}  // namespace rex
