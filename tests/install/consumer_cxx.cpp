// consumer_cxx.cpp - the public header compiles as C++ and links from C++
// (extern "C"); built by tests/install/run.sh through find_package(tpla).
#include <tpla.h>

#include <cstdio>

int main() {
  tpla_features_t features = TPLA_FEATURES_INIT;
  if (tpla_get_features(&features, -1) != TPLA_SUCCESS || tpla_version() != TPLA_VERSION) {
    std::fprintf(stderr, "consumer_cxx: %s\n", tpla_last_error());
    return 1;
  }
  std::printf("consumer_cxx: OK (%s)\n", tpla_status_string(TPLA_ERROR_TIMEOUT));
  return 0;
}
