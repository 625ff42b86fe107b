// Boost.Beast compiled once for the whole library (BOOST_BEAST_SEPARATE_COMPILATION).
#include <boost/beast/src.hpp>
