//! Host programs as shared libraries: what an on-disk cache keeps so that
//! a later process runs a program without compiling it (`eintup run`'s
//! and the Python package's cache: `host_cache`, docs/cli.md and
//! docs/python.md). The optimised host module is emitted as
//! position-independent objects for this CPU
//! ([`HostProgram::compile_objects`]), linked with the system's linker
//! ([`link_shared`]) and loaded with `dlopen`
//! ([`HostProgram::load_library`]). The code needs nothing but libc and
//! libm (LLVM may call `memset`, `memcpy` and math functions).

use std::ffi::{c_void, CString};
use std::path::Path;

use super::host::{Code, HostCpu, HostProgram, KernelFn, Library};
use super::CodegenError;
use eintup::ir::loops::LoopModule;
use inkwell::targets::TargetMachine;

/// The CPU host code is compiled for, as a cache key must name it: a
/// library built here may use instructions another CPU lacks.
pub fn native_cpu_id() -> String {
    let (cpu, features) = HostCpu::Native.llvm_cpu();
    format!("{} {cpu} {features}", TargetMachine::get_default_triple().as_str().to_string_lossy())
}

/// Links `objects` (a program's, one per compile group) into the shared
/// library `out`: with `$CC` where it is set, else with the linker `ld`
/// itself, else with `cc`. The objects need no C start-up files (no
/// constructors; the kernels call only libc and libm), and the compiler
/// driver costs ~20 ms of a first run's time where `ld` alone takes a few
/// (docs/journal/performance.md, section 21).
pub fn link_shared(objects: &[Vec<u8>], out: &Path) -> Result<(), CodegenError> {
    let mut files = Vec::with_capacity(objects.len());
    let written = objects.iter().enumerate().try_for_each(|(i, object)| {
        let obj = out.with_extension(format!("{i}.o"));
        let w = std::fs::write(&obj, object).map_err(|e| CodegenError::Environment(format!("{}: {e}", obj.display())));
        files.push(obj);
        w
    });
    let remove = |files: &[std::path::PathBuf]| files.iter().for_each(|f| drop(std::fs::remove_file(f)));
    if let Err(e) = written {
        remove(&files);
        return Err(e);
    }
    // -Bsymbolic: a kernel's own symbols bind inside its library, never to
    // another library's kernel of the same name.
    let link = |tool: &std::ffi::OsStr, args: &[&str]| {
        let status = std::process::Command::new(tool)
            .args(args)
            .arg(out)
            .args(&files)
            .arg("-lm")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(CodegenError::Environment(format!("{} -shared failed ({s})", tool.to_string_lossy()))),
            Err(e) => Err(CodegenError::Environment(format!("cannot run {}: {e}", tool.to_string_lossy()))),
        }
    };
    let driver = ["-shared", "-Wl,-Bsymbolic", "-o"];
    let linked = match std::env::var_os("CC") {
        Some(cc) => link(&cc, &driver),
        None => link("ld".as_ref(), &["-shared", "-Bsymbolic", "-o"]).or_else(|_| link("cc".as_ref(), &driver)),
    };
    remove(&files);
    linked
}

/// The text of the last `dlerror`.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

impl HostProgram {
    /// Loads the shared library at `path`, made by [`link_shared`] from
    /// the objects [`HostProgram::compile_objects`] gave for `m`.
    ///
    /// # Safety
    /// The library runs as trusted code: it must be exactly such a
    /// library, for this `m` (a cache checks the library's checksum and
    /// keys it with the compiler build and the CPU). A missing kernel is
    /// an error, but a library with other code is undefined behaviour.
    pub unsafe fn load_library(m: LoopModule, path: &Path) -> Result<HostProgram, CodegenError> {
        let c =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| CodegenError::Environment(format!("{}: a path with a NUL byte", path.display())))?;
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return Err(CodegenError::Environment(format!("{}: {}", path.display(), dl_error())));
        }
        HostProgram::with_code(m, Code::Library(Library(h)), |code, name| {
            let Code::Library(lib) = code else { return Err("not a library".into()) };
            let sym = CString::new(name).map_err(|e| e.to_string())?;
            let f = libc::dlsym(lib.0, sym.as_ptr());
            if f.is_null() {
                return Err(dl_error());
            }
            // SAFETY: the caller vouches that the library is this module's
            // code: the symbol is the kernel's entry, of the host ABI.
            Ok(std::mem::transmute::<*mut c_void, KernelFn>(f))
        })
    }
}
