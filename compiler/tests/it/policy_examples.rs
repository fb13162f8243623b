//! Every framework call shipped with eintup passes the call policy
//! (`eintup::check::policy`, docs/check.md): the examples in
//! `docs/examples/` and the benchmark programs in `bench/ops/`. Needs no
//! TensorFlow; `test/check/examples.test` runs the examples against it.

use eintup::check::policy::{vet_function, vet_keyword};
use std::path::{Path, PathBuf};

fn et_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "et"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_call_is_allowed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("compiler/ has a parent");
    let mut calls = 0;
    for dir in ["docs/examples", "bench/ops"] {
        for file in et_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = et_grammar::parse_file(&text).unwrap_or_else(|d| panic!("{}: {d:?}", file.display()));
            let Some(call) = ast.call else { continue };
            let name = call.func_name();
            assert_eq!(vet_function(&name), Ok(()), "{}: {name}", file.display());
            for kw in call.args.iter().filter_map(|a| a.keyword.as_ref()) {
                assert_eq!(vet_keyword(&kw.name), Ok(()), "{}: keyword {}", file.display(), kw.name);
            }
            calls += 1;
        }
    }
    // docs/examples alone has 14 programs with calls; guard against an
    // empty or moved folder making this test vacuous.
    assert!(calls >= 14, "only {calls} framework calls found");
}
