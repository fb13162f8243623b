//! The NVPTX target: the `Nvptx` flavour of the lowering, optimised and
//! compiled to PTX by LLVM's NVPTX backend, the PTX checked like Triton
//! does (one `.entry` per kernel, `.version` and `.target` lines), and
//! optionally assembled by `ptxas` to prove it is accepted and to read
//! register and spill counts.

use super::lower::{lower_and_optimize, Flavour};
use super::{CodegenError, FpContract};
use eintup::ir::loops::LoopModule;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::OptimizationLevel;
use std::path::{Path, PathBuf};
use std::process::Command;

const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// What the PTX holds, as read back from its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxInfo {
    /// The `.version` line's value, e.g. `7.0`.
    pub ptx_version: String,
    /// `.entry` names, in module order.
    pub kernels: Vec<String>,
}

/// Per-kernel resource use reported by `ptxas -v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub spill_stores: u64,
    pub spill_loads: u64,
}

/// PTX ISA version (times ten) to target for `sm`: the first version that
/// supports it, and at least 7.0 from sm_80 on and 7.8 for sm_89/sm_90 (CUDA
/// 11.0 and 11.8). Limited to what LLVM 19 knows (sm_60 .. sm_90; below
/// sm_60 there is no f64 `atomicrmw fadd`).
fn ptx_isa(sm: u32) -> Result<u32, CodegenError> {
    Ok(match sm {
        60..=62 => 50,
        70 => 60,
        72 => 61,
        75 => 63,
        80 => 70,
        86 => 71,
        87 => 74,
        89 | 90 => 78,
        _ => return Err(CodegenError(format!("unsupported GPU architecture sm_{sm} (supported: 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)"))),
    })
}

fn machine(sm: u32) -> Result<TargetMachine, CodegenError> {
    let isa = ptx_isa(sm)?;
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| CodegenError(format!("NVPTX target: {}", e.to_string())))?;
    target
        .create_target_machine(
            &triple,
            &format!("sm_{sm}"),
            &format!("+ptx{isa}"),
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| CodegenError(format!("cannot create an NVPTX target machine for sm_{sm}")))
}

/// The NVPTX module of `m` after `default<O3>`, with its machine.
pub(crate) fn optimized_module<'ctx>(
    ctx: &'ctx Context,
    m: &LoopModule,
    seed: u64,
    sm: u32,
    fp_contract: FpContract,
) -> Result<(Module<'ctx>, TargetMachine), CodegenError> {
    let tm = machine(sm)?;
    let module = lower_and_optimize(ctx, m, seed, Flavour::Nvptx, fp_contract, &tm)?;
    Ok((module, tm))
}

/// PTX for every kernel of `m` on `sm_{sm}`, checked (see `PtxInfo`).
pub fn emit_ptx(m: &LoopModule, seed: u64, sm: u32, fp_contract: FpContract) -> Result<(String, PtxInfo), CodegenError> {
    let ctx = Context::create();
    let (module, tm) = optimized_module(&ctx, m, seed, sm, fp_contract)?;
    let buf = tm
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| CodegenError(format!("NVPTX code generation failed: {}", e.to_string())))?;
    let ptx = String::from_utf8_lossy(buf.as_slice()).into_owned();
    let parsed = eintup_runtime::ptx::parse(&ptx).map_err(|e| CodegenError(format!("NVPTX output does not parse as PTX: {e}")))?;
    let info = read_ptx(&parsed)?;
    if parsed.target.as_deref() != Some(format!("sm_{sm}").as_str()) {
        return Err(CodegenError(format!("PTX has no `.target sm_{sm}` line")));
    }
    let want: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
    if info.kernels != want {
        return Err(CodegenError(format!("PTX entries {:?} do not match the kernels {:?}", info.kernels, want)));
    }
    Ok((ptx, info))
}

/// The `.version` and the `.entry` names of a parsed PTX module (the
/// runtime's reader, the one the bundle checks and the emulator use).
fn read_ptx(module: &eintup_runtime::ptx::Module) -> Result<PtxInfo, CodegenError> {
    let ptx_version = module.version.clone().ok_or_else(|| CodegenError("PTX has no `.version` line".into()))?;
    Ok(PtxInfo { ptx_version, kernels: module.entries().map(|f| f.name.clone()).collect() })
}

/// Where `ptxas` is: `$PTXAS`, else the one `scripts/setup --with-ptxas`
/// installs in the repository's `.venv` (Python package
/// `nvidia-cuda-nvcc-cu12`), else the first `ptxas` on `PATH`.
pub fn ptxas_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    // This crate lives in `<repo>/compiler/codegen`.
    let venv_lib = Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).map(|repo| repo.join(".venv/lib"));
    if let Some(Ok(dirs)) = venv_lib.map(std::fs::read_dir) {
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
        dirs.sort();
        for d in dirs {
            let is_python = d.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3"));
            let p = d.join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            if is_python && p.is_file() {
                return Some(p);
            }
        }
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Assembles `ptx` for `sm_{sm}` with `ptxas -v --warning-as-error` and
/// returns each kernel's resources; any warning or error is an `Err`
/// carrying ptxas's message.
pub fn ptxas_check(ptx: &str, sm: u32) -> Result<Vec<KernelResources>, CodegenError> {
    let ptxas = ptxas_path().ok_or_else(|| CodegenError("ptxas not found (set PTXAS or run scripts/setup --with-ptxas)".into()))?;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("eintup-ptxas-{}-{n}", std::process::id()));
    let input = base.with_extension("ptx");
    let output = base.with_extension("cubin");
    std::fs::write(&input, ptx).map_err(|e| CodegenError(format!("cannot write {}: {e}", input.display())))?;
    let result = Command::new(&ptxas)
        .arg("-v")
        .arg("--gpu-name")
        .arg(format!("sm_{sm}"))
        .arg("--warning-as-error")
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output();
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
    let out = result.map_err(|e| CodegenError(format!("cannot run {}: {e}", ptxas.display())))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(CodegenError(format!("ptxas failed ({}):\n{}", out.status, stderr.trim_end())));
    }
    Ok(parse_ptxas(&stderr))
}

/// Reads the `-v` report: `Compiling entry function 'NAME' for 'sm_XX'`
/// opens a kernel; `N bytes spill stores, M bytes spill loads` and
/// `Used R registers` fill it in.
fn parse_ptxas(stderr: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    // The number just before `word` in `line`, e.g. 12 in "12 bytes spill stores".
    fn number_before(line: &str, word: &str) -> Option<u64> {
        let head = &line[..line.find(word)?];
        head.split(|c: char| !c.is_ascii_digit()).rfind(|s| !s.is_empty())?.parse().ok()
    }
    for line in stderr.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            out.push(KernelResources { name, registers: 0, spill_stores: 0, spill_loads: 0 });
            continue;
        }
        let Some(k) = out.last_mut() else { continue };
        if line.contains("spill stores") {
            k.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            k.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used ") && line.contains(" registers") {
            k.registers = number_before(line, " registers").unwrap_or(0) as u32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_report_is_parsed() {
        let report = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'k0' for 'sm_80'\n\
            ptxas info    : Function properties for k0\n    \
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 18 registers, 368 bytes cmem[0]\n\
            ptxas info    : Compiling entry function 'k1' for 'sm_80'\n\
            ptxas info    : Function properties for k1\n    \
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 6 registers, 360 bytes cmem[0]\n";
        let r = parse_ptxas(report);
        assert_eq!(
            r,
            vec![
                KernelResources { name: "k0".into(), registers: 18, spill_stores: 4, spill_loads: 12 },
                KernelResources { name: "k1".into(), registers: 6, spill_stores: 0, spill_loads: 0 },
            ]
        );
    }

    #[test]
    fn ptx_isa_versions_follow_the_architecture() {
        assert_eq!(ptx_isa(80).ok(), Some(70));
        assert_eq!(ptx_isa(90).ok(), Some(78));
        assert!(ptx_isa(50).is_err());
        assert!(ptx_isa(100).is_err());
    }

    #[test]
    fn ptx_header_and_entries_are_read() {
        let ptx = "//\n.version 7.8\n.target sm_90\n.address_size 64\n\n\t// .globl\tk0\n.visible .entry k0(\n\t.param .u64 k0_param_0\n)\n{\n}\n.visible .entry k1()\n{\n}\n";
        let read = |text: &str| read_ptx(&eintup_runtime::ptx::parse(text).unwrap());
        let info = read(ptx).unwrap();
        assert_eq!(info.ptx_version, "7.8");
        assert_eq!(info.kernels, vec!["k0".to_string(), "k1".to_string()]);
        assert!(read(".target sm_80\n").is_err());
    }
}
