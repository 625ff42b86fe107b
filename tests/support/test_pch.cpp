// The translation unit of rex_test_pch (tests/CMakeLists.txt), the target that makes the test
// executables' precompiled header: it holds nothing else, so a build that needs one test
// executable compiles no other's sources for the header.
