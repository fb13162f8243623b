//! Generates include/eintup.h from the crate's `extern "C"` functions,
//! types and constants with cbindgen, so that the header never drifts from
//! the library. It is committed too, for C users who do not build the
//! crate; cbindgen rewrites it only when its text changes.

use std::path::Path;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap_or_else(|e| panic!("cbindgen.toml: {e}"));
    // The sources alone (no `cargo metadata` inside the build): the crate
    // root and the modules it declares.
    let header =
        cbindgen::Builder::new().with_config(config).with_src(dir.join("src/lib.rs")).generate().unwrap_or_else(|e| panic!("generating include/eintup.h: {e}"));
    header.write_to_file(dir.join("include/eintup.h"));
}
