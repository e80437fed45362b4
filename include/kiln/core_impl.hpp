#pragma once
// The definitions of kiln's non-template functions, and the instances of kiln/instances.hpp
// (see kiln/linkage.hpp): compiled once, by <kiln/jit/src.hpp>, where KILN_COMPILED_CORE is
// defined.
#include "kiln/backend_impl.hpp"
#include "kiln/contractions/einsum_plan_impl.hpp"
#include "kiln/contractions/form_impl.hpp"
#include "kiln/contractions/gemm_impl.hpp"
#include "kiln/contractions/strip_pass_impl.hpp"
#include "kiln/core.hpp"
#include "kiln/device_impl.hpp"
#include "kiln/error_impl.hpp"
#include "kiln/eval/device_pass_impl.hpp"
#include "kiln/eval/device_reduce_impl.hpp"
#include "kiln/eval/host_pass_impl.hpp"
#include "kiln/eval/iteration_space_impl.hpp"
#include "kiln/eval/planner_impl.hpp"
#include "kiln/eval/thread_pool_impl.hpp"
#include "kiln/executor_impl.hpp"
#include "kiln/expr_impl.hpp"
#include "kiln/instances_impl.hpp"
#include "kiln/ir/lower_impl.hpp"
#include "kiln/shape_impl.hpp"
#include "kiln/storage_impl.hpp"
