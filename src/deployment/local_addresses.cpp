#include "deployment/local_addresses.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>
#include <string_view>
#include <system_error>

namespace rex::detail {

bool is_local_address(const std::string& address) {
  in6_addr v6{};
  in_addr v4{};
  const bool is_v4 = ::inet_pton(AF_INET, address.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && ::inet_pton(AF_INET6, address.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6)
    return false;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr)
      continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      found = in->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && a->ifa_addr->sa_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      found = std::memcmp(&in->sin6_addr, &v6, sizeof v6) == 0;
    }
  }
  ::freeifaddrs(list);
  return found;
}

bool has_local_address_in(const std::string& subnet) {
  const auto slash = subnet.find('/');
  if (slash == std::string::npos)
    return false;
  const std::string base = subnet.substr(0, slash);
  const std::string_view bits_text = std::string_view(subnet).substr(slash + 1);
  unsigned bits = 0;
  const auto [end, error] =
      std::from_chars(bits_text.data(), bits_text.data() + bits_text.size(), bits);
  if (error != std::errc{} || end != bits_text.data() + bits_text.size())
    return false;
  unsigned char prefix[16]{};
  std::size_t size = 0;
  int family = AF_INET;
  if (::inet_pton(AF_INET, base.c_str(), prefix) == 1) {
    size = 4;
  } else if (::inet_pton(AF_INET6, base.c_str(), prefix) == 1) {
    size = 16;
    family = AF_INET6;
  } else {
    return false;
  }
  if (bits == 0 || bits > size * 8)
    return false;  // a default route's "subnet" says nothing about this machine
  auto in_prefix = [&](const unsigned char* address) {
    for (unsigned bit = 0; bit < bits; ++bit) {
      const unsigned mask = 0x80u >> (bit % 8);
      if ((address[bit / 8] & mask) != (prefix[bit / 8] & mask))
        return false;
    }
    return true;
  };
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family)
      continue;
    if (family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      found = in_prefix(reinterpret_cast<const unsigned char*>(&in->sin_addr));
    } else {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      found = in_prefix(reinterpret_cast<const unsigned char*>(&in->sin6_addr));
    }
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace rex::detail
