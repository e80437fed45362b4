// The tests' precompiled header (tests/CMakeLists.txt): what nearly every test file includes
// first. Catch's external interfaces are declared for all (vulkan_support.hpp needs them to
// register its listener, and a precompiled Catch cannot be included again with them).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include "support.hpp"
