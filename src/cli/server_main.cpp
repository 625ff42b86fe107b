// rex-server (also installed as swerex-remote): serves this machine's bash sessions, processes
// and files over HTTP with SWE-ReX's protocol. `rex-server --auth-token TOKEN [--port 8000]`.
#include <rex/version.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "server_command.hpp"

namespace {

// `rex-server --install PATH`: copies this executable to PATH (mode 0755, whole or not at all),
// for an image that holds nothing else to hand the server over (a Kubernetes init container
// copying it into a volume the sandbox's container shares).
int install(const std::string& target) {
  const auto fail = [&](const char* what) {
    std::cerr << "rex-server --install " << target << ": " << what << ": " << std::strerror(errno)
              << '\n';
    return 1;
  };
  const int in = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return fail("cannot read this executable");
  const std::string temp = target + ".part";
  const int out = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0)
    return fail("cannot create the file");
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(in, buffer, sizeof buffer);
    if (n == 0)
      break;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail("cannot read this executable");
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buffer + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno != EINTR)
        return fail("cannot write");
      done += w > 0 ? w : 0;
    }
  }
  if (::fchmod(out, 0755) != 0 || ::fsync(out) != 0 || ::close(out) != 0)
    return fail("cannot finish the file");
  ::close(in);
  if (::rename(temp.c_str(), target.c_str()) != 0)
    return fail("cannot move it into place");
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
