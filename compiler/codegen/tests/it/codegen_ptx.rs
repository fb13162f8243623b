//! NVPTX code generation without a GPU: every hand-built module of
//! tests/codegen_cases is compiled to PTX for sm_80 and sm_90, its text is
//! checked (one `.entry` per kernel, `.version` and `.target` lines), and
//! when `ptxas` is available it must assemble without warnings.

use crate::codegen_cases;

use eintup_codegen::{emit_llvm, emit_ptx, ptxas_check, ptxas_path, thread_count, FpContract, Target};

const ARCHS: [(u32, (u32, u32)); 2] = [(80, (7, 0)), (90, (7, 8))];

fn version(v: &str) -> (u32, u32) {
    let (a, b) = v.split_once('.').expect("version has a dot");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn every_module_emits_checked_ptx() {
    for (name, m) in codegen_cases::all() {
        for (sm, min_version) in ARCHS {
            let (ptx, info) = emit_ptx(&m, 7, sm, FpContract::Fast).unwrap_or_else(|e| panic!("{name} sm_{sm}: {e}"));
            // The ISA version requested for the architecture, exactly.
            assert_eq!(version(&info.ptx_version), min_version, "{name} sm_{sm}: PTX {}", info.ptx_version);
            assert!(ptx.lines().any(|l| l.trim() == format!(".version {}", info.ptx_version)));
            assert!(ptx.lines().any(|l| l.trim() == format!(".target sm_{sm}")), "{name}: no .target sm_{sm}");
            let names: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(info.kernels, names, "{name} sm_{sm}");
            for k in &names {
                let entries = ptx.lines().filter(|l| l.contains(&format!(".entry {k}("))).count();
                assert_eq!(entries, 1, "{name}: `.entry {k}(` in\n{ptx}");
            }
        }
    }
}

#[test]
fn ptx_assembles_with_ptxas() {
    let Some(path) = ptxas_path() else {
        println!("skipped: ptxas not found (set PTXAS or run scripts/setup --with-ptxas)");
        return;
    };
    println!("ptxas: {}", path.display());
    for (name, m) in codegen_cases::all() {
        for (sm, _) in ARCHS {
            let (ptx, _) = emit_ptx(&m, 7, sm, FpContract::Fast).unwrap();
            let res = ptxas_check(&ptx, sm).unwrap_or_else(|e| panic!("{name} sm_{sm}: {e}"));
            let names: Vec<&str> = res.iter().map(|r| r.name.as_str()).collect();
            let mut want: Vec<&str> = m.kernels.iter().map(|k| k.name.as_str()).collect();
            let mut got = names.clone();
            want.sort();
            got.sort();
            assert_eq!(got, want, "{name} sm_{sm}: ptxas kernels");
            for r in &res {
                assert!(r.registers <= 255, "{name}: {r:?}");
                assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{name}: {r:?}");
            }
        }
    }
}

#[test]
fn ptxas_rejects_broken_ptx() {
    if ptxas_path().is_none() {
        println!("skipped: ptxas not found");
        return;
    }
    let (ptx, _) = emit_ptx(&codegen_cases::gather(), 0, 80, FpContract::Fast).unwrap();
    let broken = ptx.replacen("ret;", "ret", 1);
    assert!(ptxas_check(&broken, 80).is_err());
}

#[test]
fn nvptx_ir_uses_kernels_global_pointers_and_thread_ids() {
    let ir = emit_llvm(&codegen_cases::matmul(), 0, Target::Nvptx { sm: 80, fp_contract: FpContract::Off }).unwrap();
    assert!(ir.contains("target triple = \"nvptx64-nvidia-cuda\""), "{ir}");
    assert!(ir.contains("define ptx_kernel void @matmul(ptr addrspace(1)"), "{ir}");
    assert!(ir.contains("@llvm.nvvm.read.ptx.sreg.tid.x"), "{ir}");
    assert!(ir.contains("@llvm.nvvm.read.ptx.sreg.nctaid.x"), "{ir}");
    assert!(!ir.contains(" fast "), "{ir}");
    let atom = emit_llvm(&codegen_cases::atomics(), 0, Target::Nvptx { sm: 90, fp_contract: FpContract::Off }).unwrap();
    assert!(atom.contains("atomicrmw add ptr addrspace(1)"), "{atom}");
    assert!(atom.contains("atomicrmw fadd ptr addrspace(1)") && atom.contains("double"), "{atom}");
}

/// `--fp-contract fast` lets the NVPTX backend fuse the matmul's product
/// with the accumulating add (`fma.rn`, one rounding); `off` keeps the
/// interpreter's two roundings (`mul.rn` then `add.rn`). Only the program's
/// own arithmetic is marked: `%` and `//` on floats never fuse.
#[test]
fn fp_contract_fuses_products_into_fma_only_when_fast() {
    let (fast, _) = emit_ptx(&codegen_cases::matmul(), 0, 80, FpContract::Fast).unwrap();
    let (off, _) = emit_ptx(&codegen_cases::matmul(), 0, 80, FpContract::Off).unwrap();
    assert!(fast.contains("fma.rn.f64"), "{fast}");
    assert!(!off.contains("fma.rn"), "{off}");
    assert!(off.contains("mul.rn.f64") || off.contains("mul.f64"), "{off}");
    let ir = emit_llvm(&codegen_cases::matmul(), 0, Target::Nvptx { sm: 80, fp_contract: FpContract::Fast }).unwrap();
    assert!(ir.contains("fmul contract double") || ir.contains("call contract double @llvm.fma") || ir.contains("@llvm.fmuladd"), "{ir}");
    assert!(!ir.contains(" fast "), "no other fast-math flag: {ir}");
    let (ops, _) = emit_ptx(&codegen_cases::float_ops(), 0, 80, FpContract::Fast).unwrap();
    assert!(!ops.contains("fma.rn"), "float // and % must not fuse: {ops}");
}

#[test]
fn thread_counts_cover_the_parallel_chain() {
    let m = codegen_cases::matmul();
    let (mm, _, nn) = codegen_cases::MM;
    assert_eq!(thread_count(&m.kernels[0]), mm * nn); // i, j parallel; k reduce
    assert_eq!(thread_count(&m.kernels[1]), mm * nn);
    let g = codegen_cases::gather();
    assert_eq!(thread_count(&g.kernels[0]), codegen_cases::GATHER_N);
    let s = codegen_cases::scalars_and_empty();
    assert_eq!(thread_count(&s.kernels[0]), 1); // reduce loop: one thread
    assert_eq!(thread_count(&s.kernels[1]), 0); // empty parallel loop
}

#[test]
fn unsupported_architectures_are_errors() {
    assert!(emit_ptx(&codegen_cases::matmul(), 0, 52, FpContract::Off).is_err());
    assert!(emit_ptx(&codegen_cases::matmul(), 0, 120, FpContract::Off).is_err());
}
