//! Building a block-tiled kernel for one [`BlockChoice`]: the block and
//! thread loops, the `k` steps, each shared operand's box copied by all
//! threads together (`spread` loops between `sync`s), the register tile's
//! reads redirected to the shared buffers, and the guards of edge blocks.

use super::*;

/// [`apply`]'s tiling; with `halo`, only for a static kernel with
/// reductions around the stepped one (a convolution's window, its filter
/// taps), which then run inside each step: the step stages, once for all
/// taps, the region of each operand the block's cells read over the
/// window (the input's rows and columns of all its output positions
/// widened by the window, a halo) and sums every tap from shared memory.
/// Each cell then adds its terms channel step by channel step, the taps
/// inside: another order than the original's (taps outside, channels
/// inside), so `apply_with` asks for it only where the float policy allows
/// reordering. `None` with `halo` where it does not apply.
pub(super) fn build(m: &LoopModule, k: &Kernel, choice: &BlockChoice, halo: bool) -> Option<(String, Kernel, Vec<Buffer>)> {
    let mut chain = Chain::of_dynamic(&k.body);
    if chain.thread_nest(&k.body).is_some() {
        return None;
    }
    let rest = chain.rest(&k.body);
    let c = contraction(rest)?;
    // The sum and its clear, as every reshaping pass decides them (the
    // clear's cell is compared below: its unroll nest has its own names).
    let sum = c.sum;
    if !sum.is_plain_sum() || c.clear.is_some_and(|cl| !cl.stores_constant()) {
        return None;
    }
    let (unroll_vars, reduce_vars): (Vec<VarId>, Vec<VarId>) = (c.unrolls.iter().map(|l| l.var).collect(), c.reduces.iter().map(|l| l.var).collect());
    let w = &sum.write.offset;
    if reduce_vars.iter().any(|&v| w.depends_on(v)) || !unroll_vars.iter().all(|&v| w.depends_on(v)) {
        return None;
    }
    let distinct = match c.cell_guard {
        None => cells_distinct(w, &c.unrolls, k.vars.len()),
        Some(conds) => guarded_cells_distinct(w, &c.unrolls, conds, &chain, k.vars.len()),
    };
    if !distinct {
        return None;
    }
    // The clear stores into the same cells, by an unroll nest of the same
    // trips.
    let clear_nest = c.clear.map(|cl| (cl, &c.clear_loops));
    if let Some((cl, loops)) = &clear_nest {
        let same_trips = loops.len() == c.unrolls.len() && loops.iter().zip(&c.unrolls).all(|(a, b)| a.lo == b.lo && a.hi == b.hi);
        let renamed = loops.iter().zip(&c.unrolls).fold(cl.write.offset.clone(), |e, (a, b)| e.substitute(a.var, &IExpr::v(b.var)));
        if !same_trips || cl.write.buf != sum.write.buf || renamed != *w {
            return None;
        }
    }
    // The thread dimensions: the two innermost chain loops the write
    // depends on, free of the chain's guards and index loads.
    // `(var, lo, trip, hi)`: a dynamic chain loop has trip `None`, a
    // constant `lo` and its symbolic `hi`.
    let free: Vec<(VarId, i64, Option<i64>, IExpr)> = chain
        .loops
        .iter()
        .zip(&chain.bounds)
        .filter(|(&(v, ..), _)| w.depends_on(v) && !chain.exprs.iter().any(|e| e.uses(v)))
        .map(|(&(v, lo, _), (elo, ehi))| (v, elo.as_const().unwrap_or(lo), known_trip(elo, ehi), ehi.clone()))
        .collect();
    if chain.bounds.iter().any(|(lo, _)| lo.as_const().is_none()) {
        return None;
    }
    // `(var, lo, trip, threads)`, outermost first, in chain order; a
    // symbolic trip is `None`: its last block is guarded (`edge` below).
    let mut dims: Vec<(VarId, i64, Option<i64>, i64)> = Vec::new();
    let mut next = 0;
    for &(v, f) in &choice.threads {
        let at = free[next..].iter().position(|l| l.0 == v)? + next;
        let (_, lo, trip, _) = free[at];
        if f < 1 || trip.is_some_and(|trip| trip <= 0 || trip % f != 0) {
            return None;
        }
        dims.push((v, lo, trip, f));
        next = at + 1;
    }
    let size: i64 = dims.iter().map(|d| d.3).product();
    if dims.is_empty() || size > MAX_BLOCK_THREADS {
        return None;
    }
    let kl = *c.reduces.last()?;
    // A symbolic reduction runs `K //^ BK` steps, the last one short.
    let k_trip = known_trip(&kl.lo, &kl.hi);
    let bk = choice.step;
    if bk <= 0 || k_trip.is_some_and(|t| t % bk != 0) {
        return None;
    }

    let mut t = k.clone();
    let mut vars = t.vars.clone();
    // `(chain var, lo, trip, threads, thread var)`, outermost first.
    let threads: Vec<(VarId, i64, Option<i64>, i64, VarId)> =
        dims.iter().map(|&(v, lo, trip, f)| (v, lo, trip, f, add_var(&mut vars, &format!("{}_thread", &k.vars[v].name)))).collect();
    let is_thread = |v: VarId| threads.iter().any(|t| t.4 == v);
    let ko_v = add_var(&mut vars, &format!("{}_o", &k.vars[kl.var].name));
    let ki_v = add_var(&mut vars, &format!("{}_i", &k.vars[kl.var].name));
    // m := m_lo + (m - m_lo)*TI + ti for each thread dimension; k := lo +
    // k_o*BK + k_i.
    let at: Vec<(VarId, IExpr)> = threads.iter().map(|&(v, lo, _, f, t)| (v, tile_index(v, lo, f, t))).collect();
    let k_lo = kl.lo.as_const()?;
    let k_at = IExpr::add(IExpr::add(IExpr::c(k_lo), IExpr::mul(IExpr::v(ko_v), IExpr::c(bk))), IExpr::v(ki_v));
    let subst = |e: &IExpr| at.iter().fold(e.clone(), |e, (v, by)| e.substitute(*v, by)).substitute(kl.var, &k_at);
    // A dynamic kernel's edges: the last block along a chain loop of
    // symbolic trip and the last step of a symbolic reduction reach past
    // the ends. `edge(deps, point)` is `lo <= index < hi` for each such
    // loop whose variable `deps` says is used, the index as the tiling
    // writes it (`subst`) at `point` (the copy's element, the tile's cell).
    let edge = |deps: &dyn Fn(VarId) -> bool, point: &dyn Fn(&IExpr) -> IExpr| -> Vec<Cond> {
        let mut conds: Vec<Cond> = dims
            .iter()
            .filter(|d| d.2.is_none() && deps(d.0))
            .filter_map(|&(v, lo, ..)| Some(Cond::InRange { e: point(&subst(&IExpr::v(v))), lo: IExpr::c(lo), hi: free.iter().find(|f| f.0 == v)?.3.clone() }))
            .collect();
        if k_trip.is_none() && deps(kl.var) {
            conds.push(Cond::InRange { e: point(&k_at), lo: kl.lo.clone(), hi: kl.hi.clone() });
        }
        conds
    };
    let subst_all = |c: &Compute| {
        let mut n = vec![Node::Compute(c.clone())];
        for_each_expr_mut(&mut n, &mut |e| *e = subst(e));
        match n.pop() {
            Some(Node::Compute(c)) => c,
            _ => c.clone(),
        }
    };

    // The window's reductions, where they run inside the step (`halo`):
    // static trips, a static kernel.
    let outer = &c.reduces[..c.reduces.len() - 1];
    let static_kernel = k_trip.is_some() && threads.iter().all(|t| t.2.is_some()) && c.cell_guard.is_none() && c.clear_guard.is_none();
    if halo && (outer.is_empty() || !static_kernel || outer.iter().any(|l| known_trip(&l.lo, &l.hi).is_none_or(|t| t <= 0))) {
        return None;
    }
    // Box variables and their trips: threads, tiles, (with a halo the
    // window's reductions,) the step's k_i.
    let mut box_vars: Vec<(VarId, i64, i64)> = threads.iter().map(|t| (t.4, 0, t.3)).collect();
    box_vars.extend(c.unrolls.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))));
    if halo {
        box_vars.extend(outer.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))));
    }
    box_vars.push((ki_v, 0, bk));
    let block: i64 = threads.iter().map(|t| t.3).product();
    let uniform = |v: VarId| !box_vars.iter().any(|b| b.0 == v);

    // The sum with the substitutions; operands to stage.
    let mut body = subst_all(sum);
    let mut scratch: Vec<Buffer> = Vec::new();
    let mut stages: Vec<Node> = Vec::new();
    // A symbolic reduction's last step, when short, runs apart (below):
    // its copies also stop at the reduction's end.
    let mut last_stages: Vec<Node> = Vec::new();
    let mut shared_bytes = 0i64;
    // Copies under no edge guard: a guard around each element would keep
    // LLVM from merging a thread's loads, whose spacing then costs sectors.
    let unguarded = k_trip.is_some() && threads.iter().all(|t| t.2.is_some()) && c.cell_guard.is_none();
    for j in 0..body.values.len() {
        let VOp::Load { buf, offset } = body.values[j].op.clone() else { continue };
        let depends = |v: VarId| offset.depends_on(v);
        // Staged only when threads of the block share its values: an
        // operand every thread reads its own of (the partial sums of a
        // split reduction) gains nothing from shared memory.
        if !depends(ki_v) || !threads.iter().any(|t| depends(t.4)) || threads.iter().all(|t| depends(t.4)) {
            continue;
        }
        // Every variable it uses is a box variable or the same in the
        // whole block (chain loops, outer reductions, k_o).
        let mut ok = true;
        offset.for_each_var(&mut |v| ok &= !uniform(v) || chain.bound.contains(&v) || reduce_vars.contains(&v) || v == ko_v);
        if !ok {
            return None;
        }
        if halo {
            let sh = m.buffers.len() + scratch.len();
            let staged = stage_halo(m, k, buf, &offset, &box_vars, ki_v, &is_thread, block, body.values[j].dtype, &mut vars, sh)?;
            shared_bytes += staged.bytes;
            if shared_bytes > MAX_SHARED_BYTES {
                return None;
            }
            scratch.push(staged.buffer);
            body.values[j].op = VOp::Load { buf: sh, offset: staged.read };
            stages.push(staged.copy);
            continue;
        }
        // The copy walks the box with the variable of smallest stride in
        // the operand fastest, so that a warp reads consecutive addresses.
        let lin = offset.linear();
        let stride = |v: VarId| -> i64 {
            let atom = IExpr::v(v);
            let nonlinear = lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom);
            if nonlinear {
                i64::MAX
            } else {
                lin.coef(&atom).saturating_abs()
            }
        };
        let mut dims: Vec<(VarId, i64, i64)> = box_vars.iter().copied().filter(|&(v, ..)| depends(v)).collect();
        dims.sort_by_key(|&(v, ..)| std::cmp::Reverse(stride(v)));
        let len: i64 = dims.iter().map(|d| d.2).product();
        let dtype = body.values[j].dtype;
        // The shared buffer is laid out for the reads (docs/passes.md,
        // "Shared layout"): one row per k_i, and in a row each thread's
        // values of its register tile side by side, so that it reads up to
        // 16 bytes of them in one vector load; the threads of a warp read
        // consecutive vectors or one broadcast vector.
        let (row_digits, width) = shared_row(&box_vars, ki_v, &depends, &is_thread, 16 / dtype.size() as i64);
        let inner: i64 = row_digits.iter().map(|d| d.trip).product();
        // The element of the box at the point where each box variable `v`
        // is `at(v)`, in rows of `row` elements.
        let sh_index = |row: i64, at: &dyn Fn(VarId) -> IExpr| {
            let cols = row_digits.iter().fold(IExpr::c(0), |a, d| IExpr::add(IExpr::mul(a, IExpr::c(d.trip)), d.of(at(d.var))));
            IExpr::add(IExpr::mul(at(ki_v), IExpr::c(row)), cols)
        };
        let e_v = add_var(&mut vars, &format!("{}_e", &m.buffers[buf].name));
        // Copy element e: the point whose digits (in `dims` order) are e's.
        // A dimension in `groups` (`(var, n, lane)`) takes `n` consecutive
        // values per element (`digit * n + lane`): with `lanes` > 1 the
        // fastest one, with a block also the read vector's tile variable.
        let copy_digits = |e_v: VarId, groups: &[(VarId, i64, IExpr)]| {
            let mut digits: Vec<(VarId, IExpr)> = Vec::new();
            let mut inner_stride = 1i64;
            for (i, &(v, lo, tr)) in dims.iter().enumerate().rev() {
                let group = groups.iter().find(|g| g.0 == v);
                let tr = tr / group.map_or(1, |g| g.1);
                let q = IExpr::bin(IBin::FloorDiv, IExpr::v(e_v), IExpr::c(inner_stride));
                let mut digit = if i == 0 { q } else { IExpr::bin(IBin::Mod, q, IExpr::c(tr)) };
                if let Some((_, n, lane)) = group {
                    digit = IExpr::add(IExpr::mul(digit, IExpr::c(*n)), lane.clone());
                }
                digits.push((v, IExpr::add(digit, IExpr::c(lo))));
                inner_stride *= tr;
            }
            digits
        };
        // Box variables it uses without depending on them (`(i + t) - t`)
        // may take any value: their first.
        let unused = box_vars.iter().filter(|b| !dims.contains(b)).fold(offset.clone(), |e, &(v, lo, _)| e.substitute(v, &IExpr::c(lo)));
        let source_at = |digits: &[(VarId, IExpr)]| digits.iter().fold(unused.clone(), |e, (v, d)| e.substitute(*v, d));
        // A 16-byte load per thread (docs/passes.md, "Vector copies"): the
        // fastest dimension walks the operand with stride 1, its trip is a
        // multiple of the `lanes` elements of 16 bytes, and the first of a
        // thread's elements is provably at a multiple of `lanes`, so that
        // code generation can align it (`IExpr::residue`).
        let lanes = 16 / dtype.size() as i64;
        let fastest = dims.last().map(|d| d.0);
        let stride_1 = dims.last().is_some_and(|&(v, _, tr)| {
            let atom = IExpr::v(v);
            lanes > 1 && tr % lanes == 0 && lin.coef(&atom) == 1 && !lin.terms.iter().any(|(a, _)| a.uses(v) && *a != atom)
        });
        // Guarded copies too in a kernel with dim facts (a run-time
        // variant's): their guards test a vector's first element where that
        // decides all of it (`stage`).
        let vector = (unguarded || !k.multiples.is_empty())
            && stride_1
            && fastest.is_some_and(|f| source_at(&copy_digits(e_v, &[(f, lanes, IExpr::c(0))])).residue_under(lanes, &k.multiples) == Some(0));
        // A dynamic kernel's copy (guarded, its alignment unknown) still
        // takes a thread's `lanes` consecutive elements in one `unroll`:
        // one guard and one address for them (offsets by immediates, scalar
        // loads), where a `spread` over each element divides and guards per
        // element (the bench convolution's copies: 2.3x fewer instructions).
        // Not in a step whose guard moves with the lanes (a last step's
        // channels, a copy along a guarded edge): `index32` bounds an
        // offset without its unrolled part, which a guard on the lanes does
        // not bound (the matmul's operands would lose their limits at their
        // buffers' lengths); such a step copies one element at a time.
        let original = &sum.values[j].op;
        let deps = |v: VarId| matches!(original, VOp::Load { offset, .. } if offset.depends_on(v));
        let main_edges = |at: &dyn Fn(&IExpr) -> IExpr| edge(&|v| v != kl.var && deps(v), at);
        let last_edges = |at: &dyn Fn(&IExpr) -> IExpr| edge(&deps, at);
        let groups_in = |edges: &dyn Fn(&dyn Fn(&IExpr) -> IExpr) -> Vec<Cond>| {
            let cells = c.cell_guard.unwrap_or_default().iter().flat_map(|c| c.exprs()).map(subst);
            let mut exprs = edges(&|e| e.clone()).iter().flat_map(|c| c.exprs()).cloned().collect::<Vec<_>>().into_iter().chain(cells);
            !unguarded && stride_1 && !exprs.any(|e| fastest.is_some_and(|f| e.depends_on(f)))
        };
        let (group_main, group_last) = (groups_in(&main_edges), groups_in(&last_edges));
        let grouped = group_main || group_last;
        let (lanes, e_l) = if vector || grouped { (lanes, Some(add_var(&mut vars, &format!("{}_l", &m.buffers[buf].name)))) } else { (1, None) };
        // Where the reads' vectors run across the copy's (`a`, and `b` of a
        // cyclic tile), a thread copies a block of `width` vectors, one per
        // value of the read vector's tile variable, each of whose `lanes`
        // values goes to another read vector: `width` 16-byte loads and
        // `lanes` vector stores instead of `width * lanes` scalar stores.
        let read_var = row_digits.last().filter(|_| width > 1).map(|d| d.var);
        let across = read_var.filter(|&r| {
            let e_m = IExpr::v(vars.len());
            let groups = [(r, width, e_m), (fastest.unwrap_or(r), lanes, IExpr::c(0))];
            vector && Some(r) != fastest && source_at(&copy_digits(e_v, &groups)).residue_under(lanes, &k.multiples) == Some(0)
        });
        let e_m = across.map(|r| (r, add_var(&mut vars, &format!("{}_m", &m.buffers[buf].name))));
        let mut groups: Vec<(VarId, i64, IExpr)> = e_m.iter().map(|&(r, v)| (r, width, IExpr::v(v))).collect();
        if let (Some(f), Some(l)) = (fastest, e_l) {
            groups.push((f, lanes, IExpr::v(l)));
        }
        let per_element = lanes * if e_m.is_some() { width } else { 1 };
        let digits = copy_digits(e_v, &groups);
        let at_of = |digits: &[(VarId, IExpr)]| {
            let digits = digits.to_vec();
            move |v: VarId| digits.iter().find(|d| d.0 == v).map_or(IExpr::c(0), |d| d.1.clone())
        };
        // Rows padded where that spreads the copy's stores over more banks,
        // by whole vectors so that every row starts aligned for the reads.
        let mut unrolled: Vec<(VarId, i64)> = e_m.iter().map(|&(_, v)| (v, width)).collect();
        unrolled.extend(e_l.map(|l| (l, lanes)));
        let copies = CopyWarps { e_v, unrolled: unrolled.clone(), iterations: len / per_element, block, elem: dtype.size() as i64, nvars: vars.len() };
        // The least padding with the fewest conflicts; counting stops at
        // the first conflict-free one (a straight copy's: no padding).
        let mut best = (i64::MAX, inner);
        for r in (0..).map(|p| inner + p * width).take_while(|&r| (r - inner) * (dtype.size() as i64) <= 4 * BANKS) {
            let conflicts = copies.bank_conflicts(&sh_index(r, &at_of(&digits)));
            if conflicts < best.0 {
                best = (conflicts, r);
            }
            if conflicts == 0 {
                break;
            }
        }
        let row = best.1;
        shared_bytes += bk * row * dtype.size() as i64;
        if shared_bytes > MAX_SHARED_BYTES {
            return None;
        }
        let sh = m.buffers.len() + scratch.len();
        scratch.push(Buffer {
            name: format!("{}_{}_shared", k.name, m.buffers[buf].name),
            dtype,
            shape: static_shape(&[bk, row]),
            role: Role::Shared,
            init: Init::Zero,
        });
        body.values[j].op = VOp::Load { buf: sh, offset: sh_index(row, &IExpr::v) };
        // Past an edge the copy loads nothing: the slots it leaves are read
        // only by cells past the edge (never stored) or by `k_i` the
        // shortened last step does not reach. One step's copy: `spread`
        // over the elements, a thread's `lanes` of them `unrolled` where
        // `whole` (else one at a time), under the edge conditions `edges`
        // gives at the element.
        let alone = copy_digits(e_v, &[]);
        let stage = |whole: bool, edges: &dyn Fn(&dyn Fn(&IExpr) -> IExpr) -> Vec<Cond>| -> Option<Node> {
            let (digits, unrolled, per_element) = if whole { (&digits[..], &unrolled[..], per_element) } else { (&alone[..], &[][..], 1) };
            let copy = Compute {
                values: vec![Value { op: VOp::Load { buf, offset: source_at(digits) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: sh, offset: sh_index(row, &at_of(digits)), value: 0 },
            };
            let at_copy = |e: &IExpr| {
                box_vars
                    .iter()
                    .filter(|b| !dims.contains(b))
                    .fold(digits.iter().fold(e.clone(), |e, (v, d)| e.substitute(*v, d)), |e, &(v, lo, _)| e.substitute(v, &IExpr::c(lo)))
            };
            let mut conds = edges(&at_copy);
            // A register tile's cells past a symbolic extent (`cell_guard`):
            // the copy loads only where the cell its element belongs to is
            // in range, when the operand moves with that cell (a `b` does
            // not move with `a`'s rows: any row it is read for is in range).
            for cond in c.cell_guard.unwrap_or_default() {
                let Cond::InRange { e, lo, hi } = cond else { return None };
                let e = subst(e);
                let moves: Vec<bool> = box_vars.iter().filter(|b| e.depends_on(b.0)).map(|b| offset.depends_on(b.0)).collect();
                if moves.iter().all(|&d| d) && !moves.is_empty() {
                    conds.push(Cond::InRange { e: at_copy(&e), lo: lo.clone(), hi: at_copy(&subst(hi)) });
                } else if moves.iter().any(|&d| d) {
                    return None;
                }
            }
            // A condition the same for each lane (one that does not move
            // with the lanes, or moves by whole vectors under the kernel's
            // dim facts) is tested once, at the first lane, around the
            // lanes: one guard for a thread's elements, and a vector's
            // loads stay together (one 128-bit load); the others guard
            // each element.
            let (at_first, each): (Vec<Cond>, Vec<Cond>) = match e_l.filter(|_| whole) {
                Some(l) => conds.into_iter().partition(|c| c.same_across_lanes(l, lanes, &k.multiples)),
                None => (Vec::new(), conds),
            };
            let body = unrolled.iter().rev().fold(guarded(each, copy), |body, &(l, n)| {
                let lanes = Node::For(For { var: l, lo: IExpr::c(0), hi: IExpr::c(n), kind: LoopKind::Unroll, body: vec![body] });
                if Some(l) != e_l || at_first.is_empty() {
                    return lanes;
                }
                let mut first = at_first.clone();
                for e in first.iter_mut().flat_map(Cond::exprs_mut) {
                    *e = e.substitute(l, &IExpr::c(0));
                }
                Node::Guard(Guard { conds: first, body: vec![lanes] })
            });
            Some(Node::For(For { var: e_v, lo: IExpr::c(0), hi: IExpr::c(len / per_element), kind: LoopKind::Spread, body: vec![body] }))
        };
        stages.push(stage(vector || group_main, &main_edges)?);
        last_stages.push(stage(vector || group_last, &last_edges)?);
    }
    // An operand left in global memory that moves with a thread dimension
    // of symbolic trip would be read past the edge by the last block's
    // cells past it (never stored, but the read may leave the array).
    // So would one that moves with a guarded cell of a register tile.
    let mut cell_vars: Vec<VarId> = Vec::new();
    for cond in c.cell_guard.unwrap_or_default() {
        for e in cond.exprs() {
            subst(e).for_each_var(&mut |v| cell_vars.push(v));
        }
    }
    let past_edge = |e: &IExpr| threads.iter().any(|t| t.2.is_none() && e.depends_on(t.4)) || cell_vars.iter().any(|&v| !uniform(v) && e.depends_on(v));
    if stages.is_empty() || body.values.iter().any(|v| matches!(&v.op, VOp::Load { buf, offset } if *buf < m.buffers.len() && past_edge(offset))) {
        return None;
    }

    // One accumulator per cell of the thread's tile, in a local buffer.
    let acc = m.buffers.len() + scratch.len();
    let dtype = m.buffers[sum.write.buf].dtype;
    let tile: Vec<(VarId, i64, i64)> = c.unrolls.iter().map(|l| (l.var, l.lo.as_const().unwrap_or(0), trip(l))).collect();
    scratch.push(Buffer {
        name: format!("{}_acc", k.name),
        dtype,
        shape: if tile.is_empty() { static_shape(&[1]) } else { tile.iter().map(|d| IExpr::Const(d.2)).collect() },
        role: Role::Local,
        init: Init::Zero,
    });
    let acc_at = |vs: &[VarId]| {
        tile.iter().zip(vs).fold(IExpr::c(0), |a, (&(_, lo, tr), &v)| IExpr::add(IExpr::mul(a, IExpr::c(tr)), IExpr::sub(IExpr::v(v), IExpr::c(lo))))
    };
    body.write = Write { kind: WriteKind::Accumulate, buf: acc, offset: acc_at(&unroll_vars), value: body.write.value };
    // `unroll` loops over fresh copies of the tile variables around `leaf`.
    let mut tile_nest = |what: &str, make: &dyn Fn(&[VarId]) -> Node| {
        let fresh: Vec<VarId> = tile.iter().map(|&(v, ..)| add_var(&mut vars, &format!("{}_{what}", &k.vars[v].name))).collect();
        let leaf = make(&fresh);
        tile.iter().zip(&fresh).rev().fold(leaf, |inner, (&(_, lo, tr), &v)| {
            Node::For(For { var: v, lo: IExpr::c(lo), hi: IExpr::c(lo + tr), kind: LoopKind::Unroll, body: vec![inner] })
        })
    };
    let rename = |e: &IExpr, to: &[VarId]| unroll_vars.iter().zip(to).fold(subst(e), |e, (&u, &f)| e.substitute(u, &IExpr::v(f)));
    // The cell's own edges (the write depends on every thread dimension),
    // and, with a guarded clear, that the reduction runs at all: where it
    // does not, the kernel leaves the cell alone.
    let cell_edges = |f: &[VarId]| {
        let mut conds = edge(&|v| dims.iter().any(|d| d.0 == v), &|e| unroll_vars.iter().zip(f).fold(e.clone(), |e, (&u, &f)| e.substitute(u, &IExpr::v(f))));
        conds.extend(c.clear_guard.unwrap_or_default().iter().cloned());
        // A register tile's cells within the symbolic extents.
        for cond in c.cell_guard.unwrap_or_default() {
            let mut cond = cond.clone();
            for e in cond.exprs_mut() {
                *e = rename(e, f);
            }
            conds.push(cond);
        }
        conds
    };
    let init = tile_nest("init", &|f| match c.clear {
        Some(cl) => Node::Compute(Compute {
            values: vec![cl.values[cl.write.value].clone()],
            write: Write { kind: WriteKind::Store, buf: acc, offset: acc_at(f), value: 0 },
        }),
        None => guarded(
            cell_edges(f),
            Compute {
                values: vec![Value { op: VOp::Load { buf: sum.write.buf, offset: rename(w, f) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: acc, offset: acc_at(f), value: 0 },
            },
        ),
    });
    let flush = tile_nest("out", &|f| {
        guarded(
            cell_edges(f),
            Compute {
                values: vec![Value { op: VOp::Load { buf: acc, offset: acc_at(f) }, dtype }],
                write: Write { kind: WriteKind::Store, buf: sum.write.buf, offset: rename(w, f), value: 0 },
            },
        )
    });
    t.vars = vars;

    // The step: stage, sync, the original unroll nest over k_i, sync.
    let leaf = Node::Compute(body);
    let unrolled = c
        .unrolls
        .iter()
        .rev()
        .fold(leaf, |inner, l| Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Unroll, body: vec![inner] }));
    // With a halo the window's reductions run inside the step, around k_i.
    let inside = if halo { outer } else { &[][..] };
    let step = |stages: Vec<Node>, ki_hi: IExpr| {
        let mut step = stages;
        step.push(Node::Sync);
        let sum = Node::For(For { var: ki_v, lo: IExpr::c(0), hi: ki_hi, kind: LoopKind::Reduce, body: vec![unrolled.clone()] });
        step.push(
            inside
                .iter()
                .rev()
                .fold(sum, |inner, l| Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Reduce, body: vec![inner] })),
        );
        step.push(Node::Sync);
        step
    };
    let steps = match k_trip {
        Some(t) => vec![Node::For(For { var: ko_v, lo: IExpr::c(0), hi: IExpr::c(t / bk), kind: LoopKind::Reduce, body: step(stages, IExpr::c(bk)) })],
        // A symbolic reduction: its whole steps, then its last `K % BK`
        // terms in a loop of zero or one step (bounds the same for every
        // thread: no guard around `sync`). Whole steps keep a constant
        // `k_i` trip, which code generation unrolls.
        None => {
            let len = offset_from(&kl.hi, k_lo);
            let whole = IExpr::bin(IBin::FloorDiv, len.clone(), IExpr::c(bk));
            let short = IExpr::sub(len.clone(), IExpr::mul(IExpr::v(ko_v), IExpr::c(bk)));
            let last = Node::For(For {
                var: ko_v,
                lo: whole.clone(),
                hi: IExpr::bin(IBin::CeilDiv, len, IExpr::c(bk)),
                kind: LoopKind::Reduce,
                body: step(last_stages, short),
            });
            let mut nodes = vec![Node::For(For { var: ko_v, lo: IExpr::c(0), hi: whole, kind: LoopKind::Reduce, body: step(stages, IExpr::c(bk)) })];
            nodes.extend(fresh_copy(&[last], &mut t.vars, "last"));
            nodes
        }
    };
    let around = if halo { &[][..] } else { outer };
    let reduction = around
        .iter()
        .rev()
        .fold(steps, |inner, l| vec![Node::For(For { var: l.var, lo: l.lo.clone(), hi: l.hi.clone(), kind: LoopKind::Reduce, body: inner })]);
    let mut program = vec![init];
    program.extend(reduction);
    program.push(flush);
    let nest =
        threads.iter().rev().fold(program, |body, &(.., f, t)| vec![Node::For(For { var: t, lo: IExpr::c(0), hi: IExpr::c(f), kind: LoopKind::Thread, body })]);
    for &(v, lo, trip, f, _) in &threads {
        match trip {
            Some(trip) => chain.set_trip(&mut t.body, v, trip / f),
            // `(hi - lo) //^ f` blocks, the last one guarded.
            None => {
                let blocks = IExpr::bin(IBin::CeilDiv, offset_from(&free.iter().find(|x| x.0 == v)?.3, lo), IExpr::c(f));
                chain.set_hi(&mut t.body, v, if lo == 0 { blocks } else { IExpr::add(IExpr::c(lo), blocks) })
            }
        }
    }
    *chain.rest_mut(&mut t.body) = nest;
    let shape: Vec<String> = threads.iter().map(|t| t.3.to_string()).collect();
    let what = format!("{} threads, k step {bk}, {}{} shared bytes", shape.join("x"), if halo { "halo, " } else { "" }, shared_bytes);
    Some((what, t, scratch))
}

/// `e - lo`, written as `e` when `lo` is 0.
pub(super) fn offset_from(e: &IExpr, lo: i64) -> IExpr {
    if lo == 0 {
        e.clone()
    } else {
        IExpr::sub(e.clone(), IExpr::c(lo))
    }
}

/// `c` under a guard of `conds` (none: `c` itself).
pub(super) fn guarded(conds: Vec<Cond>, c: Compute) -> Node {
    if conds.is_empty() {
        Node::Compute(c)
    } else {
        Node::Guard(Guard { conds, body: vec![Node::Compute(c)] })
    }
}

/// [`cells_distinct`] for a dynamic kernel's register tile: each
/// condition of the cell guard is `0 <= v + E*v_t < H` with `v` a chain
/// loop over `[0, E)`, `v_t` an unroll loop over `[0, T)` and `E = H //^
/// T` (as `register-tiles` writes it; its vector cells `T*v + v_t`
/// likewise), so the points `(v, v_t)` whose cell is in range are the
/// original loop's `[0, H)`, one to one. Where `w`
/// uses `v` and `v_t` only in `v + E*v_t`, its guarded cells are the
/// original kernel's (distinct: the chain is parallel); the other unroll
/// variables are checked as [`cells_distinct`] does.
pub(super) fn guarded_cells_distinct(w: &IExpr, unrolls: &[&For], conds: &[Cond], chain: &Chain, nvars: usize) -> bool {
    let mut w = w.clone();
    let mut rest: Vec<&For> = unrolls.to_vec();
    let mut next = nvars;
    for c in conds {
        let Cond::InRange { e, lo, hi } = c else { return false };
        let IExpr::Bin(IBin::Add, a, b) = e else { return false };
        // `v + E*v_t` (cyclic), or `T*v + v_t` (one vector per thread,
        // `register-tiles`' vector cells): either way `(v, v_t)` walks
        // `[0, T*E)` one to one.
        let (v, vt, cells) = match (&**a, &**b) {
            (IExpr::Var(v), IExpr::Bin(IBin::Mul, stride, vt)) => (*v, &**vt, Some(&**stride)),
            (IExpr::Bin(IBin::Mul, t, v), vt) => match (&**t, &**v) {
                (IExpr::Const(_), IExpr::Var(v)) => (*v, vt, None),
                _ => return false,
            },
            _ => return false,
        };
        let IExpr::Var(vt) = vt else { return false };
        let vt = *vt;
        let Some(at) = rest.iter().position(|l| l.var == vt) else { return false };
        let l = rest.remove(at);
        let (Some(0), Some(t)) = (l.lo.as_const(), l.hi.as_const()) else { return false };
        let Some(ci) = chain.loops.iter().position(|x| x.0 == v) else { return false };
        let stride = IExpr::bin(IBin::CeilDiv, hi.clone(), IExpr::c(t));
        let form = match cells {
            Some(s) => *s == stride,
            None => **a == IExpr::mul(IExpr::c(t), IExpr::v(v)),
        };
        if lo.as_const() != Some(0) || !form || chain.bounds[ci] != (IExpr::c(0), stride) {
            return false;
        }
        w = replace(&w, e, &IExpr::v(next));
        next += 1;
        if w.uses(v) || w.uses(vt) {
            return false;
        }
    }
    cells_distinct(&w, &rest, next)
}

/// `e` with each occurrence of `from` replaced by `to`.
pub(super) fn replace(e: &IExpr, from: &IExpr, to: &IExpr) -> IExpr {
    if e == from {
        return to.clone();
    }
    match e {
        IExpr::Bin(op, a, b) => IExpr::bin(*op, replace(a, from, to), replace(b, from, to)),
        _ => e.clone(),
    }
}

/// Does the write offset `w` give each point of the unroll nest its own
/// cell? Checked point by point with every other variable at 0, on an
/// offset affine in the unroll variables (then it holds everywhere).
pub(super) fn cells_distinct(w: &IExpr, unrolls: &[&For], nvars: usize) -> bool {
    let lin = w.linear();
    let affine = unrolls.iter().all(|l| lin.terms.iter().all(|(a, _)| !a.uses(l.var) || *a == IExpr::v(l.var)));
    if !affine {
        return false;
    }
    let mut env = vec![0i64; nvars];
    let mut seen = std::collections::HashSet::new();
    fn go(i: usize, unrolls: &[&For], w: &IExpr, env: &mut Vec<i64>, seen: &mut std::collections::HashSet<i64>) -> bool {
        let Some(l) = unrolls.get(i) else { return seen.insert(w.eval(env)) };
        for x in l.lo.as_const().unwrap_or(0)..l.hi.as_const().unwrap_or(0) {
            env[l.var] = x;
            if !go(i + 1, unrolls, w, env, seen) {
                return false;
            }
        }
        true
    }
    go(0, unrolls, w, &mut env, &mut seen)
}
