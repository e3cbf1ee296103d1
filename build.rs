//! Compiles the Cython modules into `_core` (docs/build.md, "Cython, when the assignors arrive").
//!
//! Each `.pyx` below is translated to C by `python -m cython` (the interpreter maturin builds for,
//! `$PYO3_PYTHON`, else `python3`), compiled by the `cc` crate against that interpreter's headers
//! for the limited API, and linked into the cdylib; rust/cython.rs calls its `PyInit_<name>()`.
//! Cross-compiled wheels (ci/build_wheels.sh: aarch64 on x86-64) use the build interpreter's
//! headers too; see `check_headers_fit_target`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (source, module name it is registered under)
const CYTHON_MODULES: &[(&str, &str)] = &[
    ("src/corral/assignors/_assign.pyx", "corral._core._assign"),
    ("src/corral/analyze/_lag.pyx", "corral._core._lag"),
];

fn python() -> String {
    env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn python_eval(python: &str, code: &str) -> String {
    let out = Command::new(python)
        .args(["-c", code])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "{python} -c {code:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Under the limited API the only parts of the interpreter's pyconfig.h that shape the ABI are the
/// C type sizes and the byte order (an x86-64 and an aarch64 Linux pyconfig.h differ otherwise only
/// in what the interpreter itself was built with: x87 asm, optional libraries): they must be the
/// target's. On the Unix targets corral builds for, long and Py_ssize_t are pointer-sized (LP64).
fn check_headers_fit_target(python: &str) {
    let headers = python_eval(
        python,
        "import sys, sysconfig; print(sysconfig.get_config_var('SIZEOF_VOID_P') * 8, sys.byteorder)",
    );
    let target = format!(
        "{} {}",
        env::var("CARGO_CFG_TARGET_POINTER_WIDTH").unwrap(),
        env::var("CARGO_CFG_TARGET_ENDIAN").unwrap()
    );
    assert!(
        headers == target,
        "{python}'s headers (pointer bits, byte order: {headers}) do not fit the target {} \
         ({target}); build with an interpreter of a platform that matches",
        env::var("TARGET").unwrap()
    );
}

fn main() {
    let python = python();
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    check_headers_fit_target(&python);
    let include = python_eval(
        &python,
        "import sysconfig; print(sysconfig.get_paths()['include'])",
    );
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    let mut build = cc::Build::new();
    build
        .include(&include)
        // One binary for every CPython >= 3.11, like the rest of the abi3 wheel.
        .define("Py_LIMITED_API", "0x030B0000")
        .define("CYTHON_LIMITED_API", "1")
        // Single-phase init: PyInit_<name>() returns the module itself, so Rust can register it.
        .define("CYTHON_PEP489_MULTI_PHASE_INIT", "0")
        .opt_level(2)
        // Cython's generated C has unused functions and labels by design.
        .warnings(false);
    for (source, module) in CYTHON_MODULES {
        println!("cargo:rerun-if-changed={source}");
        // The parts it `include`s sit beside it.
        let dir = Path::new(source).parent().unwrap();
        for entry in
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|ext| ext == "pxi") {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        let stem = Path::new(source).file_stem().unwrap().to_str().unwrap();
        let c_file = out_dir.join(format!("{stem}.c"));
        let status = Command::new(&python)
            .args(["-m", "cython", "-3", "--module-name", module, "-o"])
            .arg(&c_file)
            .arg(source)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {python} -m cython: {e}"));
        assert!(
            status.success(),
            "{python} -m cython {source} failed (is Cython >= 3.1 installed for {python}? \
             `pip install 'cython>=3.1,<4'`)"
        );
        build.file(&c_file);
    }
    build.compile("corral_cython");
}
