//! A block: about [`crate::backup::CHUNK_BYTES`] of one database's rows, table after table in
//! key order, as they travel from the service and as a backup file keeps them (backup format 2;
//! `data-format/README.md`, "Backups").
//!
//! Rows are laid out flat (each row copied once, from redb's own bytes) and the block is
//! compressed with LZ4: the rows are bincode records and UUID-keyed index rows whose repeats
//! (store ids, field layouts, currency codes) LZ4 finds at a few hundred MB/s a core, so the
//! service, the wire and the caller's disk each carry a fraction of the bytes for little CPU.
//! A stronger codec (zstd) would shrink them further but costs the service's CPU, which it
//! shares with the writers a backup must not slow.
//!
//! Layout before compression, little-endian: sections of `name length: u16, name, rows: u32`
//! then `rows × (key length: u32, key, value length: u32, value)`. Compressed: `raw length:
//! u32`, then the LZ4 block.

use crate::storage::copy::RowSink;

/// A decompressed block is never larger than this: a length above it is damage, refused before
/// anything is allocated for it.
const MAX_RAW: usize = 256 << 20;

/// Nor is a compressed one larger than this (LZ4's worst case of `MAX_RAW`, and the header).
pub const MAX_COMPRESSED: usize = 4 + lz4_flex::block::get_maximum_output_size(MAX_RAW);

/// Rows being laid out into a block.
#[derive(Default)]
pub struct Builder {
    raw: Vec<u8>,
    /// Where the open section's row count lies, and its rows so far.
    open: Option<(usize, u32)>,
    /// Rows of each table in the block.
    tables: Vec<(String, u64)>,
}

/// A finished block: its compressed bytes and the rows of each table in it.
pub struct Block {
    pub bytes: Vec<u8>,
    pub tables: Vec<(String, u64)>,
}

/// The buffers one reader lays out and compresses block after block in: kept from block to
/// block, so a chunk's megabytes are not fresh memory the kernel zeroes each time.
#[derive(Default)]
pub struct Buffers {
    raw: Vec<u8>,
    compressed: Vec<u8>,
}

impl Builder {
    pub fn with_capacity(bytes: usize) -> Builder {
        Builder { raw: Vec::with_capacity(bytes), ..Builder::default() }
    }

    /// A builder laying out rows in `buffers`' row buffer, emptied (its capacity kept).
    pub fn in_buffers(buffers: &mut Buffers, bytes: usize) -> Builder {
        let mut raw = std::mem::take(&mut buffers.raw);
        raw.clear();
        raw.reserve(bytes);
        Builder { raw, ..Builder::default() }
    }

    /// Starts the rows of table `name`; a section left empty is dropped again.
    pub fn table(&mut self, name: &str) {
        self.close();
        self.raw.extend_from_slice(&(name.len() as u16).to_le_bytes());
        self.raw.extend_from_slice(name.as_bytes());
        self.open = Some((self.raw.len(), 0));
        self.raw.extend_from_slice(&0u32.to_le_bytes());
        self.tables.push((name.to_string(), 0));
    }

    /// Row bytes laid out so far.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    fn close(&mut self) {
        if let Some((at, rows)) = self.open.take() {
            if rows == 0 {
                let name_len = self.tables.last().map(|(n, _)| n.len()).unwrap_or(0);
                self.raw.truncate(at - name_len - 2);
                self.tables.pop();
            } else {
                self.raw[at..at + 4].copy_from_slice(&rows.to_le_bytes());
                if let Some(t) = self.tables.last_mut() {
                    t.1 = u64::from(rows);
                }
            }
        }
    }

    /// Compresses the block.
    pub fn finish(self) -> Result<Block, String> {
        self.finish_in(&mut Buffers::default())
    }

    /// Compresses the block through `buffers`' compression buffer, and gives the row buffer
    /// back to them: only the compressed bytes are copied out.
    pub fn finish_in(mut self, buffers: &mut Buffers) -> Result<Block, String> {
        self.close();
        let raw = u32::try_from(self.raw.len()).ok().filter(|n| *n as usize <= MAX_RAW);
        let raw = raw.ok_or_else(|| format!("{} bytes of rows in one block, more than a block holds", self.raw.len()))?;
        // Sized for LZ4's worst case, so compression does not run out of room; zeroed only
        // when it grows.
        let out = &mut buffers.compressed;
        let room = 4 + lz4_flex::block::get_maximum_output_size(self.raw.len());
        if out.len() < room {
            out.resize(room, 0);
        }
        out[..4].copy_from_slice(&raw.to_le_bytes());
        let n = lz4_flex::block::compress_into(&self.raw, &mut out[4..room]).map_err(|e| format!("compressing a block: {e}"))?;
        let bytes = out[..4 + n].to_vec();
        buffers.raw = self.raw;
        Ok(Block { bytes, tables: self.tables })
    }
}

impl RowSink for Builder {
    fn row(&mut self, key: &[u8], value: &[u8]) {
        self.raw.reserve(8 + key.len() + value.len());
        self.raw.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.raw.extend_from_slice(key);
        self.raw.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.raw.extend_from_slice(value);
        if let Some((_, rows)) = self.open.as_mut() {
            *rows += 1;
        }
    }
}

/// The rows of a compressed block, decompressed.
pub fn decompress(block: &[u8]) -> Result<Vec<u8>, String> {
    let (len, lz4) = block.split_at_checked(4).ok_or("a block shorter than its header")?;
    let raw = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if raw > MAX_RAW {
        return Err(format!("a block claims {raw} bytes of rows, more than any block holds"));
    }
    let mut rows = vec![0u8; raw];
    let n = lz4_flex::block::decompress_into(lz4, &mut rows).map_err(|e| format!("a block does not decompress: {e}"))?;
    if n != raw {
        return Err(format!("a block decompressed to {n} bytes, its header says {raw}"));
    }
    Ok(rows)
}

/// One table's rows in a decompressed block: `(key, value)` pairs.
pub type Section<'a> = (&'a str, Vec<(&'a [u8], &'a [u8])>);

/// The sections of a decompressed block, in order; damage is refused naming where.
pub fn sections(raw: &[u8]) -> Result<Vec<Section<'_>>, String> {
    let mut at = Reader { bytes: raw, at: 0 };
    let mut out = Vec::new();
    while at.at < raw.len() {
        let name_len = u16::from_le_bytes(at.array()?) as usize;
        let name = std::str::from_utf8(at.take(name_len)?).map_err(|_| "a table name is not UTF-8")?;
        let count = u32::from_le_bytes(at.array()?) as usize;
        let mut rows = Vec::with_capacity(count.min(raw.len() / 8));
        for _ in 0..count {
            let k = u32::from_le_bytes(at.array()?) as usize;
            let key = at.take(k)?;
            let v = u32::from_le_bytes(at.array()?) as usize;
            rows.push((key, at.take(v)?));
        }
        out.push((name, rows));
    }
    Ok(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("a block ends inside a row (at byte {})", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_made_one_after_another_in_kept_buffers_hold_their_own_rows_alone() {
        let fill = |mut b: Builder, rows: u32, tag: &str| {
            b.table(tag);
            for i in 0..rows {
                b.row(&i.to_be_bytes(), format!("{tag} row {i}").as_bytes());
            }
            b
        };
        let mut buffers = Buffers::default();
        // A large block, then a small one in the same (now larger) buffers: each is exactly the
        // block a fresh builder makes of its rows, nothing of the first left in the second.
        for (rows, tag) in [(5_000, "large"), (3, "small")] {
            let kept = fill(Builder::in_buffers(&mut buffers, 64), rows, tag).finish_in(&mut buffers).unwrap();
            let fresh = fill(Builder::default(), rows, tag).finish().unwrap();
            assert_eq!((&kept.bytes, &kept.tables), (&fresh.bytes, &fresh.tables), "{tag}");
            let raw = decompress(&kept.bytes).unwrap();
            let found = sections(&raw).unwrap();
            assert_eq!((found.len(), found[0].0, found[0].1.len()), (1, tag, rows as usize));
        }
        assert!(buffers.raw.capacity() > 50_000, "the row buffer came back with its capacity");
    }

    #[test]
    fn rows_come_back_by_table_in_order_and_damage_is_refused() {
        let mut b = Builder::with_capacity(1024);
        b.table("empty");
        b.table("products");
        for i in 0..100u32 {
            b.row(&i.to_be_bytes(), format!("product {i} of store 7, currency EUR").as_bytes());
        }
        b.table("meta");
        b.row(b"kind", b"");
        let block = b.finish().unwrap();
        assert_eq!(block.tables, vec![("products".to_string(), 100), ("meta".to_string(), 1)]);
        let raw = decompress(&block.bytes).unwrap();
        assert!(block.bytes.len() < raw.len() / 2, "repeats compress: {} of {}", block.bytes.len(), raw.len());
        let found = sections(&raw).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, "products");
        assert_eq!(found[0].1[42], (&42u32.to_be_bytes()[..], "product 42 of store 7, currency EUR".as_bytes()));
        assert_eq!(found[1], ("meta", vec![(&b"kind"[..], &b""[..])]));

        assert!(decompress(&block.bytes[..3]).is_err());
        let mut claims = block.bytes.clone();
        claims[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress(&claims).unwrap_err().contains("more than any block"));
        assert!(sections(&raw[..raw.len() - 1]).unwrap_err().contains("ends inside a row"));
        let empty = Builder::default().finish().unwrap();
        assert!(empty.tables.is_empty());
        assert!(sections(&decompress(&empty.bytes).unwrap()).unwrap().is_empty());
    }
}
