#include <cstdio>
int main() { std::puts("rex"); }
