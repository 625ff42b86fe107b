// Boost.Asio, and its OpenSSL layer, compiled once for the whole library
// (BOOST_ASIO_SEPARATE_COMPILATION).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
