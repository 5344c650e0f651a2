//! ELF notes outside an ELF file: the kernel publishes its own as a bare
//! run of notes (`/sys/kernel/notes`). Read with `object`'s note iterator,
//! the one that gives ELF files their build-ids ([`crate::read_build_id`]),
//! so every build-id pfprof knows is found the same way.

use object::elf::{FileHeader64, ELF_NOTE_GNU, NT_GNU_BUILD_ID};
use object::read::elf::NoteIterator;
use object::NativeEndian;

/// The GNU build-id in a run of ELF notes (`/sys/kernel/notes`): u32 name
/// size, u32 descriptor size, u32 type, then the name and the descriptor,
/// each padded to 4 bytes. Every size is checked against `notes`: a cut or
/// lying note ends the search. `None` without one, or when it is empty.
pub fn gnu_build_id_in_notes(notes: &[u8]) -> Option<Vec<u8>> {
    // The note header is three 32-bit words in ELF64 too.
    let mut iter = NoteIterator::<FileHeader64<NativeEndian>>::new(NativeEndian, 4, notes).ok()?;
    while let Ok(Some(note)) = iter.next() {
        if note.name() == ELF_NOTE_GNU && note.n_type(NativeEndian) == NT_GNU_BUILD_ID {
            return Some(note.desc().to_vec()).filter(|id| !id.is_empty());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One note: sizes, type, then name and descriptor padded to 4 bytes.
    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        out.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    /// The build-id after other notes (another owner's, a GNU note of
    /// another type); cut, truncated and lying notes give None, never a
    /// panic or a read past the end.
    #[test]
    fn build_id_among_notes() {
        let id = [0x4a, 0x5a, 0x9b, 0x0a, 0xff];
        let notes = [
            note(b"Xen\0", 3, &[9; 5]),
            note(b"GNU\0", 1, &[8; 4]),
            note(b"GNU\0", 3, &id),
        ]
        .concat();
        assert_eq!(gnu_build_id_in_notes(&notes), Some(id.to_vec()));
        // Every cut inside the build-id's note, down to nothing.
        let last = notes.len() - note(b"GNU\0", 3, &id).len();
        for cut in 0..notes.len() - 3 {
            assert_eq!(gnu_build_id_in_notes(&notes[..cut]), None, "cut at {cut}");
        }
        // The padding after the last descriptor may be missing.
        assert_eq!(
            gnu_build_id_in_notes(&notes[..last + 12 + 4 + id.len()]),
            Some(id.to_vec())
        );
        let mut lying = note(b"GNU\0", 3, &id);
        lying[4..8].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(
            gnu_build_id_in_notes(&lying),
            None,
            "descriptor past the end"
        );
        // Sizes near u32::MAX: no overflow on 64 or 32 bits.
        for (name_size, desc_size) in [(u32::MAX, 0), (0, u32::MAX), (u32::MAX - 2, u32::MAX)] {
            let mut huge = note(b"GNU\0", 3, &id);
            huge[..4].copy_from_slice(&name_size.to_ne_bytes());
            huge[4..8].copy_from_slice(&desc_size.to_ne_bytes());
            assert_eq!(
                gnu_build_id_in_notes(&huge),
                None,
                "{name_size} {desc_size}"
            );
        }
        assert_eq!(
            gnu_build_id_in_notes(&note(b"GNU\0", 3, &[])),
            None,
            "empty id"
        );
        assert_eq!(gnu_build_id_in_notes(&note(b"GNU\0", 1, &id)), None);
        // At an odd address too (the header is read unaligned).
        let shifted = [&[0u8][..], &notes].concat();
        assert_eq!(gnu_build_id_in_notes(&shifted[1..]), Some(id.to_vec()));
    }
}
