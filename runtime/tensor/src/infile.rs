//! Input files read whole: `.et` sources and textual IR, a bundle's
//! manifest and PTX, `.npy` arrays. Only a regular file is read, and never
//! more than it holds or than the caller's limit: a FIFO, a device
//! (`/dev/zero`), a socket or a directory is refused without reading (the
//! file is opened non-blocking, so a FIFO without a writer cannot hang the
//! reader), and nothing is allocated beyond the file's own size.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// What the path is instead (`a FIFO`, `a character device`, ...).
    NotRegular(&'static str),
    TooLarge {
        len: u64,
        limit: u64,
    },
    /// It grew or shrank while it was read.
    Changed {
        before: u64,
        after: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular(kind) => write!(f, "not a regular file ({kind})"),
            ReadError::TooLarge { len, limit } => write!(f, "the file is {len} bytes, more than the limit of {limit} bytes"),
            ReadError::Changed { before, after } => write!(f, "the file changed while it was read ({before} bytes, then {after})"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<ReadError> for io::Error {
    fn from(e: ReadError) -> io::Error {
        match e {
            ReadError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        }
    }
}

/// The bytes of the regular file `path`, at most `limit` of them.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK makes opening a FIFO return at once instead of waiting
    // for a writer (and changes nothing for a regular file).
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(ReadError::Io)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(file_kind(&meta)));
    }
    let len = meta.len();
    if len > limit {
        return Err(ReadError::TooLarge { len, limit });
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len as usize).map_err(|_| ReadError::TooLarge { len, limit })?;
    // One byte more than the size read a moment ago: a file that grows
    // while it is read is refused rather than read without end.
    file.take(len.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 != len {
        return Err(ReadError::Changed { before: len, after: bytes.len() as u64 });
    }
    Ok(bytes)
}

/// At most `limit` bytes of a stream (standard input): more is an error,
/// found after reading `limit + 1` bytes, never the whole stream.
pub fn read_stream(r: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { len: bytes.len() as u64, limit });
    }
    Ok(bytes)
}

/// What a non-regular file is, for the message.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_without_reading() {
        assert!(matches!(read_regular(Path::new("/dev/zero"), 1 << 20), Err(ReadError::NotRegular("a character device"))));
        assert!(matches!(read_regular(Path::new("/"), 1 << 20), Err(ReadError::NotRegular("a directory"))));
        let dir = std::env::temp_dir().join(format!("etrt-infile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would wait for ever.
        assert!(matches!(read_regular(&fifo, 1 << 20), Err(ReadError::NotRegular("a FIFO"))));
        let f = dir.join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_regular(&f, 5).unwrap(), b"12345");
        assert!(matches!(read_regular(&f, 4), Err(ReadError::TooLarge { len: 5, limit: 4 })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stream_is_read_up_to_its_limit() {
        assert_eq!(read_stream(&b"abc"[..], 3).unwrap(), b"abc");
        assert!(matches!(read_stream(std::io::repeat(0), 1000), Err(ReadError::TooLarge { len: 1001, limit: 1000 })));
    }
}
