//! The PTX emulator on hand-written kernels: reconvergence, shared memory
//! and barriers, warp-level instructions, numerics end to end, and planted
//! faults (an off-by-one loop bound, an out-of-bounds store, a missing
//! `bar.sync`, colliding writes, a spinning kernel), each reported with its
//! kernel, block, thread and PTX line.

use crate::common;

use std::collections::BTreeMap;

use eintup_runtime::emu::OtherAccess;
use eintup_runtime::{Bundle, Data, Device, EmuOptions, Error, Fault, FaultKind, Manifest, ProfileReport, Tensor};
use serde_json::{json, Value};

/// A bundle of `ptx` (every `.entry` listed as a kernel with parameters
/// `p0`, `p1`, ...), the given buffers and steps.
fn bundle(ptx: &str, buffers: Value, steps: Value) -> Bundle {
    let module = eintup_runtime::ptx::parse(ptx).unwrap();
    let kernels: Vec<Value> = module
        .entries()
        .map(|e| {
            let params: Vec<String> = (0..e.params.len()).map(|i| format!("p{i}")).collect();
            json!({"name": e.name, "params": params, "registers": null, "spill_stores": null, "spill_loads": null})
        })
        .collect();
    let m = json!({
        "format_version": 1,
        "producer": "eintup-runtime emulator tests",
        "source": {"name": "hand-written.et", "text": ""},
        "config": {"seed": 0, "float": "f32", "eintups": {}},
        "target": {"arch": "sm_80", "ptx_version": "7.0"},
        "buffers": buffers,
        "kernels": kernels,
        "steps": steps,
    });
    Bundle::new(Manifest::parse(&m.to_string()).unwrap(), ptx.to_string()).unwrap()
}

fn buf(name: &str, dtype: &str, n: usize, role: &str) -> Value {
    let init = if role == "input" { json!({"kind": "input"}) } else { json!({"kind": "zero"}) };
    json!({"name": name, "dtype": dtype, "shape": [n], "role": role, "init": init})
}

fn launch(kernel: &str, grid: u32, block: u32, args: &[&str]) -> Value {
    json!({"op": "launch", "kernel": kernel, "grid": [grid, 1, 1], "block": [block, 1, 1], "args": args})
}

fn module(body: &str) -> String {
    format!(".version 7.0\n.target sm_80\n.address_size 64\n\n{body}")
}

fn run(b: &Bundle, inputs: BTreeMap<String, Tensor>) -> Result<(BTreeMap<String, Tensor>, ProfileReport), Error> {
    Device::emulator().run_profiled(b, &inputs)
}

fn fault(r: Result<(BTreeMap<String, Tensor>, ProfileReport), Error>) -> Fault {
    match r {
        Err(Error::Fault(f)) => *f,
        Err(e) => panic!("expected a kernel fault, got the error {e}"),
        Ok(_) => panic!("expected a kernel fault, the run succeeded"),
    }
}

fn u32s(t: &Tensor) -> Vec<u32> {
    match &t.data {
        Data::I32(v) => v.iter().map(|&x| x as u32).collect(),
        other => panic!("{other:?}"),
    }
}

/// A line number of `needle` in `text` (1-based).
fn line_of(text: &str, needle: &str) -> u32 {
    text.lines().position(|l| l.contains(needle)).map(|i| i as u32 + 1).unwrap_or_else(|| panic!("no {needle:?}"))
}

const DIVERGE: &str = "
.visible .entry diverge(.param .u64 diverge_param_0)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [diverge_param_0];
	mov.u32 	%r1, %tid.x;
	and.b32 	%r2, %r1, 1;
	setp.eq.s32 	%p1, %r2, 1;
	@%p1 bra 	$ODD;
	mov.u32 	%r3, 100;
	activemask.b32 	%r4;
	bra.uni 	$JOIN;
$ODD:
	mov.u32 	%r3, 200;
	activemask.b32 	%r4;
$JOIN:
	activemask.b32 	%r5;
	mul.wide.u32 	%rd2, %r1, 12;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r3;
	st.global.u32 	[%rd3+4], %r4;
	st.global.u32 	[%rd3+8], %r5;
	ret;
}
";

#[test]
fn divergent_lanes_run_apart_and_reconverge() {
    let b = bundle(&module(DIVERGE), json!([buf("out", "i32", 3 * 64, "output")]), json!([launch("diverge", 1, 64, &["out"])]));
    let (out, profile) = run(&b, BTreeMap::new()).unwrap();
    let v = u32s(&out["out"]);
    for t in 0..64 {
        let (value, side) = if t % 2 == 0 { (100, 0x5555_5555) } else { (200, 0xAAAA_AAAA) };
        assert_eq!(&v[3 * t..3 * t + 3], [value, side, u32::MAX], "thread {t}");
    }
    // Per warp: 5 instructions before the branch, 3 on the even side, 2 on
    // the odd side, 7 after the join: once each, so the warp ran the join
    // together, not once per side. Thread instructions count the lanes
    // whose guard holds (16 for the branch).
    let p = profile.get("diverge").unwrap();
    assert_eq!(p.warp_instructions, 2 * 17);
    assert_eq!(p.thread_instructions, 2 * (32 * 4 + 16 + 16 * 3 + 16 * 2 + 32 * 7));
    assert_eq!((p.global_store_requests, p.global_store_sectors), (6, 2 * 3 * 12));
}

const LOOPS: &str = "
.visible .entry loops(.param .u64 loops_param_0)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [loops_param_0];
	mov.u32 	%r1, %tid.x;
	and.b32 	%r2, %r1, 3;
	mov.u32 	%r3, 0;
$LOOP:
	setp.ge.u32 	%p1, %r3, %r2;
	@%p1 bra 	$DONE;
	add.s32 	%r3, %r3, 1;
	bra.uni 	$LOOP;
$DONE:
	activemask.b32 	%r5;
	mul.wide.u32 	%rd2, %r1, 8;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r3;
	st.global.u32 	[%rd3+4], %r5;
	ret;
}
";

#[test]
fn lanes_leaving_a_loop_at_different_trips_wait_for_each_other() {
    let b = bundle(&module(LOOPS), json!([buf("out", "i32", 2 * 40, "output")]), json!([launch("loops", 1, 40, &["out"])]));
    let (out, profile) = run(&b, BTreeMap::new()).unwrap();
    let v = u32s(&out["out"]);
    for t in 0..40usize {
        // 40 threads: a full warp and a warp of 8 lanes.
        let full = if t < 32 { u32::MAX } else { 0xFF };
        assert_eq!(&v[2 * t..2 * t + 2], [(t % 4) as u32, full], "thread {t}");
    }
    // 4 + (4 trips of 4 + the last test and branch: 2) + 6 after, per warp.
    assert_eq!(profile.get("loops").unwrap().warp_instructions, 2 * (4 + 3 * 4 + 2 + 6));
}

const REVERSE: &str = "
.visible .entry reverse(.param .u64 reverse_param_0, .param .u64 reverse_param_1)
{
	.reg .b32 	%r<8>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<8>;
	.shared .align 4 .b8 buf[256];

	ld.param.u64 	%rd1, [reverse_param_0];
	ld.param.u64 	%rd2, [reverse_param_1];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mad.lo.s32 	%r4, %r2, %r3, %r1;
	mul.wide.s32 	%rd3, %r4, 4;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mov.u32 	%r6, buf;
	shl.b32 	%r5, %r1, 2;
	add.s32 	%r7, %r6, %r5;
	st.shared.f32 	[%r7], %f1;
	bar.sync 	0;
	sub.s32 	%r5, 63, %r1;
	shl.b32 	%r5, %r5, 2;
	add.s32 	%r5, %r5, %r6;
	ld.shared.f32 	%f1, [%r5];
	add.s64 	%rd5, %rd2, %rd3;
	st.global.f32 	[%rd5], %f1;
	ret;
}
";

fn reverse_bundle(ptx: &str) -> Bundle {
    bundle(&module(ptx), json!([buf("x", "f32", 128, "input"), buf("y", "f32", 128, "output")]), json!([launch("reverse", 2, 64, &["x", "y"])]))
}

fn x128() -> BTreeMap<String, Tensor> {
    let x = Tensor::new(vec![128], Data::F32((0..128).map(|i| i as f32).collect())).unwrap();
    BTreeMap::from([("x".to_string(), x)])
}

#[test]
fn shared_memory_and_barriers_reverse_each_block() {
    let (out, profile) = run(&reverse_bundle(REVERSE), x128()).unwrap();
    let want: Vec<f32> = (0..128).map(|i| (i / 64 * 64 + 63 - i % 64) as f32).collect();
    assert_eq!(out["y"].data, Data::F32(want));
    let p = profile.get("reverse").unwrap();
    // A store and a load per warp, 2 warps per block, 2 blocks; the
    // reversed permutation hits every bank once.
    assert_eq!((p.shared_requests, p.shared_bank_conflicts), (8, 0));
}

const VCOPY: &str = "
.visible .entry vcopy(.param .u64 vcopy_param_0, .param .u64 vcopy_param_1)
{
	.reg .b32 	%r<2>;
	.reg .f32 	%f<5>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd1, [vcopy_param_0];
	ld.param.u64 	%rd2, [vcopy_param_1];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 16;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd4+OFFSET];
	add.s64 	%rd5, %rd2, %rd3;
	st.global.v4.f32 	[%rd5], {%f1, %f2, %f3, %f4};
	ret;
}
";

/// A 128-bit load (what block tiles' copies use, docs/codegen.md "Vector
/// loads") is one request of 16 bytes per lane: a warp's 512 contiguous
/// bytes are 16 sectors, as 4 scalar requests of 4 sectors would be. One
/// that is not 16-byte aligned is a fault.
#[test]
fn vector_loads_are_one_request_of_16_bytes_per_lane() {
    let b = |offset: u32| {
        bundle(
            &module(&VCOPY.replace("OFFSET", &offset.to_string())),
            json!([buf("x", "f32", 132, "input"), buf("y", "f32", 128, "output")]),
            json!([launch("vcopy", 1, 32, &["x", "y"])]),
        )
    };
    let x = Tensor::new(vec![132], Data::F32((0..132).map(|i| i as f32).collect())).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), x)]);
    let (out, profile) = run(&b(0), inputs.clone()).unwrap();
    assert_eq!(out["y"].data, Data::F32((0..128).map(|i| i as f32).collect()));
    let p = profile.get("vcopy").unwrap();
    assert_eq!((p.global_load_requests, p.global_load_sectors), (1, 16));
    assert_eq!((p.global_store_requests, p.global_store_sectors), (1, 16));
    assert_eq!(p.global_bytes, 2 * 32 * 16);
    let f = fault(run(&b(4), inputs));
    assert!(matches!(f.kind, FaultKind::Misaligned { size: 16, .. }), "{f}");
}

const VRED: &str = "
.visible .entry vred(.param .u64 vred_param_0, .param .u64 vred_param_1)
{
	.reg .b32 	%r<4>;
	.reg .f32 	%f<5>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [vred_param_0];
	ld.param.u64 	%rd2, [vred_param_1];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 16;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd4];
	and.b32 	%r2, %r1, 7;
	mul.wide.u32 	%rd5, %r2, 16;
	add.s64 	%rd6, %rd2, %rd5;
	red.global.add.v4.f32 	[%rd6+OFFSET], {%f1, %f2, %f3, %f4};
	ret;
}
";

/// `red.global.add.v4.f32` (sm_90; what `widen-threads` gives a scatter's
/// atomic adds, docs/passes.md): four `f32` atomic adds at one 16-byte
/// aligned address, one request per warp. Two blocks of 32 threads add
/// thread `t`'s four values into vector `t mod 8`: each cell is the sum of
/// 8 of them, none lost. Misaligned, it is a fault; forms the ISA does not
/// have are refused when the module is read.
#[test]
fn vector_reductions_add_four_floats_in_one_request() {
    let b =
        |ptx: &str| bundle(&module(ptx), json!([buf("x", "f32", 128, "input"), buf("y", "f32", 36, "output")]), json!([launch("vred", 2, 32, &["x", "y"])]));
    let xs: Vec<f32> = (0..128).map(|i| (i as f32) * 0.5 - 7.0).collect();
    let inputs = BTreeMap::from([("x".to_string(), Tensor::new(vec![128], Data::F32(xs.clone())).unwrap())]);
    let (out, profile) = run(&b(&VRED.replace("OFFSET", "0")), inputs.clone()).unwrap();
    // Cell 4 v + i: thread t with t mod 8 = v adds x[4 t + i], in both blocks.
    let mut want = vec![0f32; 36];
    for _block in 0..2 {
        for t in 0..32 {
            for i in 0..4 {
                want[4 * (t % 8) + i] += xs[4 * t + i];
            }
        }
    }
    assert_eq!(out["y"].data, Data::F32(want));
    let p = profile.get("vred").unwrap();
    assert_eq!(p.atomic_requests, 2);
    assert_eq!(p.global_bytes, 2 * 32 * 16 * 2);
    let f = fault(run(&b(&VRED.replace("OFFSET", "4")), inputs.clone()));
    assert!(matches!(f.kind, FaultKind::Misaligned { size: 16, access: "atomic", .. }), "{f}");
    for (bad, why) in [
        ("red.global.add.v4.f64", "f32"),
        ("red.global.min.v4.f32", "red.global.add.v2|v4.f32"),
        ("red.shared.add.v4.f32", "red.global.add.v2|v4.f32"),
        ("red.global.add.v8.f32", "v8"),
    ] {
        let ptx = VRED.replace("OFFSET", "0").replace("red.global.add.v4.f32", bad);
        let msg = run(&b(&ptx), inputs.clone()).map(|_| ()).expect_err(bad).to_string();
        assert!(msg.contains(why), "{bad}: {msg}");
    }
    // Two values for a `.v4`: a malformed instruction.
    let ptx = VRED.replace("[%rd6+OFFSET], {%f1, %f2, %f3, %f4}", "[%rd6], {%f1, %f2}");
    let msg = run(&b(&ptx), inputs).map(|_| ()).expect_err("two values").to_string();
    assert!(msg.contains("needs 4 values"), "{msg}");
}

const VSHARED: &str = "
.visible .entry vshared(.param .u64 vshared_param_0, .param .u64 vshared_param_1)
{
	.reg .b32 	%r<6>;
	.reg .f32 	%f<9>;
	.reg .b64 	%rd<6>;
	.shared .align 16 .b8 tile[512];

	ld.param.u64 	%rd1, [vshared_param_0];
	ld.param.u64 	%rd2, [vshared_param_1];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 16;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd4];
	mov.u32 	%r2, tile;
	shl.b32 	%r3, %r1, 4;
	add.s32 	%r4, %r2, %r3;
	st.shared.v4.f32 	[%r4], {%f1, %f2, %f3, %f4};
	bar.sync 	0;
	mul.lo.s32 	%r5, %r1, MUL;
	and.b32 	%r5, %r5, MASK;
	shl.b32 	%r5, %r5, 4;
	add.s32 	%r5, %r2, %r5;
	ld.shared.v4.f32 	{%f5, %f6, %f7, %f8}, [%r5];
	add.s64 	%rd5, %rd2, %rd3;
	st.global.v4.f32 	[%rd5], {%f5, %f6, %f7, %f8};
	ret;
}
";

/// A 128-bit shared access (block tiles' register-tile operands, docs/
/// passes.md "Shared layout") is one request; its wavefronts are those of
/// a GPU, a quarter-warp each when 32 lanes read distinct vectors: a
/// warp's 512 contiguous bytes are 4 wavefronts and no conflict, two
/// half-warps reading the same 16 vectors 2 (broadcast), 16 vectors 32
/// bytes apart 4, 2 of them conflicts (words 8 apart share a bank).
#[test]
fn vector_shared_accesses_are_one_request_of_quarter_warp_wavefronts() {
    let x = Tensor::new(vec![128], Data::F32((0..128).map(|i| i as f32).collect())).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), x)]);
    // (thread t reads vector (t * mul) & mask, the read's wavefronts and conflicts)
    for (mul, mask, wavefronts, conflicts) in [(1, 31, 4, 0), (1, 15, 2, 0), (2, 31, 4, 2)] {
        let ptx = VSHARED.replace("MUL", &mul.to_string()).replace("MASK", &mask.to_string());
        let b = bundle(&module(&ptx), json!([buf("x", "f32", 128, "input"), buf("y", "f32", 128, "output")]), json!([launch("vshared", 1, 32, &["x", "y"])]));
        let (out, profile) = run(&b, inputs.clone()).unwrap();
        let want: Vec<f32> = (0..128).map(|i| (((i / 4 * mul) & mask) * 4 + i % 4) as f32).collect();
        assert_eq!(out["y"].data, Data::F32(want), "mul {mul} mask {mask}");
        let p = profile.get("vshared").unwrap();
        // The store: 32 distinct vectors side by side, 4 wavefronts.
        assert_eq!((p.shared_requests, p.shared_wavefronts, p.shared_bank_conflicts), (2, 4 + wavefronts, conflicts), "mul {mul} mask {mask}");
    }
}

/// Each block copies its 64 floats of `x` into shared memory with
/// `cp.async` of SIZE bytes (COPIERS threads, `.CACHE`), waits for the
/// group, and writes them back reversed (as `REVERSE`).
const ACOPY: &str = "
.visible .entry acopy(.param .u64 acopy_param_0, .param .u64 acopy_param_1)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<10>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<8>;
	.shared .align 16 .b8 buf[256];

	ld.param.u64 	%rd1, [acopy_param_0];
	ld.param.u64 	%rd2, [acopy_param_1];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r6, buf;
	setp.ge.u32 	%p1, %r1, COPIERS;
	@%p1 bra 	WAIT;
	mul.wide.u32 	%rd3, %r1, SIZE;
	mul.wide.u32 	%rd5, %r2, 256;
	add.s64 	%rd4, %rd1, %rd5;
	add.s64 	%rd4, %rd4, %rd3;
	mul.lo.s32 	%r5, %r1, SIZE;
	add.s32 	%r7, %r6, %r5;
	cp.async.CACHE.shared.global 	[%r7], [%rd4], SIZEEXTRA;
WAIT:
	cp.async.commit_group;
	cp.async.wait_group 	0;
	bar.sync 	0;
	sub.s32 	%r5, 63, %r1;
	shl.b32 	%r5, %r5, 2;
	add.s32 	%r5, %r5, %r6;
	ld.shared.f32 	%f1, [%r5];
	mad.lo.s32 	%r8, %r2, 64, %r1;
	mul.wide.s32 	%rd6, %r8, 4;
	add.s64 	%rd7, %rd2, %rd6;
	st.global.f32 	[%rd7], %f1;
	ret;
}
";

/// `ACOPY` with copies of `size` bytes (`.ca` up to 8, `.cg` for 16), the
/// source size operand `extra` (", 0" or nothing), and `edit` applied.
fn acopy(size: u32, extra: &str, edit: &dyn Fn(String) -> String) -> String {
    let cache = if size == 16 { "cg" } else { "ca" };
    let ptx = ACOPY
        .replace("COPIERS", &(256 / size).to_string())
        .replace("CACHE", cache)
        .replace("SIZEEXTRA", &format!("{size}{extra}"))
        .replace("SIZE", &size.to_string());
    edit(ptx)
}

fn acopy_bundle(ptx: &str) -> Bundle {
    bundle(&module(ptx), json!([buf("x", "f32", 128, "input"), buf("y", "f32", 128, "output")]), json!([launch("acopy", 2, 64, &["x", "y"])]))
}

/// `cp.async` of 4, 8 and 16 bytes lands at `cp.async.wait_group`, and is
/// profiled as a global load request (its sectors) and a shared request.
#[test]
fn cp_async_copies_land_at_their_wait_group() {
    for size in [4u32, 8, 16] {
        let ptx = acopy(size, "", &|p| p);
        let (out, profile) = run(&acopy_bundle(&ptx), x128()).unwrap_or_else(|e| panic!("{size}: {e}"));
        let want: Vec<f32> = (0..128).map(|i| (i / 64 * 64 + 63 - i % 64) as f32).collect();
        assert_eq!(out["y"].data, Data::F32(want), "{size}-byte copies");
        let p = profile.get("acopy").unwrap();
        // 2 blocks; 256 / size copying threads per block, 32 to a warp
        // request; each block's 256 bytes are 8 sectors of 32 bytes.
        let copy_warps = (256 / size).div_ceil(32) as u64;
        assert_eq!((p.global_load_requests, p.global_load_sectors), (2 * copy_warps, 2 * 8), "{size}-byte copies");
        // Shared: the copies' requests, then one load per warp (2 per block).
        assert_eq!(p.shared_requests, 2 * copy_warps + 2 * 2, "{size}-byte copies");
    }
    // `wait_all` commits the open group and waits for it.
    let ptx = acopy(4, "", &|p| p.replace("\tcp.async.commit_group;\n\tcp.async.wait_group \t0;\n", "\tcp.async.wait_all;\n"));
    assert!(ptx.contains("wait_all"));
    assert!(run(&acopy_bundle(&ptx), x128()).is_ok());
    // A source size of 0 copies no byte and fills the destination with zeros.
    let (out, _) = run(&acopy_bundle(&acopy(4, ", 0", &|p| p)), x128()).unwrap();
    assert_eq!(out["y"].data, Data::F32(vec![0.0; 128]));
}

/// Reading a `cp.async` destination before the `cp.async.wait_group`
/// that lands it is a race, reported with the copy's thread and line:
/// without the wait, and with a wait that leaves the only group in flight.
#[test]
fn reading_a_cp_async_destination_before_its_wait_is_a_race() {
    let no_wait = acopy(4, "", &|p| p.replace("\tcp.async.wait_group \t0;\n", ""));
    let one_left = acopy(4, "", &|p| p.replace("wait_group \t0", "wait_group \t1"));
    for ptx in [no_wait, one_left] {
        let f = fault(run(&acopy_bundle(&ptx), x128()));
        // Thread 0 reads word 63, which thread 63's copy has not landed in.
        assert_eq!((f.kernel.as_str(), f.block, f.thread), ("acopy", [0, 0, 0], [0, 0, 0]));
        assert_eq!(f.line, line_of(&module(&ptx), "ld.shared.f32"));
        let FaultKind::Race { space, kind, other, address } = &f.kind else { panic!("{f}") };
        assert_eq!((*space, *kind), ("shared", eintup_runtime::emu::RaceKind::PendingAsyncCopy));
        assert_eq!(*address, 63 * 4);
        assert_eq!(other, &OtherAccess { thread: Some(([0, 0, 0], [63, 0, 0])), line: line_of(&module(&ptx), "cp.async.ca") });
        assert!(f.to_string().contains("before the cp.async.wait_group that lands it"), "{f}");
    }
    // A misaligned destination is a fault, as for any access.
    let ptx = acopy(16, "", &|p| p.replace("add.s32 \t%r7, %r6, %r5;", "add.s32 \t%r7, %r6, %r5;\n\tadd.s32 \t%r7, %r7, 4;"));
    let f = fault(run(&acopy_bundle(&ptx), x128()));
    assert!(matches!(f.kind, FaultKind::Misaligned { size: 16, .. }), "{f}");
}

#[test]
fn a_missing_barrier_is_a_shared_memory_race() {
    let ptx = REVERSE.replace("\tbar.sync \t0;\n", "");
    let f = fault(run(&reverse_bundle(&ptx), x128()));
    // Warp 0 reads buf[32..64) before warp 1 writes it; warp 1's first
    // write is the race, against thread 31's read.
    assert_eq!((f.kernel.as_str(), f.block, f.thread), ("reverse", [0, 0, 0], [32, 0, 0]));
    assert_eq!(f.line, line_of(&module(&ptx), "st.shared.f32"));
    let FaultKind::Race { space, kind, other, .. } = &f.kind else { panic!("{f}") };
    assert_eq!((*space, *kind), ("shared", eintup_runtime::emu::RaceKind::WriteAfterRead));
    assert_eq!(other, &OtherAccess { thread: Some(([0, 0, 0], [31, 0, 0])), line: line_of(&module(&ptx), "ld.shared.f32") });
    assert!(f.to_string().contains("shared memory race: writes a word another thread read"), "{f}");
}

#[test]
fn bank_conflicts_are_counted() {
    // Each lane stores to word 2 * lane: pairs of lanes share a bank.
    let ptx = REVERSE.replace("shl.b32 \t%r5, %r1, 2;", "shl.b32 \t%r5, %r1, 3;").replace(".b8 buf[256]", ".b8 buf[512]");
    let (_, profile) = run(&reverse_bundle(&ptx), x128()).unwrap_or_else(|e| panic!("{e}"));
    let p = profile.get("reverse").unwrap();
    assert_eq!(p.shared_bank_conflicts, 4, "one extra wavefront per strided store");
}

#[test]
fn an_off_by_one_loop_bound_reads_past_the_buffer() {
    let ptx = common::PTX.replace("setp.gt.s32 \t%p1, %r9, 999;", "setp.gt.s32 \t%p1, %r9, 1000;");
    let dir = common::TempDir::new("emu-off-by-one");
    let b = Bundle::open(common::write_bundle(&dir, &common::manifest_value().to_string(), &ptx)).unwrap();
    let x = Tensor::new(vec![common::N], Data::F32(common::x_values())).unwrap();
    let f = fault(run(&b, BTreeMap::from([("x".to_string(), x)])));
    // Element 1000 falls to thread 232 of the 2x128 grid: block 1, thread 104.
    assert_eq!((f.kernel.as_str(), f.block, f.thread), ("add_one", [1, 0, 0], [104, 0, 0]));
    assert_eq!(f.line, line_of(&ptx, "ld.global.f32"));
    let FaultKind::OutOfBounds { space, access, size, detail, .. } = &f.kind else { panic!("{f}") };
    assert_eq!((*space, *access, *size), ("global", "load", 4));
    assert!(detail.starts_with("4 bytes past the end of buffer `x` (4000 bytes at 0x"), "{detail}");
}

const FILL: &str = "
.visible .entry fill(.param .u64 fill_param_0)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [fill_param_0];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r1;
	ret;
}
";

#[test]
fn an_out_of_bounds_store_names_the_thread_and_buffer() {
    let b = bundle(&module(FILL), json!([buf("y", "i32", 40, "output")]), json!([launch("fill", 1, 64, &["y"])]));
    let f = fault(run(&b, BTreeMap::new()));
    assert_eq!((f.block, f.thread, f.instruction.as_str()), ([0, 0, 0], [40, 0, 0], "st.global.u32 [%rd3], %r1;"));
    let msg = f.to_string();
    assert!(
        msg.starts_with("kernel `fill`, block (0, 0, 0), thread (40, 0, 0), line 15 `st.global.u32 [%rd3], %r1;`: out-of-bounds global store of 4 bytes at 0x"),
        "{msg}"
    );
    assert!(msg.ends_with(": 4 bytes past the end of buffer `y` (160 bytes at 0x700000000000)"), "{msg}");
    // A null pointer (an empty buffer) is out of bounds too.
    let b = bundle(
        &module(FILL),
        json!([json!({"name": "y", "dtype": "i32", "shape": [0], "role": "output", "init": {"kind": "zero"}})]),
        json!([launch("fill", 1, 1, &["y"])]),
    );
    assert!(fault(run(&b, BTreeMap::new())).to_string().contains("a null pointer"));
}

#[test]
fn two_threads_writing_one_word_race_unless_atomic() {
    let collide = FILL.replace("mul.wide.u32 \t%rd2, %r1, 4;", "mul.wide.u32 \t%rd2, %r1, 0;");
    let b = bundle(&module(&collide), json!([buf("y", "i32", 1, "output")]), json!([launch("fill", 2, 32, &["y"])]));
    let f = fault(run(&b, BTreeMap::new()));
    let FaultKind::Race { space: "global", kind: eintup_runtime::emu::RaceKind::WriteAfterWrite, other, .. } = &f.kind else { panic!("{f}") };
    // Lanes of one warp store in lane order: lane 1 meets lane 0.
    assert_eq!((f.thread, other.thread), ([1, 0, 0], Some(([0, 0, 0], [0, 0, 0]))));
    // Atomic adds from every thread of both blocks: no race, all counted.
    let atomic = collide.replace("st.global.u32 \t[%rd3], %r1;", "atom.global.add.u32 \t%r1, [%rd3], 1;");
    let b = bundle(&module(&atomic), json!([buf("y", "i32", 1, "output")]), json!([launch("fill", 2, 32, &["y"])]));
    let (out, profile) = run(&b, BTreeMap::new()).unwrap();
    assert_eq!(out["y"].data, Data::I32(vec![64]));
    assert_eq!(profile.get("fill").unwrap().atomic_requests, 2);
    // Every thread of both blocks storing one constant (as eintup's reset
    // kernels do where several points reach a cell): the word ends up the
    // same in any order, so no race.
    let constant = collide.replace("st.global.u32 \t[%rd3], %r1;", "mov.u32 \t%r1, 7;\n\tst.global.u32 \t[%rd3], %r1;");
    assert_ne!(constant, collide);
    let b = bundle(&module(&constant), json!([buf("y", "i32", 1, "output")]), json!([launch("fill", 2, 32, &["y"])]));
    assert_eq!(run(&b, BTreeMap::new()).unwrap().0["y"].data, Data::I32(vec![7]));
    // Without race checking the colliding stores go through (last lane wins).
    let dev = Device::emulator_with(EmuOptions { check_races: false, ..EmuOptions::default() });
    let b = bundle(&module(&collide), json!([buf("y", "i32", 1, "output")]), json!([launch("fill", 1, 32, &["y"])]));
    assert_eq!(dev.run(&b, &BTreeMap::new()).unwrap()["y"].data, Data::I32(vec![31]));
}

/// Two nested blocks declaring the same registers, as LLVM's NVPTX backend
/// writes a 64-bit rotate: thread t computes rotr(t, 1) twice = rotr(t, 2)
/// and stores its low word plus its high word's top bits.
const NESTED_BLOCKS: &str = "
.visible .entry rot(.param .u64 rot_param_0)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd1, [rot_param_0];
	mov.u32 	%r1, %tid.x;
	cvt.u64.u32 	%rd2, %r1;
	{
	.reg .b64 %lhs;
	.reg .b64 %rhs;
	shl.b64 	%lhs, %rd2, 63;
	shr.u64 	%rhs, %rd2, 1;
	add.u64 	%rd3, %lhs, %rhs;
	}
	{
	.reg .b64 %lhs;
	.reg .b64 %rhs;
	shl.b64 	%lhs, %rd3, 63;
	shr.u64 	%rhs, %rd3, 1;
	add.u64 	%rd4, %lhs, %rhs;
	}
	shr.u64 	%rd5, %rd4, 62;
	cvt.u32.u64 	%r2, %rd4;
	cvt.u32.u64 	%r3, %rd5;
	add.s32 	%r2, %r2, %r3;
	mul.wide.u32 	%rd5, %r1, 4;
	add.s64 	%rd5, %rd1, %rd5;
	st.global.u32 	[%rd5], %r2;
	ret;
}
";

#[test]
fn nested_blocks_may_declare_the_same_registers() {
    let b = bundle(&module(NESTED_BLOCKS), json!([buf("y", "i32", 8, "output")]), json!([launch("rot", 1, 8, &["y"])]));
    // rotr(t, 2): low word t >> 2, top two bits t & 3.
    let want: Vec<i32> = (0..8).map(|t| (t >> 2) + (t & 3)).collect();
    assert_eq!(run(&b, BTreeMap::new()).unwrap().0["y"].data, Data::I32(want));
}

/// Predicate immediates, as LLVM's NVPTX backend emits them: thread t
/// stores 1 + 2 (`%p2 = 0 ^ true`) + 4 (`%p3 = %p2 & 0`, false) = 3.
const PRED_IMMEDIATES: &str = "
.visible .entry preds(.param .u64 preds_param_0)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [preds_param_0];
	mov.u32 	%r1, %tid.x;
	mov.pred 	%p1, 0;
	xor.pred 	%p2, %p1, -1;
	and.pred 	%p3, %p2, 0;
	selp.u32 	%r2, 2, 0, %p2;
	selp.u32 	%r3, 4, 0, %p3;
	add.s32 	%r4, %r2, %r3;
	add.s32 	%r4, %r4, 1;
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r4;
	ret;
}
";

#[test]
fn predicate_immediates_are_false_for_zero_and_true_otherwise() {
    let b = bundle(&module(PRED_IMMEDIATES), json!([buf("y", "i32", 4, "output")]), json!([launch("preds", 1, 4, &["y"])]));
    assert_eq!(run(&b, BTreeMap::new()).unwrap().0["y"].data, Data::I32(vec![3; 4]));
}

#[test]
fn a_non_coherent_load_of_data_written_in_the_launch_is_reported() {
    // Thread t writes y[t], then reads y[t ^ 1] through the read-only path.
    let ptx = FILL.replace(
        "\tret;",
        "\txor.b32 \t%r1, %r1, 1;\n\tmul.wide.u32 \t%rd2, %r1, 4;\n\tadd.s64 \t%rd3, %rd1, %rd2;\n\tld.global.nc.u32 \t%r1, [%rd3];\n\tret;",
    );
    let b = bundle(&module(&ptx), json!([buf("y", "i32", 32, "output")]), json!([launch("fill", 1, 32, &["y"])]));
    let f = fault(run(&b, BTreeMap::new()));
    assert!(matches!(f.kind, FaultKind::Race { kind: eintup_runtime::emu::RaceKind::NonCoherentRead, .. }), "{f}");
}

const BARRIERS: &str = "
.visible .entry barriers(.param .u64 barriers_param_0)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;

	mov.u32 	%r1, %tid.x;
	setp.lt.u32 	%p1, %r1, CUT;
	@%p1 bra 	$LOW;
	bar.sync 	0;
	ret;
$LOW:
	bar.sync 	0;
	ret;
}
";

#[test]
fn barriers_must_be_reached_by_every_thread_together() {
    let run_with = |cut: u32, threads: u32| {
        let ptx = module(&BARRIERS.replace("CUT", &cut.to_string()));
        let b = bundle(&ptx, json!([buf("y", "i32", 1, "output")]), json!([launch("barriers", 1, threads, &["y"])]));
        (run(&b, BTreeMap::new()), ptx)
    };
    // Whole warps on either side: the two halves wait at different
    // barrier instructions, which can never complete.
    let (r, ptx) = run_with(32, 64);
    let f = fault(r);
    let FaultKind::Barrier(msg) = &f.kind else { panic!("{f}") };
    assert_eq!(f.thread, [32, 0, 0]);
    assert_eq!(f.line, line_of(&ptx, "@%p1 bra") + 1);
    assert!(msg.contains("neither can complete"), "{msg}");
    // Lanes of one warp on either side: a barrier in divergent code.
    let f = fault(run_with(16, 32).0);
    let FaultKind::Barrier(msg) = &f.kind else { panic!("{f}") };
    assert!(msg.contains("lanes 0-15 of warp 0 reach this barrier, lanes 16-31 of the same warp do not"), "{msg}");
    // Everyone on one side: fine.
    assert!(run_with(64, 64).0.is_ok());
}

#[test]
fn exited_threads_do_not_hold_a_barrier_back() {
    // Warp 1 returns before the barrier; warp 0 passes it alone.
    let ptx = module(&BARRIERS.replace("CUT", "32").replace("\t@%p1 bra \t$LOW;\n\tbar.sync \t0;\n", "\t@%p1 bra \t$LOW;\n"));
    let b = bundle(&ptx, json!([buf("y", "i32", 1, "output")]), json!([launch("barriers", 1, 64, &["y"])]));
    assert!(run(&b, BTreeMap::new()).is_ok());
}

const WARP_OPS: &str = "
.visible .entry warp_ops(.param .u64 warp_ops_param_0)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [warp_ops_param_0];
	mov.u32 	%r1, %laneid;
	shfl.sync.bfly.b32 	%r2, %r1, 16, 31, -1;
	add.s32 	%r1, %r1, %r2;
	shfl.sync.bfly.b32 	%r2, %r1, 8, 31, -1;
	add.s32 	%r1, %r1, %r2;
	shfl.sync.bfly.b32 	%r2, %r1, 4, 31, -1;
	add.s32 	%r1, %r1, %r2;
	shfl.sync.bfly.b32 	%r2, %r1, 2, 31, -1;
	add.s32 	%r1, %r1, %r2;
	shfl.sync.bfly.b32 	%r2, %r1, 1, 31, -1;
	add.s32 	%r1, %r1, %r2;
	mov.u32 	%r3, %laneid;
	shfl.sync.up.b32 	%r4|%p1, %r3, 1, 0, -1;
	selp.b32 	%r4, %r4, 99, %p1;
	and.b32 	%r5, %r3, 1;
	setp.eq.u32 	%p1, %r5, 1;
	vote.sync.ballot.b32 	%r6, %p1, -1;
	mov.u32 	%r7, %tid.x;
	mul.wide.u32 	%rd2, %r7, 12;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.u32 	[%rd3], %r1;
	st.global.u32 	[%rd3+4], %r4;
	st.global.u32 	[%rd3+8], %r6;
	ret;
}
";

#[test]
fn shuffles_and_votes() {
    let b = bundle(&module(WARP_OPS), json!([buf("out", "i32", 3 * 32, "output")]), json!([launch("warp_ops", 1, 32, &["out"])]));
    let (out, _) = run(&b, BTreeMap::new()).unwrap();
    let v = u32s(&out["out"]);
    for l in 0..32u32 {
        let up = if l == 0 { 99 } else { l - 1 };
        assert_eq!(&v[3 * l as usize..3 * l as usize + 3], [496, up, 0xAAAA_AAAA], "lane {l}");
    }
}

const NUMERICS: &str = "
.visible .entry numerics(.param .u64 numerics_param_0)
{
	.reg .b32 	%r<12>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<4>;
	.reg .f64 	%fd<4>;

	ld.param.u64 	%rd1, [numerics_param_0];
	div.s32 	%r1, -7, 2;
	rem.s32 	%r2, -7, 2;
	cvt.rni.s32.f64 	%r3, 0d4004000000000000;
	cvt.rmi.s32.f32 	%r4, 0fC0100000;
	cvt.rzi.s32.f64 	%r5, 0d7FF8000000000000;
	cvt.rzi.s32.f32 	%r6, 0f7FC00000;
	cvt.rzi.sat.u8.f32 	%r7, 0f43960000;
	mov.f32 	%f1, 0f3F800800;
	mov.f32 	%f2, 0fBF801000;
	fma.rn.f32 	%f3, %f1, %f1, %f2;
	mul.rn.f32 	%f4, %f1, %f1;
	add.rn.f32 	%f5, %f4, %f2;
	mov.b32 	%r8, %f3;
	mov.b32 	%r9, %f5;
	cvt.rn.f32.f64 	%f6, 0d3FD5555555555555;
	cvt.rz.f32.f64 	%f7, 0d3FD5555555555555;
	mov.b32 	%r10, %f6;
	mov.b32 	%r11, %f7;
	st.global.v4.u32 	[%rd1], {%r1, %r2, %r3, %r4};
	st.global.v4.u32 	[%rd1+16], {%r5, %r6, %r7, %r8};
	st.global.v2.u32 	[%rd1+32], {%r9, %r10};
	st.global.u32 	[%rd1+40], %r11;
	ret;
}
";

#[test]
fn numerics_follow_the_ptx_isa() {
    let b = bundle(&module(NUMERICS), json!([buf("out", "i32", 12, "output")]), json!([launch("numerics", 1, 1, &["out"])]));
    let (out, profile) = run(&b, BTreeMap::new()).unwrap();
    let v = u32s(&out["out"]);
    let third = 1.0f64 / 3.0;
    let want = [
        (-3i32) as u32,                       // div truncates toward zero
        (-1i32) as u32,                       // rem has the dividend's sign
        2,                                    // 2.5 to nearest even
        (-3i32) as u32,                       // floor(-2.25)
        i32::MIN as u32,                      // NaN from f64: MININT
        0,                                    // NaN from f32: 0
        255,                                  // 300 saturated to u8
        2f32.powi(-24).to_bits(),             // (1 + 2^-12)^2 - (1 + 2^-11), fused: exactly 2^-24
        0,                                    // unfused: the product's 2^-24 term is rounded away
        (third as f32).to_bits(),             // .rn rounds 1/3 up...
        (third as f32).next_down().to_bits(), // ...and .rz down
        0,
    ];
    assert_eq!(v[..11], want[..11]);
    let p = profile.get("numerics").unwrap();
    assert_eq!((p.fma, p.flops), (1, 4));
    // One request for each vector store.
    assert_eq!(p.global_store_requests, 4);
}

#[test]
fn an_endless_loop_hits_the_instruction_limit() {
    let ptx = module(".visible .entry spin(.param .u64 spin_param_0)\n{\n$L:\n\tbra.uni \t$L;\n}\n");
    let b = bundle(&ptx, json!([buf("y", "i32", 1, "output")]), json!([launch("spin", 1, 32, &["y"])]));
    let dev = Device::emulator_with(EmuOptions { instruction_limit: 1000, ..EmuOptions::default() });
    match dev.run(&b, &BTreeMap::new()) {
        Err(Error::Fault(f)) => assert_eq!((f.kind.clone(), f.line), (FaultKind::InstructionLimit(1000), 8)),
        other => panic!("{other:?}"),
    }
}

/// Launches each far under the per-launch limit still end: all launches of
/// a run together may issue at most `run_instruction_limit`.
#[test]
fn many_launches_hit_the_run_instruction_limit() {
    // `fill` with one warp issues 6 warp instructions.
    let launches = |n: usize| bundle(&module(FILL), json!([buf("y", "i32", 32, "output")]), Value::Array(vec![launch("fill", 1, 32, &["y"]); n]));
    let dev = Device::emulator_with(EmuOptions { instruction_limit: 1000, run_instruction_limit: 60, ..EmuOptions::default() });
    let (_, profile) = dev.run_profiled(&launches(10), &BTreeMap::new()).unwrap();
    assert_eq!(profile.get("fill").unwrap().warp_instructions, 60);
    match dev.run(&launches(11), &BTreeMap::new()) {
        Err(Error::Fault(f)) => {
            assert_eq!((f.kind.clone(), f.line), (FaultKind::RunInstructionLimit(60), line_of(&module(FILL), "ld.param.u64")));
            assert!(f.to_string().contains("the run's launches together issued more than 60 warp instructions"), "{f}");
        }
        other => panic!("{other:?}"),
    }
    // A loaded program counts each run on its own: ten runs of 60.
    let mut p = dev.load(&launches(10)).unwrap();
    for _ in 0..10 {
        p.run().unwrap();
    }
    assert_eq!(p.take_profile().unwrap().get("fill").unwrap().warp_instructions, 600);
}

/// A grid as large as CUDA allows (2^31 - 1 blocks) is run block after
/// block, never listed: it ends at the run's instruction limit at once.
#[test]
fn the_largest_grid_ends_at_the_run_instruction_limit() {
    let b = bundle(&module(FILL), json!([buf("y", "i32", 32, "output")]), json!([launch("fill", 2147483647, 1, &["y"])]));
    let dev = Device::emulator_with(EmuOptions { run_instruction_limit: 60, ..EmuOptions::default() });
    match dev.run(&b, &BTreeMap::new()) {
        Err(Error::Fault(f)) => assert_eq!(f.kind, FaultKind::RunInstructionLimit(60)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_instructions_and_division_by_zero() {
    let ptx = module(&FILL.replace("\tret;", "\tsad.u32 \t%r1, %r1, %r1, %r1;\n\tret;"));
    let b = bundle(&ptx, json!([buf("y", "i32", 64, "output")]), json!([launch("fill", 1, 1, &["y"])]));
    match run(&b, BTreeMap::new()) {
        Err(Error::BadPtx(msg)) => assert_eq!(msg, "line 16: the emulator does not support the instruction `sad.u32` (in `sad.u32 %r1, %r1, %r1, %r1;`)"),
        other => panic!("{other:?}"),
    }
    let ptx = module(&FILL.replace("\tret;", "\tdiv.u32 \t%r1, 7, %r1;\n\tret;"));
    let b = bundle(&ptx, json!([buf("y", "i32", 64, "output")]), json!([launch("fill", 1, 2, &["y"])]));
    let f = fault(run(&b, BTreeMap::new()));
    assert_eq!((f.thread, f.kind), ([0, 0, 0], FaultKind::DivisionByZero));
}

const SPACES: &str = "
.visible .entry spaces(.param .u64 spaces_param_0, .param .u64 spaces_param_1)
{
	.local .align 8 .b8 	__local_depot0[16];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<2>;
	.reg .b32 	%r<12>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<12>;
	.shared .align 8 .b8 tile[256];

	mov.u64 	%SPL, __local_depot0;
	cvta.local.u64 	%SP, %SPL;
	ld.param.u64 	%rd1, [spaces_param_0];
	mov.u64 	%rd9, spaces_param_1;
	ld.param.u64 	%rd2, [%rd9];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 8;
	add.s64 	%rd4, %rd1, %rd3;
	ld.global.nc.v2.f32 	{%f1, %f2}, [%rd4];
	add.rn.f32 	%f3, %f1, %f2;
	st.f32 	[%SP+4], %f3;
	ld.local.f32 	%f1, [%SPL+4];
	mov.u64 	%rd5, tile;
	cvta.shared.u64 	%rd6, %rd5;
	add.s64 	%rd7, %rd6, %rd3;
	mov.b32 	%r2, %f1;
	mov.b64 	%rd8, {%r2, %r1};
	st.u64 	[%rd7], %rd8;
	bar.sync 	0;
	xor.b32 	%r3, %r1, 1;
	mul.wide.u32 	%rd10, %r3, 8;
	add.s64 	%rd11, %rd6, %rd10;
	ld.u64 	%rd8, [%rd11];
	mov.b64 	{%r4, %r5}, %rd8;
	bfe.u32 	%r6, %r5, 1, 3;
	bfi.b32 	%r7, 7, %r6, 8, 4;
	setp.ne.s32 	%p1, %r5, %r3;
	selp.b32 	%r8, 1, 0, %p1;
	mul.wide.u32 	%rd3, %r1, 16;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.v4.u32 	[%rd4], {%r4, %r5, %r7, %r8};
	ret;
}
";

#[test]
fn local_shared_generic_and_vector_accesses() {
    let b = bundle(
        &module(SPACES),
        json!([buf("x", "f32", 2 * 32, "input"), buf("out", "i32", 4 * 32, "output")]),
        json!([launch("spaces", 1, 32, &["x", "out"])]),
    );
    let x = Tensor::new(vec![64], Data::F32((0..64).map(|i| i as f32 * 0.5).collect())).unwrap();
    let (out, profile) = run(&b, BTreeMap::from([("x".to_string(), x)])).unwrap();
    let v = u32s(&out["out"]);
    for t in 0..32u32 {
        // Lane t reads its neighbour t ^ 1's pair sum and lane number.
        let n = t ^ 1;
        let sum = (2 * n) as f32 * 0.5 + (2 * n + 1) as f32 * 0.5;
        let field = (n >> 1) & 7;
        assert_eq!(&v[4 * t as usize..4 * t as usize + 4], [sum.to_bits(), n, field | (7 << 8), 0], "lane {t}");
    }
    let p = profile.get("spaces").unwrap();
    // Generic accesses count where they land: a shared store and load.
    assert_eq!((p.shared_requests, p.global_load_requests, p.global_store_requests), (2, 1, 1));
    assert_eq!((p.global_load_sectors, p.global_store_sectors), (8, 16));
}
