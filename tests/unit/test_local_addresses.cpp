// This machine's addresses as connect: auto sees them. Every machine has loopback (127.0.0.1 on
// lo, and no other address of 127.0.0.0/8); 240.0.0.0/4 is reserved and not assigned.
#include <gtest/gtest.h>

#include "deployment/local_addresses.hpp"

namespace rex::detail {
namespace {

TEST(LocalAddresses, LoopbackIsLocal) {
  EXPECT_TRUE(is_local_address("127.0.0.1"));
  EXPECT_FALSE(is_local_address("240.0.0.1"));
  EXPECT_FALSE(is_local_address("127.0.0.2"));
  EXPECT_FALSE(is_local_address(""));
  EXPECT_FALSE(is_local_address("not an address"));
}

TEST(LocalAddresses, ASubnetHoldingOneOfOurAddressesIsLocal) {
  EXPECT_TRUE(has_local_address_in("127.0.0.0/8"));
  EXPECT_TRUE(has_local_address_in("127.0.0.1/32"));
  EXPECT_TRUE(has_local_address_in("127.0.0.0/9"));  // a prefix that does not end on a byte
  EXPECT_FALSE(has_local_address_in("240.0.0.0/24"));
  EXPECT_FALSE(has_local_address_in("127.0.0.2/32"));
}

TEST(LocalAddresses, WhatIsNoSubnetIsNotLocal) {
  EXPECT_FALSE(has_local_address_in("0.0.0.0/0"));  // a default route says nothing
  EXPECT_FALSE(has_local_address_in("127.0.0.0/33"));
  EXPECT_FALSE(has_local_address_in("127.0.0.0"));
  EXPECT_FALSE(has_local_address_in("127.0.0.0/"));
  EXPECT_FALSE(has_local_address_in("127.0.0.0/8x"));
  EXPECT_FALSE(has_local_address_in("fd00::/129"));
  EXPECT_FALSE(has_local_address_in("garbage/8"));
  EXPECT_FALSE(has_local_address_in(""));
}

TEST(LocalAddresses, AnAddressOnTheNetworkOfOneOfOurInterfacesIsOnALocalNetwork) {
  EXPECT_TRUE(on_local_network("127.0.0.1"));
  EXPECT_TRUE(on_local_network("127.3.2.1"));  // lo is 127.0.0.0/8
  EXPECT_FALSE(on_local_network("240.0.0.1"));
  EXPECT_FALSE(on_local_network(""));
  EXPECT_FALSE(on_local_network("pod"));
}

}  // namespace
}  // namespace rex::detail
