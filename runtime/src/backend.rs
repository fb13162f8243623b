//! The run path every device shares: what a bundle's manifest says to do,
//! over a [`Backend`] that knows how to do each step on one kind of device
//! (the CUDA driver in `cuda`, the PTX emulator in `emu`).
//!
//! [`check`] validates inputs and target before any device work;
//! [`prepare`] loads the module, resolves the launched kernels, allocates
//! one buffer per non-empty manifest buffer (inputs uploaded, the rest
//! zeroed), runs the generators of the inputs the caller left out, and
//! resolves the steps into [`Action`]s on device addresses; [`execute`]
//! runs the actions in manifest order (possibly many times, for timing);
//! [`download`] copies every buffer back. So the emulator exercises exactly
//! the argument marshalling, fills and launch order a GPU run uses.

use std::collections::BTreeMap;

use crate::bundle::Bundle;
use crate::check::{check_inputs, check_target};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, Role, Step};
use eintup_tensor::tensor::{Data, Tensor};

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
/// the main steps.
pub(crate) fn prepare<B: Backend>(b: &mut B, bundle: &Bundle, inputs: &BTreeMap<String, Tensor>) -> Result<Prepared<B>> {
    let manifest = bundle.manifest();
    let module = b.load(bundle.ptx())?;
    let mut buffers = Vec::with_capacity(manifest.buffers.len());
    for buf in &manifest.buffers {
        let bytes = buf.byte_size().unwrap_or(0);
        if bytes == 0 {
            // Kernels receive a null pointer for an empty buffer.
            buffers.push(None);
            continue;
        }
        let host = match (buf.role, inputs.get(&buf.name)) {
            (Role::Input, Some(t)) => {
                let host = t.data.to_ne_bytes();
                if host.len() != bytes {
                    // check_inputs compared shapes and dtypes, so this only
                    // trips if that check and byte_size disagree.
                    let reason = format!("{} bytes supplied, the buffer has {bytes}", host.len());
                    return Err(Error::Input { name: buf.name.clone(), reason });
                }
                Some(host)
            }
            _ => None,
        };
        let mem = b.alloc(&buf.name, bytes, host.as_deref())?;
        buffers.push(Some((mem, bytes)));
    }
    b.synchronize()?;

    let index: BTreeMap<&str, usize> = manifest.buffers.iter().enumerate().map(|(i, buf)| (buf.name.as_str(), i)).collect();
    let mut prepared = Prepared { actions: Vec::new(), buffers, module };
    // Inputs the caller left out are made on the device, once, by their
    // generators (check_inputs made sure each has one).
    for g in manifest.generate.iter().filter(|g| !inputs.contains_key(&g.buffer)) {
        prepared.actions = actions(b, &prepared, &manifest.kernels, &g.steps, &index)?;
        execute(b, &prepared)?;
    }
    prepared.actions = actions(b, &prepared, &manifest.kernels, &manifest.steps, &index)?;
    Ok(prepared)
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

/// Runs the prepared actions in order. Does not wait for completion.
pub(crate) fn execute<B: Backend>(b: &mut B, p: &Prepared<B>) -> Result<()> {
    for a in &p.actions {
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

/// Copies every buffer back, in manifest order.
pub(crate) fn download<B: Backend>(b: &mut B, manifest: &Manifest, p: &Prepared<B>) -> Result<BTreeMap<String, Tensor>> {
    let mut raw = Vec::with_capacity(p.buffers.len());
    for buf in &p.buffers {
        raw.push(match buf {
            Some((mem, bytes)) => b.download(mem, *bytes)?,
            None => Vec::new(),
        });
    }
    // Kernel faults of a GPU surface here, at the first synchronisation.
    b.synchronize()?;
    let mut out = BTreeMap::new();
    for (buf, bytes) in manifest.buffers.iter().zip(raw) {
        let data = Data::from_ne_bytes(buf.dtype, &bytes)
            .ok_or_else(|| Error::Driver(format!("buffer `{}`: downloaded {} bytes", buf.name, bytes.len())))?;
        out.insert(buf.name.clone(), Tensor { shape: buf.shape.clone(), data });
    }
    Ok(out)
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
