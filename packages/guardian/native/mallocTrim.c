/*
 * mallocTrim.node: one function, `trim()`, which calls glibc's malloc_trim(0) and answers whether
 * it gave memory back to the operating system. Node has no call for it.
 *
 * Why (D92): V8 compiles PGlite's WebAssembly in glibc's heap (one function's optimising compile
 * alone takes ~600 MB of it) and frees it, but glibc returns freed memory only from the top of a
 * heap; what is freed below live allocations stays resident for the process's life. malloc_trim
 * releases those free pages too: 70-100 MB in each idle embedded process (2026-12-01).
 *
 * Built by build.sh at `pnpm install`; loaded by src/ProcessMemory.ts when present.
 */
#include <malloc.h>
#include <node_api.h>

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, malloc_trim(0) == 1, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value trim;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &trim) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", trim) != napi_ok) return NULL;
  return exports;
}
