// Holds the tests' precompiled header (tests/CMakeLists.txt: baton_test_pch);
// it tests nothing and is not run.
int main() { return 0; }
