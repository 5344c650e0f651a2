//! One stack walk: stepping a sample's frames from its registers and stack
//! copy by CFI rows, framehop, frame pointers or signal frames.

use framehop::x86_64::UnwindRegsX86_64;
use framehop::{FrameAddress, Unwinder as _};

use super::rows;
use super::{
    AtSvma, Code, Outcome, Reads, Scratch, Space, Stop, UnwindStats, UserRegs, MAX_DWARF_FRAMES,
    MAX_STACK_BYTES, TRUNCATED_FRAME,
};

/// A sample's registers and the copied stack (which starts at the sampled
/// stack pointer), with the pages of it that were not in memory.
pub(super) struct Sampled<'a> {
    pub(super) regs: UserRegs,
    pub(super) stack: &'a [u8],
    /// See [`super::UserSample::holes`].
    pub(super) holes: u32,
}

/// Whether the 8 bytes at `offset` above `sp` in a copy lie in one of its
/// `holes` (bit i: the copy's page i, page 0 the one holding `sp`).
fn in_hole(holes: u32, sp: u64, offset: usize) -> bool {
    if holes == 0 {
        return false;
    }
    let first = ((sp & 0xfff) as usize).saturating_add(offset);
    [first, first.saturating_add(7)]
        .iter()
        .any(|byte| byte / 4096 < 32 && holes & (1 << (byte / 4096)) != 0)
}

/// Walks the stack of one sample into `chain`; notes what it read in
/// `reads`, when given.
pub(super) fn walk(
    space: &Space,
    scratch: &mut Scratch,
    Sampled { regs, stack, holes }: Sampled<'_>,
    chain: &mut Vec<u64>,
    stats: &mut UnwindStats,
    mut reads: Option<&mut Reads>,
) -> Outcome {
    let sp = regs.sp;
    // The copy was written by the kernel on another CPU, and each return
    // address, found from the last, would miss on its own: half of the
    // walk's time was that one load.
    super::touch_lines(stack);
    let mut needed = 0;
    let mut only_words = true;
    let mut hole_read = false;
    // Reads a stack word; `note`: the chain depends on its value (see
    // [`Reads`]). Callee-saved registers are read without noting: their
    // values only matter to a CFA in a register, and such a step is never
    // remembered; rbp is noted where a step uses it (`Frame::bp_from`).
    // So a walk depends on its return addresses and few other words, and
    // a deep one fits the collector's map.
    let read_stack = |avma: u64, note: bool| -> Result<u64, ()> {
        let offset = usize::try_from(avma.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
        // The last read decides why a walk that stops on it stopped.
        hole_read = in_hole(holes, sp, offset);
        if hole_read {
            return Err(());
        }
        let bytes = stack
            .get(offset..offset.checked_add(8).ok_or(())?)
            .ok_or(())?;
        needed = needed.max(offset + 8);
        let value = u64::from_le_bytes(bytes.try_into().map_err(|_| ())?);
        if let Some(reads) = reads.as_deref_mut().filter(|_| note) {
            reads.note(offset, value);
        }
        Ok(value)
    };
    let mut frame = Frame {
        regs: UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
        callee: regs.callee(),
        bp_from: None,
        address: FrameAddress::InstructionPointer(regs.ip),
    };
    let mut walker = Walker {
        space,
        scratch,
        stats,
        start: chain.len(),
        chain,
        read_stack,
        only_words: &mut only_words,
    };
    let end = loop {
        if let Err(end) = walker.step(&mut frame) {
            break end;
        }
    };
    if let Some(reads) = reads {
        reads.only_words &= only_words;
        if end.is_none() {
            reads.needed = needed;
        }
    }
    match end {
        None => {
            stats.count_stack_needed(needed);
            Outcome::Complete
        }
        Some(Stop::StackCopy) if hole_read => {
            chain.push(TRUNCATED_FRAME);
            Outcome::Truncated(Stop::StackUnreadable)
        }
        Some(stop) => {
            chain.push(TRUNCATED_FRAME);
            Outcome::Truncated(stop)
        }
    }
}

/// How a walk ends: None when the chain is complete (the root frame),
/// else where it stopped.
pub(super) type End = Option<Stop>;

/// The frame a walk is at: the registers framehop tracks, rbx and
/// r12-r15 as far as known, and the frame's address.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    regs: UnwindRegsX86_64,
    /// rbx, r12-r15 of the frame, as far as known.
    callee: [Option<u64>; 5],
    /// Where rbp was read from, not noted yet (None: from the sample's
    /// registers, which the collector's key holds, or noted).
    bp_from: Option<u64>,
    address: FrameAddress,
}

/// One stack walk: what it reads and writes while stepping frames (all
/// borrowed: nothing is allocated per sample).
pub(super) struct Walker<'a, R> {
    space: &'a Space,
    scratch: &'a mut Scratch,
    stats: &'a mut UnwindStats,
    chain: &'a mut Vec<u64>,
    /// Where this walk's frames start in `chain`.
    start: usize,
    /// Reads a word of the copied stack at an avma, noting it or not.
    read_stack: R,
    /// Cleared when the chain depends on more than the registers and the
    /// words read (see [`Reads`]).
    only_words: &'a mut bool,
}

impl<R: FnMut(u64, bool) -> Result<u64, ()>> Walker<'_, R> {
    /// The chain depends on `frame`'s rbp from here: the word it was read
    /// from is noted.
    fn note_bp(&mut self, frame: &mut Frame) {
        if let Some(avma) = frame.bp_from.take() {
            let _ = (self.read_stack)(avma, true);
        }
    }

    /// Writes `frame`'s address to the chain and steps to its caller.
    fn step(&mut self, frame: &mut Frame) -> Result<(), End> {
        let depth = self.chain.len() - self.start;
        if depth >= MAX_DWARF_FRAMES {
            return Err(Some(Stop::TooDeep));
        }
        // The code a signal interrupted is at its saved IP, but readers of
        // the chain (pfprof's replay, perf) look every frame after the
        // first up at the address before it, as for return addresses:
        // write IP + 1 so that they find the interrupted instruction.
        let written = match frame.address {
            FrameAddress::InstructionPointer(ip) if depth > 0 => ip + 1,
            address => address.address(),
        };
        self.chain.push(written);
        let lookup = match frame.address {
            FrameAddress::InstructionPointer(ip) => ip,
            address @ FrameAddress::ReturnAddress(_) => address.address_for_lookup(),
        };
        let first_frame = depth == 0;
        let sp_before = frame.regs.sp();
        let (code, cfi) = match self.space.locate(lookup) {
            Some(found) => found,
            None => return Err(Some(Stop::NoUnwindInfo)),
        };
        let row = match (code, cfi) {
            (Code::Entry, _) => return Err(None),
            (Code::Opaque, _) => return Err(Some(Stop::NoUnwindInfo)),
            (Code::Jit | Code::NoFde, _) => {
                return self.frame_pointer_frame(frame, code, first_frame)
            }
            (Code::Unwindable, Some((file, bias))) => {
                match self.scratch.at(file, lookup.wrapping_sub(*bias)) {
                    // Without an FDE, framehop would guess with frame pointers.
                    AtSvma::NoFde => {
                        return self.frame_pointer_frame(frame, Code::NoFde, first_frame)
                    }
                    AtSvma::Row(row) => row,
                }
            }
            (Code::Unwindable, None) => None,
        };
        let return_avma = match row {
            Some(
                row @ rows::Row {
                    cfa: rows::Cfa::Other(register, offset),
                    ..
                },
            ) => self.register_cfa_step(
                (register, i64::from(offset)),
                &row,
                frame,
                first_frame,
                sp_before,
            )?,
            Some(row) => match self.row_step(&row, frame, first_frame)? {
                Some(return_avma) => return_avma,
                None => self.framehop_step(Some(row), frame)?,
            },
            None => self.framehop_step(row, frame)?,
        };
        self.step_to_caller(frame, return_avma)
    }

    /// Steps a frame of code without CFI by frame pointers. JIT code keeps
    /// frame pointers by convention, and code without an FDE in a file
    /// with CFI is crtstuff's or `.init`'s, which set rbp up too. A leaf
    /// that has not pushed anything returns from [rsp].
    fn frame_pointer_frame(
        &mut self,
        frame: &mut Frame,
        code: Code,
        first_frame: bool,
    ) -> Result<(), End> {
        // Whether a guessed return address is code depends on the mappings
        // known then, not on the stack alone.
        *self.only_words = false;
        let leaf = code == Code::NoFde && first_frame;
        let read_stack = &mut self.read_stack;
        let caller = frame_pointer_step(self.space, &frame.regs, leaf, &mut |avma| {
            read_stack(avma, true)
        })
        .map_err(Some)?;
        if code == Code::Jit {
            self.stats.jit_frames += 1;
        } else {
            self.stats.frame_pointer_steps += 1;
        }
        *frame = Frame {
            regs: caller,
            callee: [None; 5],
            bp_from: None,
            address: FrameAddress::from_return_address(caller.ip())
                .expect("frame_pointer_step checks the return address"),
        };
        Ok(())
    }

    /// Steps a frame whose CFA is a register framehop does not track
    /// (`(register, offset)`), from the carried callee-saved registers;
    /// the return address.
    fn register_cfa_step(
        &mut self,
        (register, offset): (u16, i64),
        row: &rows::Row,
        frame: &mut Frame,
        first_frame: bool,
        sp_before: u64,
    ) -> Result<u64, End> {
        // The CFA is a register the collector's key does not hold.
        *self.only_words = false;
        let read_stack = &mut |avma| (self.read_stack)(avma, true);
        let base = rows::CALLEE_SAVED
            .iter()
            .position(|&r| r == register)
            .and_then(|i| frame.callee[i]);
        let Some(cfa) = base.and_then(|b| b.checked_add_signed(offset)) else {
            return Err(Some(Stop::NoUnwindInfo));
        };
        if !first_frame && cfa <= sp_before {
            return Err(Some(Stop::Corrupt));
        }
        let return_avma = match row.ra {
            rows::Saved::At(o) => match read_stack(cfa.wrapping_add_signed(i64::from(o))) {
                Ok(avma) => avma,
                Err(()) => return Err(Some(Stop::StackCopy)),
            },
            rows::Saved::Undefined => return Err(None),
            _ => return Err(Some(Stop::NoUnwindInfo)),
        };
        let caller_bp = match row.bp {
            rows::Saved::At(o) => read_stack(cfa.wrapping_add_signed(i64::from(o))).ok(),
            _ => None,
        }
        .unwrap_or(frame.regs.bp());
        frame.callee = restore(frame.callee, &row.callee, cfa, read_stack);
        frame.regs = UnwindRegsX86_64::new(return_avma, cfa, caller_bp);
        frame.bp_from = None;
        self.stats.register_cfa_steps += 1;
        if return_avma == 0 {
            return Err(None);
        }
        Ok(return_avma)
    }

    /// Steps a frame by its row where framehop would turn the row into
    /// one of its simple rules (the return address at CFA-8; CFA = rsp +
    /// offset, or rbp + 16 with rbp saved at CFA-16), with framehop's
    /// checks; None for other rows. The row is cached per address, where
    /// framehop's rule cache holds 509: on a busy host most steps missed
    /// it and went through gimli again.
    fn row_step(
        &mut self,
        row: &rows::Row,
        frame: &mut Frame,
        first_frame: bool,
    ) -> Result<Option<u64>, End> {
        use rows::{Cfa, Saved};
        let corrupt = Err(Some(Stop::Corrupt));
        match row.ra {
            Saved::At(-8) => {}
            Saved::Same | Saved::Undefined => return Err(None),
            _ => return Ok(None),
        }
        let (sp, ip) = (frame.regs.sp(), frame.regs.ip());
        let (new_sp, new_bp, new_bp_from) = match (row.cfa, row.bp) {
            (Cfa::Sp(offset), bp_rule) => {
                let offset = i64::from(offset);
                let Ok(by_8) = u64::try_from(offset / 8) else {
                    return Ok(None);
                };
                let Some(new_sp) = sp.checked_add(by_8 * 8) else {
                    return corrupt;
                };
                let bp = frame.regs.bp();
                let (new_bp, new_bp_from) = match bp_rule {
                    Saved::Same => (bp, frame.bp_from),
                    Saved::At(at) => {
                        let Some(location) =
                            sp.checked_add_signed((offset + i64::from(at)) / 8 * 8)
                        else {
                            return corrupt;
                        };
                        match (self.read_stack)(location, false) {
                            Ok(value) => (value, Some(location)),
                            // An epilogue's popped rbp below rsp: framehop
                            // keeps rbp, since the copy starts at rsp.
                            Err(()) if first_frame && location < sp => (bp, frame.bp_from),
                            Err(()) => return Err(Some(Stop::StackCopy)),
                        }
                    }
                    _ => return Ok(None),
                };
                (new_sp, new_bp, new_bp_from)
            }
            (Cfa::Bp(16), Saved::At(-16)) => {
                // The CFA is rbp's value: the chain depends on it.
                self.note_bp(frame);
                let bp = frame.regs.bp();
                if bp == 0 {
                    return Err(None);
                }
                let Some(new_sp) = bp.checked_add(16).filter(|&new_sp| new_sp > sp) else {
                    return corrupt;
                };
                let Ok(new_bp) = (self.read_stack)(bp, false) else {
                    return Err(Some(Stop::StackCopy));
                };
                (new_sp, new_bp, Some(bp))
            }
            _ => return Ok(None),
        };
        let Ok(return_avma) = (self.read_stack)(new_sp - 8, true) else {
            return Err(Some(Stop::StackCopy));
        };
        if return_avma == 0 {
            return Err(None);
        }
        if new_sp == sp && return_avma == ip {
            return corrupt;
        }
        frame.regs = UnwindRegsX86_64::new(return_avma, new_sp, new_bp);
        frame.bp_from = new_bp_from;
        let peek = &mut |avma| (self.read_stack)(avma, false);
        frame.callee = restore(frame.callee, &row.callee, new_sp, peek);
        Ok(Some(return_avma))
    }

    /// Steps a frame with framehop (CFI, or frame pointers where a file
    /// has none), carrying rbx and r12-r15 by the frame's row; the return
    /// address.
    fn framehop_step(&mut self, row: Option<rows::Row>, frame: &mut Frame) -> Result<u64, End> {
        // framehop's rules may use rbp, and what it reads is noted.
        self.note_bp(frame);
        let read_stack = &mut self.read_stack;
        let return_avma = match self.space.unwinder.unwind_frame(
            frame.address,
            &mut frame.regs,
            &mut self.scratch.cache,
            &mut |avma| read_stack(avma, true),
        ) {
            Ok(Some(avma)) => avma,
            Ok(None) | Err(framehop::Error::ReturnAddressIsNull) => return Err(None),
            Err(framehop::Error::CouldNotReadStack(_)) => return Err(Some(Stop::StackCopy)),
            Err(_) => return Err(Some(Stop::Corrupt)),
        };
        frame.callee = match row {
            // framehop's CFA is the caller's stack pointer.
            Some(row) => restore(frame.callee, &row.callee, frame.regs.sp(), &mut |avma| {
                (self.read_stack)(avma, false)
            }),
            None => [None; 5],
        };
        Ok(return_avma)
    }

    /// Moves `frame` to the caller that `return_avma` returns into,
    /// through a signal frame when it is the sigreturn trampoline.
    fn step_to_caller(&mut self, frame: &mut Frame, return_avma: u64) -> Result<(), End> {
        if self.space.sigreturn.contains(&return_avma) {
            // A signal handler returns to the trampoline with the stack at
            // the kernel's `ucontext`: its caller is the interrupted code.
            // Written +1 like the interrupted IP: the trampoline starts at the
            // return address, and readers look up the byte before it.
            self.chain.push(return_avma + 1);
            let ucontext_avma = frame.regs.sp();
            let (interrupted, saved) = interrupted_regs(ucontext_avma, &mut self.read_stack)
                .map_err(|()| Some(Stop::StackCopy))?;
            *frame = Frame {
                regs: interrupted,
                callee: saved,
                bp_from: Some(ucontext_avma + UCONTEXT_RBP),
                address: FrameAddress::InstructionPointer(interrupted.ip()),
            };
            return Ok(());
        }
        frame.address = FrameAddress::from_return_address(return_avma).ok_or(None)?;
        Ok(())
    }
}

/// One step by frame pointers from a frame of code without CFI: `[rbp]`
/// is the caller's rbp and `[rbp+8]` the return address; with `leaf`, a
/// return address at `[rsp]` (nothing pushed yet) is tried first. Kept
/// only if the frame lies at or above the stack pointer and the return
/// address is in executable memory; the caller's registers.
pub(super) fn frame_pointer_step(
    space: &Space,
    regs: &UnwindRegsX86_64,
    leaf: bool,
    read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Result<UnwindRegsX86_64, Stop> {
    let (sp, bp) = (regs.sp(), regs.bp());
    let returns_into_code = |avma: u64| avma > 0 && space.lookup(avma - 1).is_some();
    if leaf {
        if let Ok(avma) = read_stack(sp) {
            if returns_into_code(avma) {
                return Ok(UnwindRegsX86_64::new(avma, sp + 8, bp));
            }
        }
    }
    if bp < sp || bp % 8 != 0 {
        return Err(Stop::NoUnwindInfo);
    }
    let (Ok(caller_bp), Ok(return_avma)) = (read_stack(bp), read_stack(bp + 8)) else {
        // Within what a copy can hold, a larger one would reach it;
        // farther, rbp is no frame pointer.
        return Err(if bp - sp < u64::from(MAX_STACK_BYTES) {
            Stop::StackCopy
        } else {
            Stop::NoUnwindInfo
        });
    };
    if !returns_into_code(return_avma) {
        return Err(Stop::NoUnwindInfo);
    }
    Ok(UnwindRegsX86_64::new(return_avma, bp + 16, caller_bp))
}

/// The caller's rbx, r12-r15 by a row's rules, its CFA at `cfa`.
pub(super) fn restore(
    callee: [Option<u64>; 5],
    saved: &[rows::Saved; 5],
    cfa: u64,
    read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> [Option<u64>; 5] {
    std::array::from_fn(|i| match saved[i] {
        rows::Saved::Same => callee[i],
        rows::Saved::At(o) => read_stack(cfa.wrapping_add_signed(i64::from(o))).ok(),
        rows::Saved::Undefined | rows::Saved::Unknown => None,
    })
}

/// Offsets in the x86_64 signal frame's `ucontext` (where the stack
/// pointer points once the handler has returned to the trampoline):
/// `uc_flags`, `uc_link` and the 24-byte `uc_stack` precede the
/// `sigcontext`, whose words are r8-r15, rdi, rsi, rbp, rbx, rdx, rax,
/// rcx, rsp, rip.
pub(super) const UCONTEXT_RBP: u64 = 40 + 10 * 8;
pub(super) const UCONTEXT_RSP: u64 = 40 + 15 * 8;
pub(super) const UCONTEXT_RIP: u64 = 40 + 16 * 8;
/// rbx, r12, r13, r14, r15.
pub(super) const UCONTEXT_CALLEE: [u64; 5] =
    [40 + 11 * 8, 40 + 4 * 8, 40 + 5 * 8, 40 + 6 * 8, 40 + 7 * 8];

/// The registers the kernel saved for the code a signal interrupted:
/// rip/rsp/rbp, and rbx, r12-r15. `read_stack(avma, note)` notes rip and
/// rsp, on which the chain depends, and not the others (see [`walk`]).
pub(super) fn interrupted_regs(
    ucontext_avma: u64,
    read_stack: &mut impl FnMut(u64, bool) -> Result<u64, ()>,
) -> Result<(UnwindRegsX86_64, [Option<u64>; 5]), ()> {
    let ip = read_stack(ucontext_avma + UCONTEXT_RIP, true)?;
    let sp = read_stack(ucontext_avma + UCONTEXT_RSP, true)?;
    let bp = read_stack(ucontext_avma + UCONTEXT_RBP, false)?;
    let callee = UCONTEXT_CALLEE.map(|offset| read_stack(ucontext_avma + offset, false).ok());
    Ok((UnwindRegsX86_64::new(ip, sp, bp), callee))
}

#[cfg(test)]
mod tests {
    use super::in_hole;

    /// A word is in a hole when any of its bytes is: pages count from the
    /// one holding the stack pointer.
    #[test]
    fn words_in_holes() {
        let sp = 0x7ffc_0ff8;
        assert!(!in_hole(0, sp, 0));
        assert!(in_hole(0b1, sp, 0));
        assert!(!in_hole(0b1, sp, 8));
        assert!(in_hole(0b10, sp, 8));
        assert!(in_hole(0b10, sp, 4));
        assert!(!in_hole(0b10, sp, 8 + 4096));
        assert!(!in_hole(1 << 31, sp, usize::MAX));
    }
}
