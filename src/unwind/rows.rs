//! The CFI row of each code address, in the form the unwinder's own steps
//! need: where the caller's callee-saved registers are, and whether
//! framehop can step the frame at all.
//!
//! framehop tracks only rip, rsp and rbp. A row whose CFA is another
//! register (ld.so's lazy-binding trampolines: `CFA=rbx+32` in
//! `_dl_runtime_resolve_xsavec`) makes it fall back to frame pointers
//! without saying so. The unwinder steps such frames itself, with rbx and
//! r12-r15 carried from the sampled registers through every frame by the
//! rules computed here. Each row is computed once per (file, svma).

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, Register,
    RegisterRule, UnwindContext, UnwindSection, UnwindTableRow,
};

/// DWARF register numbers on x86_64.
const RSP: u16 = 7;
const RBP: u16 = 6;
const RA: u16 = 16;

/// The callee-saved registers carried besides rbp, in their DWARF
/// numbers: rbx, r12, r13, r14, r15.
pub(crate) const CALLEE_SAVED: [u16; 5] = [3, 12, 13, 14, 15];

/// Where the caller's value of a register is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saved {
    /// Unchanged (no rule, or `SameValue`).
    Same,
    /// In the stack at CFA + offset (16 bits: a rule further from the
    /// CFA is [`Saved::Unknown`]; the cache holds a row per address met,
    /// 36 bytes where 64-bit offsets made it 128).
    At(i16),
    /// Not recoverable (`Undefined`; for the return address: the root).
    Undefined,
    /// A rule this unwinder does not evaluate (expressions, other
    /// registers).
    Unknown,
}

/// How a row computes the CFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cfa {
    /// rsp + offset.
    Sp(i32),
    /// rbp + offset.
    Bp(i32),
    /// Another register + offset: framehop cannot step this frame and the
    /// unwinder steps it itself.
    Other(u16, i32),
    /// A DWARF expression (in practice the PLT's, which reads rsp and rip
    /// only), or an offset past 32 bits: framehop evaluates it.
    Expression,
}

/// One CFI row, reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) cfa: Cfa,
    /// The return address.
    pub(crate) ra: Saved,
    /// rbp.
    pub(crate) bp: Saved,
    /// rbx, r12-r15 ([`CALLEE_SAVED`]).
    pub(crate) callee: [Saved; 5],
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The sections of one file the rows come from, with their svmas.
pub(crate) struct Sections<'a> {
    pub(crate) eh_frame: Option<(&'a [u8], u64)>,
    pub(crate) eh_frame_hdr: Option<(&'a [u8], u64)>,
    pub(crate) debug_frame: Option<&'a [u8]>,
    pub(crate) text_svma: Option<u64>,
    pub(crate) got_svma: Option<u64>,
}

/// What a file's CFI says at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtSvma {
    /// `.eh_frame` has no FDE that covers it (`.init`, crtstuff's code).
    NoFde,
    /// Its reduced row (None: the CFI does not parse there).
    Row(Option<Row>),
}

/// What the CFI says at `svma`. The FDE is found as the unwinder finds it
/// (`.eh_frame_hdr`'s table), so that loading a file never walks all of
/// its FDEs: libLLVM's 100,000 took 16-47 ms, a stall of the drain.
pub(crate) fn row_at(sections: &Sections<'_>, svma: u64, ctx: &mut UnwindContext<usize>) -> AtSvma {
    eh_frame_row(sections, svma, ctx)
        .unwrap_or_else(|| AtSvma::Row(debug_frame_row(sections, svma, ctx)))
}

/// What `.eh_frame` says at `svma`; None when the file has none.
fn eh_frame_row(
    sections: &Sections<'_>,
    svma: u64,
    ctx: &mut UnwindContext<usize>,
) -> Option<AtSvma> {
    let (data, eh_svma) = sections.eh_frame?;
    let mut bases = BaseAddresses::default().set_eh_frame(eh_svma);
    if let Some(text) = sections.text_svma {
        bases = bases.set_text(text);
    }
    if let Some(got) = sections.got_svma {
        bases = bases.set_got(got);
    }
    let eh_frame = EhFrame::new(data, LittleEndian);
    // The table's pointers are relative to `.eh_frame_hdr`.
    let table = match sections.eh_frame_hdr {
        Some((hdr_data, hdr_svma)) => {
            bases = bases.set_eh_frame_hdr(hdr_svma);
            match EhFrameHdr::new(hdr_data, LittleEndian).parse(&bases, 8) {
                Ok(hdr) => Some(hdr),
                Err(_) => return Some(AtSvma::Row(None)),
            }
        }
        None => None,
    };
    let found = match table.as_ref().and_then(|hdr| hdr.table()) {
        Some(table) => table.fde_for_address(&eh_frame, &bases, svma, EhFrame::cie_from_offset),
        None => eh_frame.fde_for_address(&bases, svma, EhFrame::cie_from_offset),
    };
    let fde = match found {
        Ok(fde) => fde,
        // Only the lookup's miss says no FDE covers it.
        Err(gimli::Error::NoUnwindInfoForAddress) => return Some(AtSvma::NoFde),
        Err(_) => return Some(AtSvma::Row(None)),
    };
    let row = fde.unwind_info_for_address(&eh_frame, &bases, ctx, svma);
    Some(AtSvma::Row(row.ok().map(reduce)))
}

/// The row from `.debug_frame`, used when there is no `.eh_frame`: None
/// when no FDE covers `svma` or it does not parse (without the index
/// `.eh_frame_hdr` gives, a miss is not told from a gap).
fn debug_frame_row(
    sections: &Sections<'_>,
    svma: u64,
    ctx: &mut UnwindContext<usize>,
) -> Option<Row> {
    let data = sections.debug_frame?;
    let mut debug_frame: DebugFrame<Slice<'_>> = DebugFrame::new(data, LittleEndian);
    debug_frame.set_address_size(8);
    let bases = BaseAddresses::default();
    let fde = debug_frame
        .fde_for_address(&bases, svma, DebugFrame::cie_from_offset)
        .ok()?;
    let row = fde
        .unwind_info_for_address(&debug_frame, &bases, ctx, svma)
        .ok()?;
    Some(reduce(row))
}

fn saved<T: gimli::ReaderOffset>(rule: Option<RegisterRule<T>>) -> Saved {
    match rule {
        None | Some(RegisterRule::SameValue) => Saved::Same,
        Some(RegisterRule::Offset(offset)) => {
            i16::try_from(offset).map_or(Saved::Unknown, Saved::At)
        }
        Some(RegisterRule::Undefined) => Saved::Undefined,
        Some(_) => Saved::Unknown,
    }
}

fn reduce<T: gimli::ReaderOffset, S: gimli::UnwindContextStorage<T>>(
    row: &UnwindTableRow<T, S>,
) -> Row {
    let cfa = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            match (register.0, i32::try_from(offset)) {
                (RSP, Ok(offset)) => Cfa::Sp(offset),
                (RBP, Ok(offset)) => Cfa::Bp(offset),
                (other, Ok(offset)) => Cfa::Other(other, offset),
                // A frame of 2 GiB: no rule this unwinder takes.
                (_, Err(_)) => Cfa::Expression,
            }
        }
        CfaRule::Expression(_) => Cfa::Expression,
    };
    Row {
        cfa,
        ra: saved(row.register(Register(RA))),
        bp: saved(row.register(Register(RBP))),
        callee: CALLEE_SAVED.map(|r| saved(row.register(Register(r)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CIE (code align 1, data align -8, RA = r16, CFA = rsp+8, RA at
    /// CFA-8) and one FDE over 0x1000..0x1100 with the given instructions,
    /// as `.debug_frame` (absolute addresses, no augmentation).
    fn debug_frame(fde_instructions: &[u8]) -> Vec<u8> {
        let mut cie = vec![];
        cie.extend_from_slice(&0xffff_ffffu32.to_le_bytes()); // CIE id
        cie.push(4); // version
        cie.push(0); // augmentation ""
        cie.push(8); // address size
        cie.push(0); // segment selector size
        cie.push(1); // code alignment
        cie.push(0x78); // data alignment -8 (sleb)
        cie.push(16); // return address register
        cie.extend_from_slice(&[0x0c, 7, 8]); // def_cfa rsp+8
        cie.extend_from_slice(&[0x90, 1]); // offset r16 at cfa-8
        while (cie.len() + 4) % 8 != 0 {
            cie.push(0); // nop
        }
        let mut out = vec![];
        out.extend_from_slice(&(cie.len() as u32).to_le_bytes());
        out.extend_from_slice(&cie);
        let mut fde = vec![];
        fde.extend_from_slice(&0u32.to_le_bytes()); // CIE pointer
        fde.extend_from_slice(&0x1000u64.to_le_bytes());
        fde.extend_from_slice(&0x100u64.to_le_bytes());
        fde.extend_from_slice(fde_instructions);
        while (fde.len() + 4) % 8 != 0 {
            fde.push(0);
        }
        out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
        out.extend_from_slice(&fde);
        out
    }

    /// A cached row is small: the cache holds one per address met (a
    /// busy host's drain looks one up per frame).
    #[test]
    fn a_row_takes_36_bytes() {
        assert_eq!(std::mem::size_of::<AtSvma>(), 36);
    }

    /// A register saved further from the CFA than 16 bits reach is a rule
    /// the unwinder does not evaluate (framehop steps the frame), never a
    /// truncated offset.
    #[test]
    fn far_rules_are_unknown() {
        let rule = |offset: i64| saved::<usize>(Some(RegisterRule::Offset(offset)));
        assert_eq!(rule(-16), Saved::At(-16));
        assert_eq!(rule(i64::from(i16::MIN)), Saved::At(i16::MIN));
        assert_eq!(rule(40_000), Saved::Unknown);
        assert_eq!(rule(-(1 << 33)), Saved::Unknown);
    }

    #[test]
    fn rows_name_what_framehop_cannot_step() {
        // _dl_runtime_resolve_xsavec's rows: push rbx; mov rsp,rbx;
        // def_cfa_register rbx.
        let trampoline = [
            0x41, // advance 1
            0x0e, 16, // def_cfa_offset 16
            0x83, 2,    // offset rbx at cfa-16
            0x43, // advance 3
            0x0d, 3, // def_cfa_register rbx
        ];
        let frame = debug_frame(&trampoline);
        let sections = Sections {
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: Some(&frame),
            text_svma: None,
            got_svma: None,
        };
        let mut ctx = UnwindContext::new();
        let entry = Row {
            cfa: Cfa::Sp(8),
            ra: Saved::At(-8),
            bp: Saved::Same,
            callee: [Saved::Same; 5],
        };
        let pushed = Row {
            callee: [
                Saved::At(-16),
                Saved::Same,
                Saved::Same,
                Saved::Same,
                Saved::Same,
            ],
            cfa: Cfa::Sp(16),
            ..entry
        };
        let rbx_based = Row {
            cfa: Cfa::Other(3, 16),
            ..pushed
        };
        for (svma, want) in [
            (0x1000, Some(entry)),
            (0x1001, Some(pushed)),
            (0x1004, Some(rbx_based)),
            (0x10ff, Some(rbx_based)),
        ] {
            assert_eq!(
                row_at(&sections, svma, &mut ctx),
                AtSvma::Row(want),
                "{svma:#x}"
            );
        }
        // `.debug_frame` has no index: a miss is no row, not a gap.
        for svma in [0x1100, 0xfff] {
            assert_eq!(
                row_at(&sections, svma, &mut ctx),
                AtSvma::Row(None),
                "{svma:#x}"
            );
        }
    }
}
