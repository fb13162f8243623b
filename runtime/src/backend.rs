//! The run path every device shares: what a bundle's manifest says to do,
//! over a [`Backend`] that knows how to do each step on one kind of device
//! (the CUDA driver in `cuda`, the PTX emulator in `emu`).
//!
//! [`check`] validates inputs and target before any device work; [`load`]
//! loads the module, resolves the launched kernels, allocates one zeroed
//! buffer per non-empty manifest buffer and resolves the steps (and each
//! input's generator) into [`Action`]s on device addresses; [`upload`],
//! [`generate`] and [`zero`] fill buffers; [`execute`] runs the main
//! actions in manifest order (possibly many times: a loaded
//! [`Program`](crate::Program), timing); [`download_one`] copies a buffer
//! back. [`prepare`] is a one-shot run's load, uploads and generators. So the emulator exercises exactly
//! the argument marshalling, fills and launch order a GPU run uses.

use std::collections::BTreeMap;

use crate::bundle::Bundle;
use crate::check::{check_inputs, check_target};
use crate::error::{Error, Result};
use crate::manifest::{Role, Step};
use crate::profile::ProfileReport;
use eintup_tensor::tensor::Tensor;

/// One kind of device, for the duration of one run.
pub(crate) trait Backend {
    /// A loaded PTX module.
    type Module;
    /// A kernel of the module, ready to launch.
    type Kernel: Clone;
    /// A device allocation.
    type Buffer;

    fn load(&mut self, ptx: &str) -> Result<Self::Module>;
    fn kernel(&mut self, module: &Self::Module, name: &str) -> Result<Self::Kernel>;
    /// A buffer of `bytes` (> 0) bytes holding `contents`, or zeros.
    fn alloc(&mut self, name: &str, bytes: usize, contents: Option<&[u8]>) -> Result<Self::Buffer>;
    /// Copies `host` (the buffer's size) into `buffer`.
    fn write(&mut self, buffer: &mut Self::Buffer, host: &[u8]) -> Result<()>;
    /// The device address kernels receive for `buffer`.
    fn address(&self, buffer: &Self::Buffer) -> u64;
    /// Sets the buffer's `bytes` bytes to zero.
    fn zero(&mut self, buffer: &Self::Buffer, bytes: usize) -> Result<()>;
    fn launch(&mut self, launch: &Launch<'_, Self::Kernel>) -> Result<()>;
    /// How many blocks of `block` threads of `kernel` the device runs at
    /// once (multiprocessors x resident blocks per multiprocessor); `None`
    /// where that does not matter (the emulator).
    fn resident_blocks(&mut self, kernel: &Self::Kernel, block: [u32; 3]) -> Result<Option<u32>>;
    /// Waits for everything enqueued, reporting deferred errors.
    fn synchronize(&mut self) -> Result<()>;
    /// A loaded program starts another run (the emulator's whole-run
    /// instruction limit counts each run on its own).
    fn start_run(&mut self) {}
    /// The profile of the launches since the last call (the emulator's);
    /// `None` where the device has none.
    fn take_profile(&mut self) -> Option<ProfileReport> {
        None
    }
    fn download(&mut self, buffer: &Self::Buffer, bytes: usize) -> Result<Vec<u8>>;
}

/// One launch step, resolved.
pub(crate) struct Launch<'a, K> {
    pub name: &'a str,
    pub kernel: &'a K,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// One device address per kernel parameter, from the manifest's `args`.
    pub args: &'a [u64],
}

/// One non-skipped step with everything resolved.
pub(crate) enum Action<K> {
    /// Zero manifest buffer `buffer` (an index into the manifest's buffers).
    Fill { buffer: usize },
    Launch { step: usize, name: String, kernel: K, grid: [u32; 3], block: [u32; 3], args: Vec<u64> },
}

/// A bundle made ready to run on one backend. Field order is drop order:
/// the buffers go before the module whose kernels used them.
pub(crate) struct Prepared<B: Backend> {
    pub actions: Vec<Action<B::Kernel>>,
    /// Per input buffer with a generator: its index and resolved steps.
    generators: Vec<(usize, Vec<Action<B::Kernel>>)>,
    /// Per manifest buffer: the allocation and its size; `None` when empty.
    buffers: Vec<Option<(B::Buffer, usize)>>,
    module: B::Module,
}

impl<B: Backend> Prepared<B> {
    /// `(step, kernel)` of every launch action, in order.
    pub(crate) fn launches(&self) -> impl Iterator<Item = (usize, &str)> {
        self.actions.iter().filter_map(|a| match a {
            Action::Launch { step, name, .. } => Some((*step, name.as_str())),
            Action::Fill { .. } => None,
        })
    }
}

/// Everything checked before any device work: the inputs against the
/// manifest, the bundle's target against the device's architecture.
pub(crate) fn check(bundle: &Bundle, inputs: &BTreeMap<String, Tensor>, arch: (u32, u32), device_name: &str) -> Result<()> {
    check_inputs(bundle.manifest(), inputs)?;
    check_target(bundle.manifest(), arch, device_name)
}

/// Loads, allocates, uploads, generates the missing inputs and resolves
/// the main steps: what a one-shot run does ([`load`], then [`upload`] and
/// [`generate`] per input).
pub(crate) fn prepare<B: Backend>(b: &mut B, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<Prepared<B>> {
    let mut p = load(b, bundle)?;
    for (i, buf) in bundle.manifest().buffers.iter().enumerate() {
        if buf.role != Role::Input {
            continue;
        }
        match inputs.get(&buf.name) {
            Some(t) => upload(b, &mut p, i, &buf.name, &t.data.to_ne_bytes())?,
            // Inputs the caller left out are made on the device, once, by
            // their generators (check_inputs made sure each has one).
            None => generate(b, &p, i)?,
        }
    }
    b.synchronize()?;
    Ok(p)
}

/// Loads the module, allocates every non-empty buffer (zeroed) and
/// resolves the main steps and every input's generator: a bundle made
/// resident, run by [`execute`] as many times as wanted.
pub(crate) fn load<B: Backend>(b: &mut B, bundle: &Bundle) -> Result<Prepared<B>> {
    let manifest = bundle.manifest();
    let module = b.load(bundle.ptx())?;
    let mut buffers = Vec::with_capacity(manifest.buffers.len());
    for buf in &manifest.buffers {
        let bytes = buf.byte_size().unwrap_or(0);
        // Kernels receive a null pointer for an empty buffer.
        buffers.push(if bytes == 0 { None } else { Some((b.alloc(&buf.name, bytes, None)?, bytes)) });
    }
    let index: BTreeMap<&str, usize> = manifest.buffers.iter().enumerate().map(|(i, buf)| (buf.name.as_str(), i)).collect();
    let mut p = Prepared { actions: Vec::new(), generators: Vec::new(), buffers, module };
    for g in &manifest.generate {
        let at = *index.get(g.buffer.as_str()).ok_or_else(|| Error::BadManifest(format!("generate: unknown buffer `{}`", g.buffer)))?;
        let acts = actions(b, &p, &manifest.kernels, &g.steps, &index)?;
        p.generators.push((at, acts));
    }
    p.actions = actions(b, &p, &manifest.kernels, &manifest.steps, &index)?;
    Ok(p)
}

/// Copies `host` into buffer `i` (named `name`), which must be its size.
pub(crate) fn upload<B: Backend>(b: &mut B, p: &mut Prepared<B>, i: usize, name: &str, host: &[u8]) -> Result<()> {
    match &mut p.buffers[i] {
        Some((mem, bytes)) if *bytes == host.len() => b.write(mem, host),
        None if host.is_empty() => Ok(()),
        other => {
            // check_input compared shapes and dtypes, so this only trips if
            // that check and byte_size disagree.
            let have = other.as_ref().map_or(0, |(_, n)| *n);
            Err(Error::Input { name: name.to_string(), reason: format!("{} bytes supplied, the buffer has {have}", host.len()) })
        }
    }
}

/// Runs the generator of input buffer `i`; `BadManifest` if it has none.
pub(crate) fn generate<B: Backend>(b: &mut B, p: &Prepared<B>, i: usize) -> Result<()> {
    let Some((_, acts)) = p.generators.iter().find(|(at, _)| *at == i) else {
        return Err(Error::BadManifest(format!("buffer {i} has no generator")));
    };
    run_actions(b, p, acts)
}

/// Zeroes buffer `i` (nothing for an empty one).
pub(crate) fn zero<B: Backend>(b: &mut B, p: &Prepared<B>, i: usize) -> Result<()> {
    match &p.buffers[i] {
        Some((mem, bytes)) => b.zero(mem, *bytes),
        None => Ok(()),
    }
}

/// Downloads buffer `i` (empty for an empty buffer); does not wait for
/// earlier work on its own: call [`Backend::synchronize`] after.
pub(crate) fn download_one<B: Backend>(b: &mut B, p: &Prepared<B>, i: usize) -> Result<Vec<u8>> {
    match &p.buffers[i] {
        Some((mem, bytes)) => b.download(mem, *bytes),
        None => Ok(Vec::new()),
    }
}

/// Steps resolved to actions on the prepared buffers; empty launches are
/// dropped, and the grid of a grid-stride kernel is capped at what the
/// device runs at once ([`capped_grid`]).
fn actions<B: Backend>(
    b: &mut B,
    p: &Prepared<B>,
    kernels: &[crate::manifest::Kernel],
    steps: &[Step],
    index: &BTreeMap<&str, usize>,
) -> Result<Vec<Action<B::Kernel>>> {
    let buffer = |name: &str| -> Result<usize> {
        index.get(name).copied().ok_or_else(|| Error::BadManifest(format!("unknown buffer `{name}`")))
    };
    let mut out = Vec::with_capacity(steps.len());
    for (step, s) in steps.iter().enumerate() {
        if s.is_empty_launch() {
            continue;
        }
        match s {
            Step::Fill { buffer: name, .. } => out.push(Action::Fill { buffer: buffer(name)? }),
            Step::Launch { kernel, grid, block, args } => {
                let args = args
                    .iter()
                    .map(|a| Ok(p.buffers[buffer(a)?].as_ref().map_or(0, |(mem, _)| b.address(mem))))
                    .collect::<Result<Vec<u64>>>()?;
                let k = b.kernel(&p.module, kernel)?;
                let grid_stride = kernels.iter().any(|m| m.name == *kernel && m.grid_stride);
                let grid = match grid_stride {
                    true => capped_grid(*grid, b.resident_blocks(&k, *block)?),
                    false => *grid,
                };
                out.push(Action::Launch { step, name: kernel.clone(), kernel: k, grid, block: *block, args });
            }
        }
    }
    Ok(out)
}

/// A grid-stride kernel's grid, at most `resident` blocks (one full wave:
/// every block then loops over the rest, and no partial last wave leaves
/// multiprocessors idle). Only a one-dimensional grid is capped.
pub(crate) fn capped_grid(grid: [u32; 3], resident: Option<u32>) -> [u32; 3] {
    match resident {
        Some(r) if r > 0 && grid[1] == 1 && grid[2] == 1 && grid[0] > r => [r, 1, 1],
        _ => grid,
    }
}

/// Runs the prepared main actions in order. Does not wait for completion.
pub(crate) fn execute<B: Backend>(b: &mut B, p: &Prepared<B>) -> Result<()> {
    run_actions(b, p, &p.actions)
}

fn run_actions<B: Backend>(b: &mut B, p: &Prepared<B>, actions: &[Action<B::Kernel>]) -> Result<()> {
    for a in actions {
        match a {
            Action::Fill { buffer } => {
                if let Some((mem, bytes)) = &p.buffers[*buffer] {
                    b.zero(mem, *bytes)?;
                }
            }
            Action::Launch { name, kernel, grid, block, args, .. } => {
                b.launch(&Launch { name, kernel, grid: *grid, block: *block, args })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::capped_grid;

    #[test]
    fn grid_stride_grids_cap_at_one_wave() {
        // 4096 blocks on 132 SMs x 8 resident: one wave of 1056.
        assert_eq!(capped_grid([4096, 1, 1], Some(1056)), [1056, 1, 1]);
        // Smaller grids, unknown residency and 2-D grids are left alone.
        assert_eq!(capped_grid([256, 1, 1], Some(1056)), [256, 1, 1]);
        assert_eq!(capped_grid([4096, 1, 1], None), [4096, 1, 1]);
        assert_eq!(capped_grid([4096, 1, 1], Some(0)), [4096, 1, 1]);
        assert_eq!(capped_grid([4096, 2, 1], Some(1056)), [4096, 2, 1]);
    }
}
