//! Compiled host programs kept on disk between processes: what `eintup run`
//! (`--backend cpu`) consults before asking LLVM, so that running a
//! program again costs its front end and passes (milliseconds) but not
//! LLVM's optimisation and code generation (tens to hundreds of
//! milliseconds; docs/cli.md, "The compile cache"). The Python package
//! stores its `cpu` entries through [`store_compiled`] too.
//!
//! The key is what the machine code is a function of: the final loop
//! module, printed (it prints everything it holds and parses back), the
//! seed (RANDOM inside kernels), the float policy, this CPU and the
//! compiler build. An entry is the program as a shared library
//! (`hostlib`); [`DiskCache`] makes stores atomic, checks every file
//! against its checksum and bounds the cache's size.
//!
//! A miss compiles the program to objects only (one code generation, no
//! JIT), links them into the entry and loads that library: the cache costs
//! a first run the link (`ld -shared`) and the entry's files, not a second
//! code generation. Where no entry can be made (a read-only directory) the
//! program is JIT-compiled as without a cache; where no library can be
//! linked (no linker) it is JIT-compiled after its objects were, the one
//! case that compiles twice.

use std::io;
use std::path::Path;

use crate::disk_cache::DiskCache;
use crate::hostlib::{link_shared, native_cpu_id};
use crate::{CodegenError, FpContract, HostProgram};
use eintup::ir::loops::LoopModule;

/// The library file of an entry (the Python package's entries too).
pub const LIBRARY_FILE: &str = "kernels.so";

/// Where a program came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Loaded from the cache: no compilation.
    Hit,
    /// Compiled and stored (the next process gets a hit).
    Stored,
    /// Compiled but not stored: no library could be made or written; the
    /// program runs JIT-compiled.
    Compiled,
}

/// The on-disk cache of host programs, for one compiler build.
pub struct HostCache {
    disk: DiskCache,
    build: String,
}

impl HostCache {
    /// The cache in `disk`, for the compiler build `build` (part of every
    /// key: a rebuilt compiler never loads an older build's code).
    pub fn new(disk: DiskCache, build: impl Into<String>) -> HostCache {
        HostCache { disk, build: build.into() }
    }

    /// The cache where the environment puts it (`DiskCache::dir_from_env`),
    /// or `None` when it is off; an unreadable `EINTUP_CACHE_MAX_BYTES` is
    /// an error naming it.
    pub fn from_env(build: impl Into<String>) -> Result<Option<HostCache>, String> {
        DiskCache::dir_from_env().map(|dir| DiskCache::new(dir).map(|d| HostCache::new(d, build))).transpose()
    }

    fn key(&self, loops: &str, seed: u64, fp_contract: FpContract) -> String {
        format!(
            "eintup {} host program\nbuild {}\ncpu {}\nseed {seed}\nfp_contract {}\nloops\n{loops}",
            env!("CARGO_PKG_VERSION"),
            self.build,
            native_cpu_id(),
            fp_contract.name()
        )
    }

    /// `m` compiled for this CPU: from the cache, or compiled now and
    /// stored (best effort: a failed store only costs a later process a
    /// compile).
    pub fn program(&self, m: LoopModule, seed: u64, fp_contract: FpContract) -> Result<(HostProgram, Lookup), CodegenError> {
        let key = self.key(&eintup::ir::loops::print::module(&m), seed, fp_contract);
        // SAFETY: the library of an entry whose key names this very loop
        // module, build and CPU, and whose files match the checksums they
        // were stored with (`DiskCache::load`).
        if let Some(p) = self.disk.load(&key, |dir| unsafe { HostProgram::load_library(m.clone(), &dir.join(LIBRARY_FILE)) }.ok()) {
            return Ok((p, Lookup::Hit));
        }
        store_compiled(&self.disk, &key, m, seed, fp_contract, |_| Ok(()), false)
    }
}

/// `m` compiled into a new entry of `disk` under `key`: `files` writes the
/// caller's own files into the entry's private directory, then the program
/// is compiled to objects only, linked into the entry's library
/// ([`LIBRARY_FILE`]) and loaded from it. Where no library can be linked
/// (no linker), the entry is stored without one if `without_library`
/// (its other files still save a later process work: the Python package's
/// front end and passes) or not at all, and the program is JIT-compiled.
/// A compile error is returned, and nothing is stored.
pub fn store_compiled(
    disk: &DiskCache,
    key: &str,
    m: LoopModule,
    seed: u64,
    fp_contract: FpContract,
    files: impl FnOnce(&Path) -> io::Result<()>,
    without_library: bool,
) -> Result<(HostProgram, Lookup), CodegenError> {
    // Compiled inside the store, into its private directory: where no
    // directory can be made nothing is compiled twice. The library is
    // loaded from there before the directory is renamed into place (the
    // mapping outlives the rename, or the directory's removal where
    // another process stored the entry first).
    let mut made: Option<Result<HostProgram, CodegenError>> = None;
    let stored = disk.store(key, |dir| {
        files(dir)?;
        let objects = match HostProgram::compile_objects(&m, seed, fp_contract) {
            Ok(o) => o,
            Err(e) => {
                made = Some(Err(e));
                return Err(io::Error::other("not compiled"));
            }
        };
        let lib = dir.join(LIBRARY_FILE);
        // SAFETY: the library just linked from this module's objects.
        match link_shared(&objects, &lib).and_then(|()| unsafe { HostProgram::load_library(m.clone(), &lib) }) {
            Ok(p) => {
                made = Some(Ok(p));
                Ok(())
            }
            Err(_) if without_library => {
                let _ = std::fs::remove_file(&lib);
                Ok(())
            }
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    });
    let how = if stored.is_ok() { Lookup::Stored } else { Lookup::Compiled };
    match made {
        Some(Err(e)) => Err(e),
        Some(Ok(p)) => Ok((p, how)),
        // No directory, or no library: the JIT.
        None => Ok((HostProgram::compile(m, seed, fp_contract)?, how)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eintup::driver::Source;
    use eintup::interp::{self, RunOptions};
    use eintup::ir::loops::FloatWidth;
    use eintup::tensor::Tensor;

    fn program(text: &str, binds: &[&str]) -> (eintup::ir::et::Module, LoopModule) {
        let src = Source::from_string("p.et", text);
        let binds: Vec<String> = binds.iter().map(|b| b.to_string()).collect();
        let (m, _) = eintup::pipeline::specialized_module(&src, &binds, 0).unwrap();
        let host = crate::HostCpu::Native.host_target().unwrap();
        let lm = eintup::pipeline::lower_host(&src, &m, FloatWidth::F64, FpContract::Off, host).unwrap();
        (m, lm)
    }

    /// The program's arrays run from `p`, from the interpreter's inputs.
    fn run(m: &eintup::ir::et::Module, lm: &LoopModule, p: &HostProgram) -> Vec<Tensor> {
        let src = Source::from_string("p.et", "");
        let mut bufs = crate::backend::initial_buffers(&src, m, lm, &RunOptions::default()).unwrap();
        p.run(&mut bufs).unwrap();
        bufs.truncate(m.arrays.len());
        bufs
    }

    fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v
    }

    /// Stored on the first lookup, loaded on the second (a library, no
    /// compile), recompiled and stored again once its library is damaged,
    /// and the same arrays as the interpreter's every time; another seed,
    /// float policy or build is another entry.
    #[test]
    fn programs_are_stored_then_loaded_and_a_damaged_entry_is_replaced() {
        let tmp = std::env::temp_dir().join(format!("eintup-host-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let cache = HostCache::new(DiskCache::new(tmp.clone()).unwrap(), "test build");
        let (m, lm) = program("a[i,j] = RANDOM(0, 9, INT)\nb[j] = RANDOM(0, 9, INT)\nc[i] += a[i,j] * b[j]\nc\n", &["i=[37]", "j=[53]"]);
        let want = interp::run(&m, &RunOptions::default()).unwrap();

        let (p, how) = cache.program(lm.clone(), 0, FpContract::Off).unwrap();
        assert_eq!(how, Lookup::Stored);
        assert_eq!(run(&m, &lm, &p), want);
        drop(p);
        let stored = entries(&tmp);
        assert_eq!(stored.len(), 1, "{stored:?}");
        let lib = stored[0].join(LIBRARY_FILE);
        assert!(std::fs::metadata(&lib).unwrap().len() > 0);

        let (p, how) = cache.program(lm.clone(), 0, FpContract::Off).unwrap();
        assert_eq!(how, Lookup::Hit);
        assert_eq!(run(&m, &lm, &p), want);
        drop(p);

        // Damaged as a new file (a mapped library must not be truncated).
        std::fs::remove_file(&lib).unwrap();
        std::fs::write(&lib, b"not a library").unwrap();
        let (p, how) = cache.program(lm.clone(), 0, FpContract::Off).unwrap();
        assert_eq!(how, Lookup::Stored);
        assert_eq!(run(&m, &lm, &p), want);
        assert_eq!(cache.program(lm.clone(), 0, FpContract::Off).unwrap().1, Lookup::Hit);

        assert_eq!(cache.program(lm.clone(), 1, FpContract::Off).unwrap().1, Lookup::Stored);
        assert_eq!(cache.program(lm.clone(), 0, FpContract::Fast).unwrap().1, Lookup::Stored);
        let other = HostCache::new(DiskCache::new(tmp.clone()).unwrap(), "another build");
        assert_eq!(other.program(lm, 0, FpContract::Off).unwrap().1, Lookup::Stored);
        assert_eq!(entries(&tmp).len(), 4);
        let _ = std::fs::remove_dir_all(&tmp);
    }

    /// Where nothing can be stored (the cache's directory is a file), the
    /// program is compiled and runs all the same.
    #[test]
    fn a_cache_that_cannot_be_written_still_runs_the_program() {
        let tmp = std::env::temp_dir().join(format!("eintup-host-cache-file-{}", std::process::id()));
        std::fs::write(&tmp, b"a file, not a directory").unwrap();
        let cache = HostCache::new(DiskCache::new(tmp.clone()).unwrap(), "test build");
        let (m, lm) = program("a[i] = RANDOM(0, 1, FLOAT)\nb[i] = a[i] * 2.0\nb\n", &["i=[5]"]);
        let (p, how) = cache.program(lm.clone(), 0, FpContract::Off).unwrap();
        assert_eq!(how, Lookup::Compiled);
        assert_eq!(run(&m, &lm, &p), interp::run(&m, &RunOptions::default()).unwrap());
        let _ = std::fs::remove_file(&tmp);
    }
}
