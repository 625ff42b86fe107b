// REX_TEST_SANITIZED is 1 in a build under AddressSanitizer or ThreadSanitizer (g++ defines
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang answers __has_feature instead). Tests that
// push large amounts of data or many iterations through instrumented code use less of them
// then: what they check does not depend on the amount.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REX_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REX_TEST_SANITIZED 1
#endif
#endif
#ifndef REX_TEST_SANITIZED
#define REX_TEST_SANITIZED 0
#endif
