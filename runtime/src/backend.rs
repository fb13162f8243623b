//! The run path every device shares: what a bundle's manifest says to do,
//! over a [`Backend`] that knows how to do each step on one kind of device
//! (the CUDA driver in `cuda`, the PTX emulator in `emu`).
//!
//! [`check`] validates inputs and target before any device work; [`load`]
//! loads the module, resolves the launched kernels, allocates one zeroed
//! buffer per non-empty manifest buffer and resolves the steps (and each
//! input's generator) into [`Action`]s on manifest buffers; [`bind`] puts a
//! caller's [`DeviceBuffer`](crate::DeviceBuffer) in place of one of them;
//! [`upload`], [`generate`] and [`zero`] fill buffers; [`execute`] runs the
//! main actions in manifest order (possibly many times: a loaded
//! [`Program`](crate::Program), timing), each launch receiving the
//! addresses the buffers have at that moment; [`download_one`] copies a
//! buffer back. [`prepare`] is a one-shot run's load, uploads and
//! generators. So the emulator exercises exactly the argument marshalling,
//! fills and launch order a GPU run uses.

use std::collections::BTreeMap;

use crate::buffer::{DeviceId, DeviceMemory};
use crate::bundle::Bundle;
use crate::check::{check_inputs, check_target};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, Role, Step};
use crate::profile::ProfileReport;
use eintup_tensor::tensor::Tensor;

/// One kind of device, for the duration of one run.
pub(crate) trait Backend {
    /// A loaded PTX module.
    type Module;
    /// A kernel of the module, ready to launch.
    type Kernel: Clone;
    /// A device allocation.
    /// A device allocation, freed when dropped.
    type Buffer;

    fn load(&mut self, ptx: &str) -> Result<Self::Module>;
    fn kernel(&mut self, module: &Self::Module, name: &str) -> Result<Self::Kernel>;
    /// A zeroed buffer of `bytes` (> 0) bytes.
    fn alloc(&mut self, name: &str, bytes: usize) -> Result<Self::Buffer>;
    /// The device address kernels receive for `buffer`.
    fn address(&self, buffer: &Self::Buffer) -> u64;
    /// The device whose memory this backend's kernels address.
    fn device_id(&self) -> DeviceId;
    // Copies and fills take device addresses rather than allocations, so
    // that they reach a caller's bound buffer as well as the program's own.
    /// Copies `host` to the device at `addr`.
    fn write(&mut self, addr: u64, host: &[u8]) -> Result<()>;
    /// Sets `bytes` bytes at `addr` to zero.
    fn zero(&mut self, addr: u64, bytes: usize) -> Result<()>;
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
    /// Marks the work enqueued so far as run `n`'s (`n` increasing), so
    /// that [`Backend::finished`] can tell, without waiting, when it is
    /// done. A synchronous backend (the emulator) has nothing to record.
    fn mark(&mut self, _n: u64) -> Result<()> {
        Ok(())
    }
    /// The highest mark whose work has finished, without waiting; `last`
    /// is the highest recorded, a synchronous backend's answer.
    fn finished(&mut self, last: u64) -> Result<u64> {
        Ok(last)
    }
    /// The profile of the launches since the last call (the emulator's);
    /// `None` where the device has none.
    fn take_profile(&mut self) -> Option<ProfileReport> {
        None
    }
    /// The `bytes` bytes at `addr`, after everything enqueued before.
    fn download(&mut self, addr: u64, bytes: usize) -> Result<Vec<u8>>;
    /// Enqueues all later work on the caller's `stream` (a `CUstream`; null:
    /// the device's own), after waiting for the work already enqueued. The
    /// emulator runs everything at once and has no streams.
    ///
    /// # Safety
    /// `stream` must be a live stream of the device's context for as long
    /// as work is enqueued on it.
    unsafe fn use_stream(&mut self, _stream: *mut std::ffi::c_void) -> Result<()> {
        Ok(())
    }
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
    /// `args`: one manifest buffer per kernel parameter, whose address is
    /// looked up at each launch (a bound buffer may have replaced it).
    /// `dims`: the values of the kernel's dim parameters, passed after the
    /// buffers' addresses (format 2).
    Launch { step: usize, name: String, kernel: K, grid: [u32; 3], block: [u32; 3], args: Vec<usize>, dims: Vec<u64> },
}

/// A bundle made ready to run on one backend. Field order is drop order:
/// the buffers go before the module whose kernels used them.
pub(crate) struct Prepared<B: Backend> {
    pub actions: Vec<Action<B::Kernel>>,
    /// Per input buffer with a generator: its index and resolved steps.
    generators: Vec<(usize, Vec<Action<B::Kernel>>)>,
    /// Per manifest buffer: the device address kernels receive (the
    /// program's own allocation, or a caller's buffer bound in its place;
    /// 0 for an empty buffer) and its size in bytes.
    slots: Vec<(u64, usize)>,
    /// Per manifest buffer: the program's own allocation; `None` when empty.
    /// Kept while a caller's buffer is bound, so that unbinding restores it.
    owned: Vec<Option<B::Buffer>>,
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
            Some(t) => upload(b, &mut p, i, &buf.name, t.data.as_ne_bytes())?,
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
    let module = b.load(bundle.ptx())?;
    let mut p = Prepared { actions: Vec::new(), generators: Vec::new(), slots: Vec::new(), owned: Vec::new(), module };
    place(b, &mut p, bundle.manifest())?;
    Ok(p)
}

/// Gives `p` the buffers and resolved steps of `manifest`. At load every
/// buffer is allocated (zeroed). At a re-bind of the same dynamic bundle to
/// other dims ([`Program::rebind`](crate::Program::rebind)) the module
/// stays, and only a buffer whose byte size changed is allocated anew
/// (zeroed, its old allocation freed); the others keep their allocation,
/// contents and any caller's buffer bound in their place. Nothing changes
/// unless everything succeeds. Returns which buffers were allocated anew.
pub(crate) fn place<B: Backend>(b: &mut B, p: &mut Prepared<B>, manifest: &Manifest) -> Result<Vec<bool>> {
    let index: BTreeMap<&str, usize> = manifest.buffers.iter().enumerate().map(|(i, buf)| (buf.name.as_str(), i)).collect();
    let mut generators = Vec::with_capacity(manifest.generate.len());
    for g in &manifest.generate {
        let at = *index.get(g.buffer.as_str()).ok_or_else(|| Error::BadManifest(format!("generate: unknown buffer `{}`", g.buffer)))?;
        generators.push((at, actions(b, &p.module, &manifest.kernels, &g.steps, &index)?));
    }
    let main = actions(b, &p.module, &manifest.kernels, &manifest.steps, &index)?;
    let mut fresh = Vec::with_capacity(manifest.buffers.len());
    for (i, buf) in manifest.buffers.iter().enumerate() {
        let bytes = buf.byte_size().unwrap_or(0);
        fresh.push(match p.slots.get(i) {
            Some(&(_, had)) if had == bytes => None,
            // Kernels receive a null pointer for an empty buffer.
            _ => Some(if bytes == 0 { None } else { Some(b.alloc(&buf.name, bytes)?) }),
        });
    }
    let mut anew = Vec::with_capacity(fresh.len());
    for (i, (mem, buf)) in fresh.into_iter().zip(&manifest.buffers).enumerate() {
        let Some(mem) = mem else {
            anew.push(false);
            continue;
        };
        let slot = (mem.as_ref().map_or(0, |m| b.address(m)), buf.byte_size().unwrap_or(0));
        match i < p.slots.len() {
            true => (p.slots[i], p.owned[i]) = (slot, mem),
            false => {
                p.slots.push(slot);
                p.owned.push(mem);
            }
        }
        anew.push(true);
    }
    p.slots.truncate(manifest.buffers.len());
    p.owned.truncate(manifest.buffers.len());
    (p.generators, p.actions) = (generators, main);
    Ok(anew)
}

/// Copies `host` into buffer `i` (named `name`), which must be its size.
pub(crate) fn upload<B: Backend>(b: &mut B, p: &mut Prepared<B>, i: usize, name: &str, host: &[u8]) -> Result<()> {
    match p.slots[i] {
        (_, 0) if host.is_empty() => Ok(()),
        (addr, bytes) if bytes == host.len() => b.write(addr, host),
        // check_input compared shapes and dtypes, so this only trips if
        // that check and byte_size disagree.
        (_, bytes) => Err(Error::Input { name: name.to_string(), reason: format!("{} bytes supplied, the buffer has {bytes}", host.len()) }),
    }
}

/// Puts the caller's buffer `to` in place of buffer `i` (named `name`) for
/// every later launch, fill, upload and download; `None` restores the
/// program's own allocation. The caller checked dtype and shape.
pub(crate) fn bind<B: Backend>(b: &B, p: &mut Prepared<B>, i: usize, name: &str, to: Option<&dyn DeviceMemory>) -> Result<()> {
    p.slots[i].0 = match to {
        Some(m) if m.device() == b.device_id() => m.address(),
        Some(_) => return Err(Error::InvalidArgument(format!("binding buffer `{name}`: the DeviceBuffer was made by another device"))),
        None => p.owned[i].as_ref().map_or(0, |m| b.address(m)),
    };
    Ok(())
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
    match p.slots[i] {
        (_, 0) => Ok(()),
        (addr, bytes) => b.zero(addr, bytes),
    }
}

/// Downloads buffer `i` (empty for an empty buffer); does not wait for
/// earlier work on its own: call [`Backend::synchronize`] after.
pub(crate) fn download_one<B: Backend>(b: &mut B, p: &Prepared<B>, i: usize) -> Result<Vec<u8>> {
    match p.slots[i] {
        (_, 0) => Ok(Vec::new()),
        (addr, bytes) => b.download(addr, bytes),
    }
}

/// Steps resolved to actions on the prepared buffers; empty launches are
/// dropped, and the grid of a grid-stride kernel is capped at what the
/// device runs at once ([`capped_grid`]).
fn actions<B: Backend>(
    b: &mut B,
    module: &B::Module,
    kernels: &[crate::manifest::Kernel],
    steps: &[Step],
    index: &BTreeMap<&str, usize>,
) -> Result<Vec<Action<B::Kernel>>> {
    let buffer = |name: &str| -> Result<usize> { index.get(name).copied().ok_or_else(|| Error::BadManifest(format!("unknown buffer `{name}`"))) };
    let mut out = Vec::with_capacity(steps.len());
    for (step, s) in steps.iter().enumerate() {
        if s.is_empty_launch() {
            continue;
        }
        match s {
            Step::Fill { buffer: name, .. } => out.push(Action::Fill { buffer: buffer(name)? }),
            Step::Launch { kernel, grid, block, args, dims } => {
                let args = args.iter().map(|a| buffer(a)).collect::<Result<Vec<usize>>>()?;
                // Validated non-negative (`Manifest::validate`).
                let dims = dims.iter().map(|&d| d as u64).collect();
                let k = b.kernel(module, kernel)?;
                let grid_stride = kernels.iter().any(|m| m.name == *kernel && m.grid_stride);
                let grid = match grid_stride {
                    true => capped_grid(*grid, b.resident_blocks(&k, *block)?),
                    false => *grid,
                };
                out.push(Action::Launch { step, name: kernel.clone(), kernel: k, grid, block: *block, args, dims });
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
            Action::Fill { buffer } => zero(b, p, *buffer)?,
            Action::Launch { name, kernel, grid, block, args, dims, .. } => {
                let args: Vec<u64> = args.iter().map(|&i| p.slots[i].0).chain(dims.iter().copied()).collect();
                b.launch(&Launch { name, kernel, grid: *grid, block: *block, args: &args })?;
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
