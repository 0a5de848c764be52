//! Thread-local storage of an executable: where its `PT_TLS` block lies
//! below a thread's pointer (x86-64's variant II, as glibc and musl lay out
//! the executable's block: it ends at the thread pointer, its start aligned
//! as the segment's address is), and where `errno` is (glibc: its `errno`
//! thread-local symbol; musl: `__errno_location`, which returns the thread
//! pointer plus a constant).
//!
//! DWARF names a thread-local variable by its offset in the block
//! (`DW_OP_form_tls_address`); [`Tls::address`] turns that and the thread's
//! `fs_base` into the address, as the executable's own code computes it.

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// An executable's thread-local layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tls {
    /// How far below the thread pointer the block starts, when it has one.
    below: Option<u64>,
    /// errno's address relative to the thread pointer, when known.
    errno: Option<i64>,
}

impl Tls {
    /// The layout of the ELF file `bytes` (nothing for one without `PT_TLS`
    /// or not ELF64).
    pub(crate) fn of(file: &object::File, bytes: &[u8]) -> Tls {
        let below = ElfFile64::<object::Endianness>::parse(bytes)
            .ok()
            .and_then(|elf| {
                let e = elf.endian();
                let tls = elf
                    .elf_program_headers()
                    .iter()
                    .find(|p| p.p_type(e) == object::elf::PT_TLS)?;
                Some(block_below(tls.p_vaddr(e), tls.p_memsz(e), tls.p_align(e)))
            });
        let errno_symbol = file
            .symbols()
            .find(|s| s.kind() == SymbolKind::Tls && s.name() == Ok("errno"))
            .and_then(|s| Some(s.address() as i64 - below? as i64));
        let errno = errno_symbol.or_else(|| {
            let f = file
                .symbols()
                .find(|s| s.kind() == SymbolKind::Text && s.name() == Ok("__errno_location"))?;
            let code = file.sections().find_map(|s| {
                let (a, n) = (s.address(), s.size());
                (a <= f.address() && f.address() < a + n)
                    .then(|| s.data_range(f.address(), 16).ok().flatten())
                    .flatten()
            })?;
            thread_pointer_plus(code)
        });
        Tls { below, errno }
    }

    /// The address of `offset` in the block of the thread whose pointer
    /// (`fs_base`) is `tp`.
    pub fn address(&self, tp: u64, offset: u64) -> Option<u64> {
        Some(tp.wrapping_sub(self.below?).wrapping_add(offset))
    }

    /// The address of errno in the thread whose pointer is `tp`.
    pub fn errno(&self, tp: u64) -> Option<u64> {
        Some(tp.wrapping_add_signed(self.errno?))
    }
}

/// How far below the thread pointer a block of `memsz` bytes aligned to
/// `align` starts, when its image is at `vaddr`: the size rounded up so
/// that the start is congruent to the image's address modulo the alignment
/// (musl's `static_init_tls`; glibc's `_dl_determine_tlsoffset` gives the
/// same).
fn block_below(vaddr: u64, memsz: u64, align: u64) -> u64 {
    let align = align.max(1);
    memsz.wrapping_add(memsz.wrapping_neg().wrapping_sub(vaddr) & (align - 1))
}

/// `mov rax, fs:[0]; add rax, imm; ret` (musl's `__errno_location`) or
/// `mov rax, imm; add rax, fs:[0]; ret`: the constant added to the thread
/// pointer.
fn thread_pointer_plus(code: &[u8]) -> Option<i64> {
    const LOAD_TP: [u8; 9] = [0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0];
    const ADD_TP: [u8; 9] = [0x64, 0x48, 0x03, 0x04, 0x25, 0, 0, 0, 0];
    let imm32 = |b: &[u8]| Some(i64::from(i32::from_le_bytes(b.get(..4)?.try_into().ok()?)));
    if let Some(rest) = code.strip_prefix(&LOAD_TP[..]) {
        return match rest {
            [0x48, 0x83, 0xc0, n, 0xc3, ..] => Some(i64::from(*n as i8)),
            [0x48, 0x05, tail @ ..] if tail.get(4) == Some(&0xc3) => imm32(tail),
            _ => None,
        };
    }
    if let [0x48, 0xc7, 0xc0, tail @ ..] = code {
        let n = imm32(tail)?;
        return (tail.get(4..13) == Some(&ADD_TP[..]) && tail.get(13) == Some(&0xc3)).then_some(n);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_ends_at_the_thread_pointer() {
        // stepper's PT_TLS: 0x70 bytes aligned to 8 at 0x4b56b0.
        assert_eq!(block_below(0x4b56b0, 0x70, 8), 0x70);
        assert_eq!(block_below(0x1000, 0x14, 16), 0x20);
        // An image not aligned as the segment says keeps its misalignment.
        assert_eq!(block_below(0x1004, 0x10, 16), 0x1c);
        assert_eq!(block_below(0x1000, 0, 0), 0);
    }

    #[test]
    fn errno_location_code_is_read() {
        let musl = [
            0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0x48, 0x83, 0xc0, 0x34, 0xc3,
        ];
        assert_eq!(thread_pointer_plus(&musl), Some(0x34));
        let glibc = [
            0x48, 0xc7, 0xc0, 0xb0, 0xff, 0xff, 0xff, 0x64, 0x48, 0x03, 0x04, 0x25, 0, 0, 0, 0,
            0xc3,
        ];
        assert_eq!(thread_pointer_plus(&glibc), Some(-0x50));
        assert_eq!(thread_pointer_plus(&[0xc3]), None);
        assert_eq!(thread_pointer_plus(&musl[..12]), None);
    }
}
