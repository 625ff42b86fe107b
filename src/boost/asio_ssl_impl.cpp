// Asio's OpenSSL layer, compiled once and apart from the rest of Asio, so executables that use
// no TLS (rex-server) do not pull OpenSSL in.
#include <boost/asio/ssl/impl/src.hpp>
