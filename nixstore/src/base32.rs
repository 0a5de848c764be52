//! Nix's base-32: its own alphabet (no e, o, u, t), least significant
//! bits last, as store path hashes and `sha256:` NAR hashes are written.

const ALPHABET: &[u8; 32] = b"0123456789abcdfghijklmnpqrsvwxyz";

/// The characters `bytes` take.
pub fn encoded_len(bytes: usize) -> usize {
    (bytes * 8).div_ceil(5)
}

pub fn encode(bytes: &[u8]) -> String {
    let len = encoded_len(bytes.len());
    (0..len)
        .rev()
        .map(|n| {
            let (i, j) = (n * 5 / 8, n * 5 % 8);
            let lo = (bytes[i] as u16) >> j;
            let hi = bytes.get(i + 1).map_or(0, |b| (*b as u16) << (8 - j));
            ALPHABET[((lo | hi) & 0x1f) as usize] as char
        })
        .collect()
}

/// The `size` bytes `s` encodes; None when it is not that long, has a
/// character outside the alphabet, or sets bits past the end.
pub fn decode(s: &str, size: usize) -> Option<Vec<u8>> {
    if s.len() != encoded_len(size) {
        return None;
    }
    let mut out = vec![0u8; size];
    for (n, c) in s.bytes().rev().enumerate() {
        let digit = ALPHABET.iter().position(|a| *a == c)? as u16;
        let (i, j) = (n * 5 / 8, n * 5 % 8);
        let v = digit << j;
        out[i] |= v as u8;
        let carry = (v >> 8) as u8;
        match out.get_mut(i + 1) {
            Some(b) => *b |= carry,
            None if carry != 0 => return None,
            None => {}
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_knows_nix_values() {
        // sha256 of the empty string, as `nix hash to-base32` gives it.
        let empty = [
            0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f,
            0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b,
            0x78, 0x52, 0xb8, 0x55,
        ];
        let s = encode(&empty);
        assert_eq!(s, "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73");
        assert_eq!(decode(&s, 32).unwrap(), empty);
        for len in [0usize, 1, 5, 20, 32] {
            let bytes: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            assert_eq!(decode(&encode(&bytes), len).unwrap(), bytes);
        }
        assert!(decode("e", 1).is_none());
        assert!(decode("zz", 1).is_none(), "bits past the end");
    }
}
