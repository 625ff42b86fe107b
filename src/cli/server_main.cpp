// rex-server (also installed as swerex-remote): serves this machine's bash sessions, processes
// and files over HTTP with SWE-ReX's protocol. `rex-server --auth-token TOKEN [--port 8000]`.
#include <rex/protocol/exceptions.hpp>
#include <rex/version.hpp>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "core/file_system.hpp"
#include "core/unique_fd.hpp"
#include "server_command.hpp"

namespace {

// `rex-server --install PATH`: copies this executable to PATH (mode 0755, whole or not at all),
// for an image that holds nothing else to hand the server over (a Kubernetes init container
// copying it into a volume the sandbox's container shares).
int install(const std::string& target) {
  try {
    rex::detail::UniqueFd self(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
    if (self.get() < 0)
      rex::throw_os_error(errno, "/proc/self/exe");
    rex::detail::ReplaceOptions options;
    options.mode = 0755;
    rex::detail::replace_file(
        target, [&](int fd) { rex::detail::copy_fd(self.get(), fd, "/proc/self/exe", target); },
        options);
  } catch (const std::exception& e) {
    std::cerr << "rex-server --install " << target << ": " << e.what() << '\n';
    return 1;
  }
  std::cout << "rex-server " << rex::version() << " installed at " << target << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--install") == 0) {
    if (argc != 3) {
      std::cerr << "usage: rex-server --install PATH\n";
      return 2;
    }
    return install(argv[2]);
  }
  // As swerex-remote: -v/--version prints only the version and refuses other arguments.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      if (argc > 2) {
        std::cout << "Error: --version cannot be combined with other arguments\n";
        return 1;
      }
      std::cout << rex::version() << '\n';
      return 0;
    }
  }
  CLI::App app{"rex-server: serve bash sessions, processes and files over HTTP (SWE-ReX protocol)"};
  rex::cli::ServerOptions options;
  rex::cli::add_server_options(app, options);
  CLI11_PARSE(app, argc, argv);
  return rex::cli::run_server(options);
}
