//! A Python that cannot import TensorFlow makes `Bridge::start` fail with
//! `Failure::Unavailable` (exit 3) and a reason telling the user to run
//! `scripts/setup --with-tf`. Needs only a Python with NumPy (the base
//! `.venv`); TensorFlow is hidden by a `tensorflow` package on PYTHONPATH that
//! raises ImportError, so this runs whether or not TensorFlow is installed.
//!
//! The shadow reaches Python through a wrapper script that sets PYTHONPATH
//! for the bridge alone: this process's environment, which other tests of
//! the binary read, is left as it is.

use eintup::check::bridge::{Bridge, BridgeLocation};
use eintup::driver::Failure;
use std::path::Path;

#[test]
fn missing_tensorflow_is_unavailable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("compiler/ has a parent").to_path_buf();
    let loc = BridgeLocation::from_repo_root(&root);
    if !loc.python.exists() {
        eprintln!("SKIPPED missing_tensorflow_is_unavailable: no {} (run scripts/setup)", loc.python.display());
        return;
    }
    let shadow = std::env::temp_dir().join(format!("eintup-no-tf-{}", std::process::id()));
    std::fs::create_dir_all(shadow.join("tensorflow")).unwrap();
    std::fs::write(shadow.join("tensorflow/__init__.py"), "raise ImportError('simulated: no tensorflow here')\n").unwrap();
    let wrapper = shadow.join("python");
    std::fs::write(&wrapper, format!("#!/bin/sh\nPYTHONPATH='{}' exec '{}' \"$@\"\n", shadow.display(), loc.python.display())).unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let started = Bridge::start(&BridgeLocation { python: wrapper, script: loc.script.clone() });
    let _ = std::fs::remove_dir_all(&shadow);
    match started {
        Err(f @ Failure::Unavailable(_)) => {
            assert_eq!(f.exit_code(), 3);
            let Failure::Unavailable(m) = &f else { unreachable!() };
            assert!(m.contains("simulated: no tensorflow here"), "{m}");
            assert!(m.contains("scripts/setup --with-tf"), "{m}");
            assert!(!m.contains('\n'), "{m}");
        }
        Err(e) => panic!("expected Unavailable, got {e:?}"),
        Ok(_) => panic!("the bridge started without TensorFlow"),
    }
}
