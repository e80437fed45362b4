// The catalog's math checks (catalog_math.hpp) on the Vulkan device against the host.
#include "vulkan_support.hpp"

#define KILN_CATALOG_DEVICE vulkan_or_skip
#define KILN_CATALOG_NAME "vulkan catalog: "
#define KILN_CATALOG_TAGS "[vulkan][catalog]"
#include "catalog_math.hpp"
