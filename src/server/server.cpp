#include <rex/server/server.hpp>

#include "server/swerex_routes.hpp"

namespace rex::server {

Server::Server(asio::any_io_executor executor, Runtime& runtime, ServerConfig config)
    : Service(executor, swerex_routes(executor, runtime, config), config) {}

}  // namespace rex::server
