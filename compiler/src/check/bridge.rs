//! Client of the framework-call bridge, `scripts/framework_call.py`.
//!
//! `check` compares every configuration with a TensorFlow call. Importing
//! TensorFlow costs seconds, so one Python process is started per `check` run
//! and serves every configuration: one JSON request per line on its stdin,
//! one JSON response per line on its stdout (protocol in docs/check.md).
//! Arrays travel as `.npy` files, never inside the JSON.
//!
//! The process is untrusted (the call came from a `.et` file): it runs in a
//! private working directory with a rebuilt environment ([`super::sandbox`]),
//! every request's paths must lie in that directory, and a response is
//! accepted only in the exact expected form. Each call is bounded
//! ([`super::limits`]): eintup waits for an answer at most the time limit,
//! then kills the process; the process caps its own memory. A process that
//! was killed or died is replaced before the next call.
//!
//! Where the bridge is found: `EINTUP_FRAMEWORK_BRIDGE` (path to the `.py`)
//! and `EINTUP_PYTHON` (the interpreter) override; otherwise the repository
//! is found by walking up from the running executable (`target/debug/eintup`,
//! or a test binary in `target/debug/deps/`) to the folder holding
//! `scripts/framework_call.py`, and its `.venv/bin/python` runs it.

use super::limits::{seconds_text, CallLimits};
use super::sandbox;
use super::scratch::Scratch;
use crate::driver::Failure;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Environment variable: path of `framework_call.py` to run.
pub const BRIDGE_ENV: &str = "EINTUP_FRAMEWORK_BRIDGE";
/// Environment variable: the Python interpreter that runs the bridge.
pub const PYTHON_ENV: &str = "EINTUP_PYTHON";
/// The bridge script, relative to the repository root.
pub const SCRIPT: &str = "scripts/framework_call.py";
/// What a user with no TensorFlow should do; part of every "unavailable" reason.
pub const SETUP_HINT: &str = "run `scripts/setup --with-tf` to install TensorFlow into .venv";

/// How long (in 10 ms steps) a bridge that closed its output is given to
/// exit before the reason is written without its exit status.
const DEATH_WAIT_STEPS: u32 = 100;

/// How long a new bridge process may take to import TensorFlow and answer
/// its ping (seconds on a quiet machine; minutes on a loaded CI runner).
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// How many of the bridge's last stderr lines are kept to explain a crash.
/// TensorFlow is chatty; a Python traceback's last lines name the cause.
const STDERR_TAIL_LINES: usize = 20;

/// One argument of a framework call, as the `.et` file wrote it
/// (docs/language.md section 2). Serialised as `{"kind": "...", ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CallArgValue {
    /// An array name: the array saved as `.npy`; TensorFlow sees a tensor of
    /// the file's dtype.
    Array { path: PathBuf },
    /// `DIMS(list)`: a Python list of ints.
    Ints { value: Vec<i64> },
    /// `RANK(list)`: a Python int.
    Int { value: i64 },
    /// `L(literal)`: a string, number, bool or None.
    Literal { value: Literal },
    /// `TENSOR(DIMS(..))`: a constant int32 tensor.
    Tensor { value: Vec<i64> },
}

/// The value of an `L(..)` argument. Serialised as the bare JSON value, so
/// `Float(2.0)` stays a Python float and `Int(2)` a Python int.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Literal {
    Str(String),
    Int(i64),
    /// Must be finite: JSON has no NaN or infinity.
    Float(f64),
    Bool(bool),
    Null,
}

/// One framework call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// Dotted name starting with `tf.` (`tf.nn.convolution`).
    pub func: String,
    pub args: Vec<CallArgValue>,
    /// Keyword arguments in source order (a JSON object on the wire).
    #[serde(serialize_with = "ordered_map")]
    pub kwargs: Vec<(String, CallArgValue)>,
    /// Where the bridge writes `result_K.npy`; created if missing. Must lie
    /// in the bridge's [`work_dir`](Bridge::work_dir), as must array paths.
    pub out_dir: PathBuf,
    /// `check --grad`: ask for the call's vector-Jacobian product instead
    /// of its results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradient: Option<GradientRequest>,
}

/// The gradient of a call (docs/check.md, "Gradients"): the results
/// become `d(sum_k cotangent_k * result_k)/d(wrt_j)`, one per `wrt` path.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GradientRequest {
    /// Paths of array arguments of the call, watched by the tape.
    pub wrt: Vec<PathBuf>,
    /// One per result of the call: the `.npy` weighing it, or `None` to
    /// leave it out (an INT result).
    pub cotangents: Vec<Option<PathBuf>>,
}

/// Writes `kwargs` as a JSON object keeping source order, so a request reads
/// like the call it came from.
fn ordered_map<S: Serializer>(pairs: &[(String, CallArgValue)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

impl Request {
    /// Every path the request hands to the bridge.
    fn paths(&self) -> impl Iterator<Item = &Path> {
        let arrays = self.args.iter().chain(self.kwargs.iter().map(|(_, v)| v)).filter_map(|a| match a {
            CallArgValue::Array { path } => Some(path.as_path()),
            _ => None,
        });
        let gradient = self.gradient.iter().flat_map(|g| g.wrt.iter().map(PathBuf::as_path).chain(g.cotangents.iter().flatten().map(PathBuf::as_path)));
        std::iter::once(self.out_dir.as_path()).chain(arrays).chain(gradient)
    }

    /// The request as one line of the protocol (no newline).
    pub fn to_json(&self) -> Result<String, BridgeError> {
        for arg in self.args.iter().chain(self.kwargs.iter().map(|(_, v)| v)) {
            if let CallArgValue::Literal { value: Literal::Float(x) } = arg {
                if !x.is_finite() {
                    return Err(BridgeError::Encode(format!("{}: literal {x} has no JSON form", self.func)));
                }
            }
        }
        serde_json::to_string(self).map_err(|e| BridgeError::Encode(format!("{}: {e}", self.func)))
    }
}

/// One response line. Fields absent from a kind of response default.
#[derive(Debug, Deserialize)]
struct Response {
    ok: bool,
    #[serde(default)]
    outputs: Vec<PathBuf>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    unavailable: bool,
    #[serde(default)]
    tf_version: Option<String>,
    #[serde(default)]
    sandbox: Option<String>,
}

/// Why a call produced no outputs.
#[derive(Clone, Debug, PartialEq)]
pub enum BridgeError {
    /// The framework refused the call: unknown function, bad arguments, or
    /// an exception inside TensorFlow. The message is one line naming the
    /// function, the exception type and its message.
    Call(String),
    /// TensorFlow cannot be imported (the reason says how to install it).
    Unavailable(String),
    /// The request could not be encoded (non-UTF-8 path, non-finite
    /// literal, a path outside the bridge's working directory).
    Encode(String),
    /// The bridge process died or broke the protocol; it serves no more
    /// calls (the next call starts a new process).
    Protocol(String),
    /// The call exceeded its time limit and its process was killed (the
    /// next call starts a new process).
    Stopped(String),
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Call(m) => write!(f, "framework call failed: {m}"),
            BridgeError::Unavailable(m) => write!(f, "{m}"),
            BridgeError::Encode(m) => write!(f, "cannot encode framework call: {m}"),
            BridgeError::Protocol(m) => write!(f, "framework bridge failed: {m}"),
            BridgeError::Stopped(m) => write!(f, "framework call stopped: {m}"),
        }
    }
}

impl std::error::Error for BridgeError {}

/// Which interpreter runs which bridge script.
#[derive(Clone, Debug, PartialEq)]
pub struct BridgeLocation {
    pub python: PathBuf,
    pub script: PathBuf,
}

impl BridgeLocation {
    /// The bridge of a repository checkout, run by its `.venv`.
    pub fn from_repo_root(root: &Path) -> BridgeLocation {
        BridgeLocation { python: venv_python(root), script: root.join(SCRIPT) }
    }

    /// Finds the bridge from the environment overrides or the executable's
    /// position in the repository (module docs).
    pub fn find() -> Result<BridgeLocation, Failure> {
        let exe = std::env::current_exe().ok();
        Self::resolve(std::env::var_os(BRIDGE_ENV), std::env::var_os(PYTHON_ENV), exe.as_deref())
    }

    /// [`find`](Self::find) with its inputs explicit, for tests.
    fn resolve(bridge_env: Option<OsString>, python_env: Option<OsString>, exe: Option<&Path>) -> Result<BridgeLocation, Failure> {
        let script =
            match bridge_env.filter(|s| !s.is_empty()) {
                Some(s) => PathBuf::from(s),
                None => {
                    let exe = exe.ok_or_else(|| {
                        Failure::Unavailable(format!("cannot locate the framework bridge (the executable's path is unknown); set {BRIDGE_ENV} to {SCRIPT}"))
                    })?;
                    exe.ancestors().skip(1).map(|dir| dir.join(SCRIPT)).find(|p| p.is_file()).ok_or_else(|| {
                        Failure::Unavailable(format!("cannot find {SCRIPT} in any folder above {}; set {BRIDGE_ENV} to its path", exe.display()))
                    })?
                }
            };
        if !script.is_file() {
            return Err(Failure::Unavailable(format!("the framework bridge {} does not exist", script.display())));
        }
        let python = match python_env.filter(|s| !s.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => {
                // scripts/framework_call.py -> the repository root -> .venv
                let root = script.parent().and_then(Path::parent).unwrap_or(Path::new("."));
                let python = venv_python(root);
                if !python.exists() {
                    return Err(Failure::Unavailable(format!("no Python environment at {}; {SETUP_HINT}", python.display())));
                }
                python
            }
        };
        Ok(BridgeLocation { python, script })
    }
}

fn venv_python(root: &Path) -> PathBuf {
    root.join(".venv").join("bin").join("python")
}

/// A framework bridge: one Python process at a time, in a fresh
/// subdirectory of the run's scratch directory. A process that a call's
/// limit stopped, or that died, is replaced by a new one before the next
/// call, so one bad configuration does not fail every later row. Dropping
/// the bridge kills the process and removes the scratch directory.
pub struct Bridge {
    process: Process,
    loc: BridgeLocation,
    limits: CallLimits,
    /// How many processes were started (the next one's directory number).
    started: usize,
    tf_version: String,
    sandbox: String,
    /// Set once a process could not be replaced; every later call fails with
    /// this reason instead of starting Python again.
    broken: Option<String>,
    /// Declared last: dropped after `Drop::drop` has killed the process.
    scratch: Scratch,
}

/// One running bridge process and its pipes.
struct Process {
    child: Child,
    stdin: ChildStdin,
    /// Response lines, read on a thread so that a wait can time out.
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    dir: PathBuf,
    /// Whether it was killed or died: it serves no more requests.
    stopped: bool,
}

impl Bridge {
    /// Starts the bridge with the default [`CallLimits`].
    pub fn start(loc: &BridgeLocation) -> Result<Bridge, Failure> {
        Bridge::start_with(loc, CallLimits::default())
    }

    /// Starts the bridge and pings it, which imports TensorFlow. A missing
    /// interpreter or TensorFlow is `Failure::Unavailable` (exit 3) with a
    /// one-line reason that tells the user how to install it.
    pub fn start_with(loc: &BridgeLocation, limits: CallLimits) -> Result<Bridge, Failure> {
        let scratch = Scratch::new()?;
        let process = Process::spawn(loc, &limits, &scratch, 0)?;
        let mut bridge = Bridge { process, loc: loc.clone(), limits, started: 1, tf_version: String::new(), sandbox: String::new(), broken: None, scratch };
        bridge.ping().map_err(|e| match e {
            BridgeError::Unavailable(why) => Failure::Unavailable(why),
            BridgeError::Call(why) => Failure::Internal(format!("framework bridge refused ping: {why}")),
            BridgeError::Stopped(_) => {
                Failure::Unavailable(format!("the framework bridge did not finish importing TensorFlow within {}; {SETUP_HINT}", seconds_text(START_TIMEOUT)))
            }
            e => Failure::Unavailable(format!("{e}; {SETUP_HINT}")),
        })?;
        Ok(bridge)
    }

    /// Imports TensorFlow in the current process and learns its version.
    /// Straight to the process: a process that dies here is not replaced
    /// (that would retry forever), the caller gives up instead.
    fn ping(&mut self) -> Result<(), BridgeError> {
        let r = self.process.exchange("{\"op\":\"ping\"}", Some(START_TIMEOUT))?;
        if !r.ok {
            let why = r.error.unwrap_or_else(|| format!("TensorFlow is not available; {SETUP_HINT}"));
            return Err(if r.unavailable { BridgeError::Unavailable(why) } else { BridgeError::Call(why) });
        }
        self.tf_version = r.tf_version.unwrap_or_default();
        self.sandbox = r.sandbox.unwrap_or_else(|| "none (the bridge did not say)".into());
        Ok(())
    }

    /// The TensorFlow version the bridge imported.
    pub fn tf_version(&self) -> &str {
        &self.tf_version
    }

    /// How the bridge confined itself: `landlock ABI N`, or `none (why)`.
    pub fn sandbox(&self) -> &str {
        &self.sandbox
    }

    /// The private directory the current bridge process runs in; requests'
    /// arrays and `out_dir`s must lie below it. It changes when a stopped
    /// process is replaced, so ask for it per call.
    pub fn work_dir(&self) -> &Path {
        &self.process.dir
    }

    /// The run's scratch directory, which holds every process's directory.
    pub fn scratch_dir(&self) -> &Path {
        self.scratch.path()
    }

    /// Runs one framework call; returns the paths of `result_0.npy`, ... in
    /// the order of the function's results.
    pub fn call(&mut self, req: &Request) -> Result<Vec<PathBuf>, BridgeError> {
        if let Some(p) = req.paths().find(|p| !lies_below(p, &self.process.dir)) {
            return Err(BridgeError::Encode(format!("{}: {} is outside the bridge's working directory", req.func, p.display())));
        }
        let line = req.to_json()?;
        let outputs = interpret(self.exchange(&line, self.limits.time)?)?;
        expect_result_files(&outputs, &req.out_dir)?;
        Ok(outputs)
    }

    /// Asks whether `func` resolves to a function the bridge would call
    /// (policy, name lookup, implementation module), without calling it:
    /// `check` asks once, before the first configuration, so a misspelt
    /// name fails at once instead of on every row.
    pub fn resolve(&mut self, func: &str) -> Result<(), BridgeError> {
        let line = serde_json::json!({"op": "resolve", "func": func}).to_string();
        interpret(self.exchange(&line, self.limits.time)?).map(|_| ())
    }

    /// Writes one request line and reads one response line, waiting at
    /// most `limit`. A process that was stopped is replaced first; one that
    /// stops now (killed for the limit, or dead) is replaced right after, so
    /// the next caller's [`work_dir`](Self::work_dir) is the new one.
    fn exchange(&mut self, line: &str, limit: Option<Duration>) -> Result<Response, BridgeError> {
        if let Some(why) = &self.broken {
            return Err(BridgeError::Protocol(why.clone()));
        }
        let result = self.process.exchange(line, limit);
        if self.process.stopped {
            self.replace();
        }
        result
    }

    /// Starts a new process in a new directory in place of a stopped one;
    /// on failure the bridge is broken for good.
    fn replace(&mut self) {
        let old_dir = self.process.dir.clone();
        match Process::spawn(&self.loc, &self.limits, &self.scratch, self.started) {
            Ok(p) => {
                self.started += 1;
                self.process = p;
                if let Err(e) = self.ping() {
                    self.broken = Some(format!("the restarted bridge failed: {e}"));
                }
            }
            Err(f) => self.broken = Some(format!("cannot restart the bridge: {f}")),
        }
        // Its arrays are no use to anyone now.
        let _ = std::fs::remove_dir_all(old_dir);
    }
}

impl Process {
    fn spawn(loc: &BridgeLocation, limits: &CallLimits, scratch: &Scratch, n: usize) -> Result<Process, Failure> {
        let dir = scratch.process_dir(n)?;
        // Paths are made absolute: the process starts in `dir`. (A bare
        // interpreter name is looked up on PATH and stays as it is.)
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let python = if loc.python.components().count() > 1 { absolute(&loc.python) } else { loc.python.clone() };
        let mut cmd = Command::new(python);
        sandbox::confine(&mut cmd, &dir);
        sandbox::tie_to_parent(&mut cmd, scratch.janitor_fd());
        cmd.arg(absolute(&loc.script));
        if let Some(bytes) = limits.memory {
            cmd.arg("--memory-limit").arg(bytes.to_string());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Unavailable(format!("cannot run {}: {e}; {SETUP_HINT}", loc.python.display())))?;
        // Take all three pipes before anything can fail, so `child` is owned
        // by a Process (killed on drop) from here on.
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::Internal("framework bridge started without its pipes".into()));
        };
        // Drain stderr on a thread: a full stderr pipe would block the child
        // (and so us). Keep the tail to explain a crash.
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut t) = tail.lock() {
                    if t.len() == STDERR_TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        // Responses on a thread too: the end of the channel is the end of
        // the process's output, and a wait for a line can time out.
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Process { child, stdin, lines, stderr_tail, dir, stopped: false })
    }

    fn exchange(&mut self, line: &str, limit: Option<Duration>) -> Result<Response, BridgeError> {
        if writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()).is_err() {
            return Err(self.died());
        }
        let answer = match limit {
            Some(d) => self.lines.recv_timeout(d),
            None => self.lines.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match answer {
            Ok(answer) => serde_json::from_str(answer.trim_end())
                .map_err(|e| BridgeError::Protocol(format!("unreadable response ({e}): {}", answer.trim_end().chars().take(200).collect::<String>()))),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                let d = limit.unwrap_or_default();
                Err(BridgeError::Stopped(format!(
                    "no answer within the time limit of {} (--call-timeout); the framework's process was stopped",
                    seconds_text(d)
                )))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.died()),
        }
    }

    fn kill(&mut self) {
        self.stopped = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process stopped answering: a Protocol error saying why, from its
    /// exit status and the last line it wrote on stderr (a Python traceback
    /// ends with the cause).
    fn died(&mut self) -> BridgeError {
        self.stopped = true;
        // Closed pipes come before the exit status: wait a moment for it, so
        // the reason says how the process ended. That moment also lets the
        // stderr thread read the last lines, which name the cause.
        let mut exited = None;
        for _ in 0..DEATH_WAIT_STEPS {
            if let Ok(Some(s)) = self.child.try_wait() {
                exited = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if exited.is_none() {
            self.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
        let status = match exited {
            Some(s) => format!("the bridge process exited ({s})"),
            None => "the bridge process closed its output".to_string(),
        };
        let last = self.stderr_tail.lock().ok().and_then(|t| t.iter().rev().find(|l| !l.trim().is_empty()).cloned());
        BridgeError::Protocol(match last {
            Some(l) => format!("{status}: {}", l.trim()),
            None => status,
        })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A call's response -> its outputs or the error it reports.
fn interpret(r: Response) -> Result<Vec<PathBuf>, BridgeError> {
    if r.ok {
        return Ok(r.outputs);
    }
    let msg = r.error.unwrap_or_else(|| "the bridge gave no reason".into());
    Err(if r.unavailable { BridgeError::Unavailable(msg) } else { BridgeError::Call(msg) })
}

/// Whether `p` names something below `dir` by its components alone (no
/// `..`, which could climb out again); the bridge also resolves links.
fn lies_below(p: &Path, dir: &Path) -> bool {
    p.starts_with(dir) && p != dir && !p.components().any(|c| c == Component::ParentDir)
}

/// A successful response must name exactly `out_dir/result_0.npy`, ...,
/// each a regular file (not a link): anything else is a broken bridge.
fn expect_result_files(outputs: &[PathBuf], out_dir: &Path) -> Result<(), BridgeError> {
    for (k, p) in outputs.iter().enumerate() {
        let want = out_dir.join(format!("result_{k}.npy"));
        if *p != want {
            return Err(BridgeError::Protocol(format!("result {k} is {}, expected {}", p.display(), want.display())));
        }
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_file() => {}
            _ => return Err(BridgeError::Protocol(format!("result {k} ({}) is not a regular file", p.display()))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(p: &str) -> CallArgValue {
        CallArgValue::Array { path: PathBuf::from(p) }
    }

    #[test]
    fn conv_request_encodes_like_the_protocol() {
        let req = Request {
            func: "tf.nn.convolution".into(),
            args: vec![],
            kwargs: vec![
                ("input".into(), arr("/t/x.npy")),
                ("filters".into(), arr("/t/w.npy")),
                ("strides".into(), CallArgValue::Ints { value: vec![1, 2] }),
                ("padding".into(), CallArgValue::Literal { value: Literal::Str("VALID".into()) }),
            ],
            out_dir: PathBuf::from("/t/out"),
            gradient: None,
        };
        let expected = r#"{"func":"tf.nn.convolution","args":[],"kwargs":{"input":{"kind":"array","path":"/t/x.npy"},"filters":{"kind":"array","path":"/t/w.npy"},"strides":{"kind":"ints","value":[1,2]},"padding":{"kind":"literal","value":"VALID"}},"out_dir":"/t/out"}"#;
        // Exact text: kwargs must keep source order.
        assert_eq!(req.to_json().unwrap(), expected);
    }

    #[test]
    fn every_argument_kind_encodes() {
        let req = Request {
            func: "tf.f".into(),
            args: vec![
                CallArgValue::Int { value: 3 },
                CallArgValue::Tensor { value: vec![2, 0, 5] },
                CallArgValue::Ints { value: vec![] },
                CallArgValue::Literal { value: Literal::Int(-1) },
                CallArgValue::Literal { value: Literal::Float(1.5) },
                CallArgValue::Literal { value: Literal::Float(2.0) },
                CallArgValue::Literal { value: Literal::Bool(true) },
                CallArgValue::Literal { value: Literal::Null },
            ],
            kwargs: vec![],
            out_dir: PathBuf::from("o"),
            gradient: None,
        };
        let expected = r#"{"func":"tf.f","args":[{"kind":"int","value":3},{"kind":"tensor","value":[2,0,5]},{"kind":"ints","value":[]},{"kind":"literal","value":-1},{"kind":"literal","value":1.5},{"kind":"literal","value":2.0},{"kind":"literal","value":true},{"kind":"literal","value":null}],"kwargs":{},"out_dir":"o"}"#;
        assert_eq!(req.to_json().unwrap(), expected);
    }

    #[test]
    fn non_finite_literal_is_an_encode_error() {
        let req = Request {
            func: "tf.f".into(),
            args: vec![],
            kwargs: vec![("x".into(), CallArgValue::Literal { value: Literal::Float(f64::NAN) })],
            out_dir: PathBuf::from("o"),
            gradient: None,
        };
        assert!(matches!(req.to_json(), Err(BridgeError::Encode(m)) if m.contains("tf.f")));
    }

    #[test]
    fn responses_are_interpreted() {
        let ok: Response = serde_json::from_str(r#"{"ok": true, "outputs": ["/o/result_0.npy", "/o/result_1.npy"]}"#).unwrap();
        assert_eq!(interpret(ok), Ok(vec![PathBuf::from("/o/result_0.npy"), PathBuf::from("/o/result_1.npy")]));
        let err: Response = serde_json::from_str(r#"{"ok": false, "error": "tf.x: unknown function"}"#).unwrap();
        assert_eq!(interpret(err), Err(BridgeError::Call("tf.x: unknown function".into())));
        let un: Response = serde_json::from_str(r#"{"ok": false, "error": "no tf", "unavailable": true}"#).unwrap();
        assert_eq!(interpret(un), Err(BridgeError::Unavailable("no tf".into())));
    }

    use crate::check::scratch_dir as scratch;

    #[test]
    fn finds_the_repo_above_the_executable() {
        let root = scratch("find");
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::write(root.join(SCRIPT), "").unwrap();
        std::fs::create_dir_all(root.join(".venv/bin")).unwrap();
        std::fs::write(root.join(".venv/bin/python"), "").unwrap();
        // both target/debug/eintup and a test binary in target/debug/deps/
        for exe in ["target/debug/eintup", "target/debug/deps/bridge_tf-123"] {
            let loc = BridgeLocation::resolve(None, None, Some(&root.join(exe))).unwrap();
            assert_eq!(loc, BridgeLocation::from_repo_root(&root));
        }
        // EINTUP_PYTHON overrides the interpreter only
        let loc = BridgeLocation::resolve(None, Some("/usr/bin/python3".into()), Some(&root.join("target/release/eintup"))).unwrap();
        assert_eq!(loc.python, PathBuf::from("/usr/bin/python3"));
        assert_eq!(loc.script, root.join(SCRIPT));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn missing_bridge_or_venv_is_unavailable_with_a_hint() {
        let root = scratch("missing");
        // no scripts/ anywhere above
        let e = BridgeLocation::resolve(None, None, Some(&root.join("target/debug/eintup"))).unwrap_err();
        assert!(matches!(&e, Failure::Unavailable(m) if m.contains(BRIDGE_ENV)), "{e:?}");
        // script given by the override, but no .venv next to it
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::write(root.join(SCRIPT), "").unwrap();
        let e = BridgeLocation::resolve(Some(root.join(SCRIPT).into()), None, None).unwrap_err();
        assert!(matches!(&e, Failure::Unavailable(m) if m.contains("scripts/setup --with-tf")), "{e:?}");
        assert_eq!(e.exit_code(), 3);
        // override naming a file that does not exist
        let e = BridgeLocation::resolve(Some(root.join("nope.py").into()), None, None).unwrap_err();
        assert!(matches!(&e, Failure::Unavailable(m) if m.contains("nope.py")), "{e:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn request_paths_must_lie_below_the_work_dir() {
        let w = Path::new("/tmp/eintup-check-1-0");
        assert!(lies_below(&w.join("0/x.npy"), w));
        assert!(!lies_below(w, w));
        assert!(!lies_below(Path::new("/tmp/eintup-check-1-01/x.npy"), w));
        assert!(!lies_below(&w.join("../x.npy"), w));
        assert!(!lies_below(&w.join("0/../../etc/passwd"), w));
        assert!(!lies_below(Path::new("/etc/passwd"), w));
        assert!(!lies_below(Path::new("0/x.npy"), w));
    }

    #[test]
    fn only_the_expected_result_files_are_accepted() {
        let d = scratch("results");
        let out = d.join("0");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("result_0.npy"), b"x").unwrap();
        std::fs::write(out.join("result_1.npy"), b"x").unwrap();
        let two = vec![out.join("result_0.npy"), out.join("result_1.npy")];
        assert_eq!(expect_result_files(&two, &out), Ok(()));
        assert_eq!(expect_result_files(&[], &out), Ok(()));
        // out of order, elsewhere, missing, or a link: a broken bridge
        let swapped = vec![out.join("result_1.npy"), out.join("result_0.npy")];
        assert!(matches!(expect_result_files(&swapped, &out), Err(BridgeError::Protocol(_))));
        assert!(matches!(expect_result_files(&[PathBuf::from("/etc/passwd")], &out), Err(BridgeError::Protocol(_))));
        assert!(matches!(
            expect_result_files(&[out.join("result_0.npy"), out.join("result_1.npy"), out.join("result_2.npy")], &out),
            Err(BridgeError::Protocol(_))
        ));
        std::fs::remove_file(out.join("result_0.npy")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.join("result_0.npy")).unwrap();
        assert!(matches!(expect_result_files(&two[..1], &out), Err(BridgeError::Protocol(m)) if m.contains("not a regular file")));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A stand-in bridge: `/bin/sh` running `script`, which answers the
    /// ping and then does what the rest of `script` says.
    fn sh_bridge(name: &str, after_ping: &str) -> BridgeLocation {
        let d = scratch(name);
        let script = d.join("bridge.sh");
        let ping = r#"read line; echo '{"ok": true, "tf_version": "0", "sandbox": "none (test)"}'"#;
        std::fs::write(&script, format!("{ping}\n{after_ping}\n")).unwrap();
        BridgeLocation { python: PathBuf::from("/bin/sh"), script }
    }

    fn probe(bridge: &Bridge) -> Request {
        Request { func: "tf.identity".into(), args: vec![], kwargs: vec![], out_dir: bridge.work_dir().join("0"), gradient: None }
    }

    #[test]
    fn a_bridge_that_dies_at_start_is_unavailable_not_retried() {
        let d = scratch("dies-at-start");
        std::fs::write(d.join("bridge.sh"), "exit 5\n").unwrap();
        let loc = BridgeLocation { python: PathBuf::from("/bin/sh"), script: d.join("bridge.sh") };
        match Bridge::start(&loc) {
            Err(Failure::Unavailable(m)) => assert!(m.contains("exit status: 5"), "{m}"),
            Err(e) => panic!("expected Unavailable, got {e:?}"),
            Ok(_) => panic!("a bridge that exits at once started"),
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_dead_bridge_is_replaced_in_a_new_directory() {
        let loc = sh_bridge("dies-in-call", "read line; exit 7");
        let mut bridge = Bridge::start(&loc).unwrap();
        let first = bridge.work_dir().to_path_buf();
        assert!(first.ends_with("p0") && first.starts_with(bridge.scratch_dir()), "{}", first.display());
        match bridge.call(&probe(&bridge)) {
            Err(BridgeError::Protocol(m)) => assert!(m.contains("exit status: 7"), "{m}"),
            other => panic!("expected the death to be reported, got {other:?}"),
        }
        // The next call goes to a new process in a new directory.
        assert!(bridge.work_dir().ends_with("p1"), "{}", bridge.work_dir().display());
        assert!(!first.exists(), "the dead process's directory stays");
        assert!(matches!(bridge.call(&probe(&bridge)), Err(BridgeError::Protocol(m)) if m.contains("exit status: 7")));
        let scratch_dir = bridge.scratch_dir().to_path_buf();
        drop(bridge);
        assert!(!scratch_dir.exists());
        let _ = std::fs::remove_dir_all(loc.script.parent().unwrap());
    }

    #[test]
    fn a_call_past_the_time_limit_is_stopped_and_the_next_one_served() {
        // `exec`: the process itself sleeps, so killing it ends the sleep.
        let loc = sh_bridge("sleeps", "read line; exec sleep 100");
        let limits = CallLimits { time: Some(Duration::from_millis(300)), memory: None };
        let mut bridge = Bridge::start_with(&loc, limits).unwrap();
        let t = std::time::Instant::now();
        match bridge.call(&probe(&bridge)) {
            Err(e @ BridgeError::Stopped(_)) => assert!(e.to_string().contains("time limit of 0.3 s (--call-timeout)"), "{e}"),
            other => panic!("expected the call to be stopped, got {other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(bridge.work_dir().ends_with("p1"));
        assert!(matches!(bridge.call(&probe(&bridge)), Err(BridgeError::Stopped(_))));
        drop(bridge);
        let _ = std::fs::remove_dir_all(loc.script.parent().unwrap());
    }

    #[test]
    fn missing_interpreter_is_unavailable() {
        let loc = BridgeLocation { python: PathBuf::from("/nonexistent/python"), script: PathBuf::from(SCRIPT) };
        match Bridge::start(&loc) {
            Err(Failure::Unavailable(m)) => assert!(m.contains("/nonexistent/python") && m.contains("--with-tf"), "{m}"),
            Err(e) => panic!("expected Unavailable, got {e:?}"),
            Ok(_) => panic!("a missing interpreter started"),
        }
    }
}
