// A started deployment behind the Runtime interface, for suites (the runtime conformance suite)
// that take a Runtime: start() in the constructor, stop() in the destructor, every call passed
// to the deployment's runtime.
#pragma once

#include <rex/deployment/deployment.hpp>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <utility>

#include "support/async_test.hpp"

namespace rex::test {

template <class D>
class DeployedRuntime final : public Runtime {
 public:
  template <class Config>
  DeployedRuntime(asio::io_context& io, Config config)
      : io_(io), deployment_(io.get_executor(), std::move(config)) {
    run_async(io_, deployment_.start(), std::chrono::seconds(120));
  }
  ~DeployedRuntime() override {
    try {
      run_async(io_, deployment_.stop(), std::chrono::seconds(60));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stopping the deployment: " << e.what();
    }
  }

  asio::awaitable<IsAliveResponse> is_alive() override { return rt().is_alive(); }
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override {
    return rt().create_session(std::move(r));
  }
  asio::awaitable<BashObservation> run_in_session(Action a) override {
    return rt().run_in_session(std::move(a));
  }
  asio::awaitable<BashObservation> run_in_session_streaming(Action a, OutputListener l) override {
    return rt().run_in_session_streaming(std::move(a), std::move(l));
  }
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override {
    return rt().close_session(std::move(r));
  }
  asio::awaitable<CommandResponse> execute(Command c) override {
    return rt().execute(std::move(c));
  }
  asio::awaitable<CaptureSessionsResponse> capture_sessions(CaptureSessionsRequest r) override {
    return rt().capture_sessions(std::move(r));
  }
  asio::awaitable<RestoreSessionsResponse> restore_sessions(RestoreSessionsRequest r) override {
    return rt().restore_sessions(std::move(r));
  }
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override {
    return rt().read_file(std::move(r));
  }
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override {
    return rt().write_file(std::move(r));
  }
  asio::awaitable<UploadResponse> upload(UploadRequest r) override {
    return rt().upload(std::move(r));
  }
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override {
    return rt().download(std::move(r));
  }
  asio::awaitable<CloseResponse> close() override { return rt().close(); }

 private:
  Runtime& rt() { return deployment_.runtime(); }
  asio::io_context& io_;
  D deployment_;
};

}  // namespace rex::test
