//! The package's exceptions, and the conversions of compiler, runtime and
//! panic failures into them: nothing a caller passes aborts the process.

use std::panic::{catch_unwind, AssertUnwindSafe};

use eintup::driver::Failure;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_eintup, Error, PyException, "A user error: the message is the one the eintup CLI prints.");
create_exception!(_eintup, ShapeError, Error, "Arrays whose shapes or dtypes the program cannot take.");

/// A compiler failure as the Python exception the CLI's exit code stands
/// for: shape and dtype problems of the inputs as `ShapeError`.
pub fn failure(f: Failure) -> PyErr {
    let text = f.to_string();
    let shape_codes = ["E0314", "E0315", "E0316", "E0317", "E0403"];
    match f {
        Failure::User(_) if shape_codes.iter().any(|c| text.contains(&format!("[{c}]"))) => ShapeError::new_err(text.trim_end().to_string()),
        _ => Error::new_err(text.trim_end().to_string()),
    }
}

/// A runtime error as a Python exception: a bad input as `ShapeError`.
pub fn runtime_error(path: &str, e: eintup_runtime::Error) -> PyErr {
    match e {
        eintup_runtime::Error::Input { .. } => ShapeError::new_err(format!("{path}: {e}")),
        e => Error::new_err(format!("{path}: {e}")),
    }
}

/// Runs `body`, turning a panic into `eintup.Error` (nothing a caller
/// passes may abort the interpreter process).
pub fn guarded<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        Err(Error::new_err(format!("internal error (please report): {msg}")))
    })
}
