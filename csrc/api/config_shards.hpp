// config_shards.hpp -- one kernel family's configurations compiled in several translation units.
//
// A CUTLASS configuration costs seconds of one core to compile, and a family holds up to dozens.
// So that a many-core machine builds a family in parallel, kernels/build.py compiles the family's
// source once per shard with -DISW_SHARDED_BUILD -DISW_SHARD=k -DISW_SHARDS=n: shard k instantiates
// the kernels of the rows whose index i has i % n == k (the other rows are null there, as rows of
// an element type the build leaves out are), and exports its entry as <entry>_shard<k>.
// swiglu_api.cu routes each configuration to the shard that holds it (kernel_shards.inc, generated
// by the build).  Outside the library build (the host checks include the sources directly) there
// is one shard under the entry's own name.  Shard entries are defined `extern const`: a namespace-scope
// const object has internal linkage otherwise.
#pragma once

#ifndef ISW_SHARDS
#define ISW_SHARDS 1
#define ISW_SHARD 0
#endif

#define ISW_CAT_(a, b) a##b
#define ISW_CAT(a, b) ISW_CAT_(a, b)
#ifdef ISW_SHARDED_BUILD
#define ISW_SHARD_ENTRY(entry) ISW_CAT(entry, ISW_CAT(_shard, ISW_SHARD))
#else
#define ISW_SHARD_ENTRY(entry) entry
#endif

namespace isw {

constexpr bool same_name(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_name(a + 1, b + 1));
}

// The row of `name` in a family's configuration names (-1 if absent), at compile time.
template <int N>
constexpr int config_index(const char* const (&names)[N], const char* name, int i = 0) {
  return i >= N ? -1 : same_name(names[i], name) ? i : config_index(names, name, i + 1);
}

// Whether this translation unit compiles the kernels of row `index`.
constexpr bool in_this_shard(int index) { return index >= 0 && index % ISW_SHARDS == ISW_SHARD; }

}  // namespace isw
