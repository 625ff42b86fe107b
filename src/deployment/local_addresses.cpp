#include "deployment/local_addresses.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <charconv>
#include <string_view>
#include <system_error>

namespace rex::detail {
namespace {

// An address or network prefix in network byte order.
struct Prefix {
  int family = AF_INET;
  unsigned char bytes[16]{};
  unsigned bits = 0;  // 32 or 128 for a single address
};

// IPv4 or IPv6 text into a Prefix of its full length; false when it is neither.
bool parse_address(const std::string& text, Prefix& out) {
  if (::inet_pton(AF_INET, text.c_str(), out.bytes) == 1) {
    out.family = AF_INET;
    out.bits = 32;
    return true;
  }
  if (::inet_pton(AF_INET6, text.c_str(), out.bytes) == 1) {
    out.family = AF_INET6;
    out.bits = 128;
    return true;
  }
  return false;
}

// Whether one of this machine's interface addresses starts with `prefix`.
bool has_local_address(const Prefix& prefix) {
  auto matches = [&](const unsigned char* address) {
    for (unsigned bit = 0; bit < prefix.bits; ++bit) {
      const unsigned mask = 0x80u >> (bit % 8);
      if ((address[bit / 8] & mask) != (prefix.bytes[bit / 8] & mask))
        return false;
    }
    return true;
  };
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != prefix.family)
      continue;
    if (prefix.family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      found = matches(reinterpret_cast<const unsigned char*>(&in->sin_addr));
    } else {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      found = matches(reinterpret_cast<const unsigned char*>(&in->sin6_addr));
    }
  }
  ::freeifaddrs(list);
  return found;
}

// The bytes of an interface address of `family`, or nullptr.
const unsigned char* address_bytes(const sockaddr* a, int family) {
  if (a == nullptr || a->sa_family != family)
    return nullptr;
  if (family == AF_INET)
    return reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(a)->sin_addr);
  return reinterpret_cast<const unsigned char*>(
      &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

}  // namespace

bool on_local_network(const std::string& address) {
  Prefix target;
  if (!parse_address(address, target))
    return false;
  const std::size_t size = target.family == AF_INET ? 4 : 16;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return false;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    const unsigned char* mine = address_bytes(a->ifa_addr, target.family);
    const unsigned char* mask = address_bytes(a->ifa_netmask, target.family);
    if (mine == nullptr || mask == nullptr)
      continue;
    bool any_bit = false;
    bool same = true;
    for (std::size_t i = 0; i < size; ++i) {
      any_bit = any_bit || mask[i] != 0;
      same = same && (mine[i] & mask[i]) == (target.bytes[i] & mask[i]);
    }
    found = any_bit && same;
  }
  ::freeifaddrs(list);
  return found;
}

bool is_local_address(const std::string& address) {
  Prefix prefix;
  return parse_address(address, prefix) && has_local_address(prefix);
}

bool has_local_address_in(const std::string& subnet) {
  const auto slash = subnet.find('/');
  Prefix prefix;
  if (slash == std::string::npos || !parse_address(subnet.substr(0, slash), prefix))
    return false;
  const std::string_view bits_text = std::string_view(subnet).substr(slash + 1);
  unsigned bits = 0;
  const auto [end, error] =
      std::from_chars(bits_text.data(), bits_text.data() + bits_text.size(), bits);
  if (error != std::errc{} || end != bits_text.data() + bits_text.size())
    return false;
  if (bits == 0 || bits > prefix.bits)
    return false;  // a default route's "subnet" says nothing about this machine
  prefix.bits = bits;
  return has_local_address(prefix);
}

}  // namespace rex::detail
