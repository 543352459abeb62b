//! gzip for answers, built for speed over ratio: one deflate block of the fixed Huffman codes
//! (RFC 1951 §3.2.6), greedy matches of 4 bytes or more found through a small hash table kept per
//! thread.
//!
//! Why not a general deflate: a 16 KB list page takes zlib-rs about 28 µs at level 1, more than
//! the whole rest of the request, because a general encoder sets up its tables for every stream
//! (a 64 K-entry hash head cleared, window and lookahead buffers allocated) and checks more
//! candidates. Answers are small and compressed once, so here the table lives with the thread and
//! is never cleared: each call takes positions above the last call's, and an entry below them is
//! simply stale. On the same page this writes about as many bytes (JSON repeats whole keys and
//! values, which the fixed codes carry well) in a third to half the time (`benches/README.md`,
//! "gzip written by the server").

use std::cell::RefCell;

/// Deflate's reach back: a match may start at most this far behind.
const WINDOW: usize = 32 * 1024;
/// The shortest match taken: with the fixed codes a 3-byte match costs about as much as its three
/// literals.
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
/// 16 K entries of 4 bytes: fits the core's second-level cache beside the answer.
const HASH_BITS: u32 = 14;
/// Positions are `u32` offsets above the table's base; an input longer than this is taken in
/// segments of this size, each matching within itself (far larger than any answer).
const SEGMENT: usize = 1 << 30;

const LEN_BASE: [u16; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193,
    12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

/// A code as it goes into the bit stream: deflate sends Huffman codes from their first bit, and
/// the stream is filled from the low bit, so each code is stored reversed.
#[derive(Clone, Copy)]
struct Code {
    bits: u32,
    len: u32,
}

/// The fixed literal/length code of `symbol` (0..=287).
const fn fixed_literal(symbol: u16) -> Code {
    let (code, len) = match symbol {
        0..=143 => (0x30 + symbol, 8),
        144..=255 => (0x190 + (symbol - 144), 9),
        256..=279 => (symbol - 256, 7),
        _ => (0xC0 + (symbol - 280), 8),
    };
    Code { bits: (code.reverse_bits() >> (16 - len)) as u32, len }
}

/// Every literal byte's code.
const LITERALS: [Code; 256] = {
    let mut table = [Code { bits: 0, len: 0 }; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = fixed_literal(b as u16);
        b += 1;
    }
    table
};

const END_OF_BLOCK: Code = fixed_literal(256);

/// Every match length's symbol code followed by its extra bits, one value to send.
const LENGTHS: [Code; MAX_MATCH + 1] = {
    let mut table = [Code { bits: 0, len: 0 }; MAX_MATCH + 1];
    let mut len = 3;
    let mut sym = 0;
    while len <= MAX_MATCH {
        while sym + 1 < LEN_BASE.len() && LEN_BASE[sym + 1] as usize <= len {
            sym += 1;
        }
        let code = fixed_literal(257 + sym as u16);
        let extra = (len - LEN_BASE[sym] as usize) as u32;
        table[len] = Code { bits: code.bits | extra << code.len, len: code.len + LEN_EXTRA[sym] as u32 };
        len += 1;
    }
    table
};

/// The distance symbol of `d` (1..=32768): two per power of two past 4.
fn distance_symbol(d: usize) -> usize {
    if d <= 4 {
        return d - 1;
    }
    let d1 = (d - 1) as u32;
    let top = 31 - d1.leading_zeros();
    (2 * top + ((d1 >> (top - 1)) & 1)) as usize
}

/// The distance's 5-bit fixed code followed by its extra bits.
fn distance(d: usize) -> Code {
    let sym = distance_symbol(d);
    let code = (sym as u8).reverse_bits() >> 3;
    let extra = (d - DIST_BASE[sym] as usize) as u32;
    Code { bits: code as u32 | extra << 5, len: 5 + DIST_EXTRA[sym] as u32 }
}

/// The bit stream, low bit first; whole 32-bit words go out as they fill.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    /// At most 32 bits a call (a length with its extras and a distance with its extras are
    /// sent as two calls): `acc` never holds more than 63.
    #[inline(always)]
    fn put(&mut self, code: Code) {
        self.acc |= (code.bits as u64) << self.n;
        self.n += code.len;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
        self.out
    }
}

/// The last position seen for each hash of 4 bytes, as `base + offset`; entries below `base`
/// belong to earlier calls.
struct Table {
    heads: Box<[u32; 1 << HASH_BITS]>,
    base: u32,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table { heads: Box::new([0; 1 << HASH_BITS]), base: 1 });
}

impl Table {
    /// A base for `len` more positions, clearing the table when the positions would run out.
    /// Every entry an earlier call left is below it, so `deflate` tells them apart by the base
    /// alone.
    fn take(&mut self, len: usize) -> u32 {
        let room = len + 1;
        if (u32::MAX - self.base) as usize <= room {
            self.heads.fill(0);
            self.base = 1;
        }
        let base = self.base;
        self.base += room as u32;
        base
    }
}

#[inline(always)]
fn read4(b: &[u8], i: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(w)
}

#[inline(always)]
fn read8(b: &[u8], i: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// How many bytes `a` and `b` share from their start, up to `max` (both at least that long).
fn common(a: &[u8], b: &[u8], max: usize) -> usize {
    let mut n = 0;
    while n + 8 <= max {
        let x = read8(a, n) ^ read8(b, n);
        if x != 0 {
            return n + (x.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < max && a[n] == b[n] {
        n += 1;
    }
    n
}

/// Literals and matches of `segment` into `bits`.
fn deflate(segment: &[u8], table: &mut Table, bits: &mut Bits) {
    let n = segment.len();
    let base = table.take(n);
    let heads = &mut table.heads;
    let mut i = 0;
    while i + MIN_MATCH <= n {
        let v = read4(segment, i);
        let h = hash(v);
        let candidate = heads[h];
        heads[h] = base + i as u32;
        if candidate >= base {
            let j = (candidate - base) as usize;
            if i - j <= WINDOW && read4(segment, j) == v {
                let max = (n - i).min(MAX_MATCH);
                let len = MIN_MATCH + common(&segment[j + MIN_MATCH..], &segment[i + MIN_MATCH..], max - MIN_MATCH);
                bits.put(LENGTHS[len]);
                bits.put(distance(i - j));
                // The match's last position goes in too: the next repeat often starts there.
                let last = i + len - 1;
                if last + MIN_MATCH <= n {
                    heads[hash(read4(segment, last))] = base + last as u32;
                }
                i += len;
                continue;
            }
        }
        bits.put(LITERALS[segment[i] as usize]);
        i += 1;
    }
    for &b in &segment[i..] {
        bits.put(LITERALS[b as usize]);
    }
}

/// `input` as a gzip member (RFC 1952).
pub fn encode(input: &[u8]) -> Vec<u8> {
    let mut bits = Bits { out: Vec::with_capacity(input.len() / 4 + 64), acc: 0, n: 0 };
    // No name, no time; XFL 4 says "fastest"; OS 255 unknown.
    bits.out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255]);
    // One final block of the fixed codes: BFINAL = 1, BTYPE = 01.
    bits.put(Code { bits: 0b011, len: 3 });
    TABLE.with_borrow_mut(|table| {
        for segment in input.chunks(SEGMENT) {
            deflate(segment, table, &mut bits);
        }
    });
    bits.put(END_OF_BLOCK);
    let mut out = bits.finish();
    let mut crc = crc32fast::Hasher::new();
    crc.update(input);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE is the length modulo 2^32.
    out.extend_from_slice(&(input.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use proptest::prelude::*;

    use super::*;

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(gz).read_to_end(&mut back).expect("a valid gzip member");
        back
    }

    #[test]
    fn distance_symbols_match_their_bases() {
        for d in 1..=WINDOW {
            let sym = distance_symbol(d);
            let base = DIST_BASE[sym] as usize;
            assert!(base <= d && d < base + (1 << DIST_EXTRA[sym]), "distance {d} got symbol {sym}");
        }
    }

    #[test]
    fn short_empty_and_long_inputs_round_trip() {
        let page = serde_json::json!({"data": (0..400).map(|i| serde_json::json!({
            "id": format!("01a221ec-3476-74d6-9911-{i:012}"), "title": format!("Product {i}"),
            "price": {"amount": i * 7919 % 99_900, "currency": "USD"}})).collect::<Vec<_>>()})
        .to_string();
        let runs = vec![b'a'; 100_000];
        let cases: [&[u8]; 7] = [b"", b"a", b"ab", b"abc", b"abcd", page.as_bytes(), &runs];
        for input in cases {
            let gz = encode(input);
            assert_eq!(gunzip(&gz), input);
        }
        assert!(encode(page.as_bytes()).len() * 5 < page.len(), "a page of products compresses to under a fifth");
        assert!(encode(&runs).len() < 1_000, "a run is a chain of longest matches");
    }

    #[test]
    fn matches_reach_the_whole_window_and_no_further() {
        // Noise, a run of one byte, and the noise again starting exactly the window's distance
        // after it (then one byte further): the run fills one hash slot, so the noise's stay.
        let mut x: u32 = 7;
        let noise: Vec<u8> = (0..1_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) as u8
            })
            .collect();
        for gap in [0, 1] {
            let mut input = noise.clone();
            input.resize(WINDOW + gap, b'z');
            input.extend_from_slice(&noise);
            let gz = encode(&input);
            assert_eq!(gunzip(&gz), input);
            let second = gz.len() - encode(&input[..WINDOW + gap]).len();
            if gap == 0 {
                assert!(second < 100, "the repeat is found 32 KiB back: {second} bytes");
            } else {
                assert!(second > 900, "nothing is taken from beyond the window: {second} bytes");
            }
        }
    }

    #[test]
    fn positions_running_out_clear_the_table() {
        let text = b"the same words, the same words, again and again".repeat(50);
        TABLE.with_borrow_mut(|t| t.base = u32::MAX - 10);
        let gz = encode(&text);
        assert_eq!(gunzip(&gz), text);
        assert!(TABLE.with_borrow(|t| t.base) < 1 << 20, "the base started again from the bottom");
        assert_eq!(gunzip(&encode(&text)), text);
    }

    proptest! {
        #[test]
        fn any_bytes_round_trip(input in proptest::collection::vec(any::<u8>(), 0..5_000)) {
            prop_assert_eq!(gunzip(&encode(&input)), input);
        }

        #[test]
        fn repetitive_bytes_round_trip(
            words in proptest::collection::vec(proptest::collection::vec(0u8..4, 1..12), 1..40),
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..3_000),
        ) {
            let input: Vec<u8> = picks.iter().flat_map(|p| p.get(&words).clone()).collect();
            let gz = encode(&input);
            prop_assert_eq!(gunzip(&gz), input);
        }
    }
}
