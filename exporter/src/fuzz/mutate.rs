//! The pseudo-random source and the byte-level mutations every target
//! shares. Deterministic for a seed, so a failure is reproduced by its
//! seed and input number.

/// xorshift64* — small, fast, good enough to drive mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Byte values that tend to sit on boundaries.
const INTERESTING_U8: [u8; 9] = [0, 1, 2, 4, 6, 0x7f, 0x80, 0xfe, 0xff];
/// 16-bit values that tend to sit on boundaries (big-endian on the wire).
pub const INTERESTING_U16: [u16; 10] = [0, 1, 3, 4, 39, 40, 128, 4096, 0x7fff, 0xffff];

/// One to four byte-level mutations of `buf`, bounded by `max_len`:
/// bit flips, interesting bytes, inserts, deletes, duplicated or spliced
/// chunks (from `other`), truncation.
pub fn mutate_bytes(rng: &mut Rng, buf: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = buf.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                buf[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                buf[i] = *rng.pick(&INTERESTING_U8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                buf[i] = rng.next_u64() as u8;
            }
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let fill = rng.next_u64() as u8;
                buf.splice(at..at, std::iter::repeat_n(fill, n));
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                buf.drain(at..at + n);
            }
            5 if len > 0 => {
                let from = rng.below(len);
                let n = 1 + rng.below((len - from).min(64));
                let chunk = buf[from..from + n].to_vec();
                let at = rng.below(len + 1);
                buf.splice(at..at, chunk);
            }
            6 if !other.is_empty() => {
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(64));
                let at = rng.below(len + 1);
                buf.splice(at..at, other[from..from + n].iter().copied());
            }
            _ => buf.truncate(rng.below(len + 1)),
        }
    }
    buf.truncate(max_len);
}
