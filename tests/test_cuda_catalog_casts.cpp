// The catalog's casts checks (catalog_casts.hpp) on the CUDA device against the host.
#include "cuda_support.hpp"

#define KILN_CATALOG_DEVICE cuda_or_skip
#define KILN_CATALOG_NAME "cuda catalog: "
#define KILN_CATALOG_TAGS "[cuda][catalog]"
#include "catalog_casts.hpp"
