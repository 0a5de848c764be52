//! Own code first: the frame chosen for a thread is the innermost one in
//! the user's own code, skipping the C library, the dynamic loader, the
//! compiler runtime and, in Rust, `std`, `core`, `alloc` and crates from the
//! cargo registry. Without line information a frame is not own code (the C
//! library of a static program has none), so a program built without `-g`
//! has no own frame and the innermost one is shown.

/// Source paths of code that is not the user's.
const RUNTIME_PATHS: &[&str] = &[
    "/rustc/",
    "/.cargo/registry/",
    "/.cargo/git/",
    "/.rustup/toolchains/",
    "/library/std/",
    "/library/core/",
    "/library/alloc/",
    "/library/panic_unwind/",
    "/library/panic_abort/",
    "/compiler_builtins",
    "/compiler-rt/",
    "/libgcc/",
    "/glibc-",
    "/musl-",
    "/usr/include/",
    "/usr/lib/gcc/",
];

/// Function name prefixes of code that is not the user's.
const RUNTIME_FUNCTIONS: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "<std::",
    "<core::",
    "<alloc::",
    "__rust",
    "rust_begin_unwind",
    "compiler_builtins::",
    "_start",
    "__libc_",
    "_dl_",
    "__GI_",
    "start_thread",
    "__pthread",
    "pthread_",
    "__clone",
];

/// Where the system's shared libraries are: a file mapped from there (the
/// C library with its detached debug info, say) is not the user's.
const SYSTEM_LIBRARY_DIRS: &[&str] = &["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"];

/// Whether the ELF file at this path is one of the system's libraries.
pub fn is_system_library(path: &str) -> bool {
    SYSTEM_LIBRARY_DIRS.iter().any(|d| path.starts_with(d))
}

/// Whether a frame with this function and source file is the user's own code.
pub fn is_own(function: Option<&str>, file: Option<&str>) -> bool {
    let Some(file) = file else { return false };
    if RUNTIME_PATHS.iter().any(|p| file.contains(p)) {
        return false;
    }
    !function.is_some_and(|f| RUNTIME_FUNCTIONS.iter().any(|p| f.starts_with(p)))
}

#[cfg(test)]
mod tests {
    use super::is_own;

    #[test]
    fn user_code_is_own() {
        assert!(is_own(Some("worker"), Some("/src/pool.c")));
        assert!(is_own(Some("threads::main"), Some("/src/threads.rs")));
        assert!(is_own(None, Some("/src/pool.c")));
    }

    #[test]
    fn runtime_is_not() {
        assert!(!is_own(Some("__lll_lock_wait"), None));
        assert!(!is_own(
            Some("std::thread::JoinInner<T>::join"),
            Some("/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/thread/mod.rs")
        ));
        assert!(!is_own(
            Some("hashbrown::map::HashMap::insert"),
            Some("/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hashbrown-0.14.0/src/map.rs")
        ));
        assert!(!is_own(Some("_start"), Some("/src/start.S")));
        assert!(super::is_system_library("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(!super::is_system_library("/home/u/src/prog"));
    }
}
