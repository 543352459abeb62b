//! A sorted set of byte keys that answers "the n keys from rank r" without walking the first r:
//! the keys sit in sorted chunks of bounded size, so an insert or removal moves at most one
//! chunk's worth of bytes and finding a rank adds up chunk lengths (a few thousand for 1,000,000
//! keys) instead of visiting keys one by one.
//!
//! A chunk packs its keys end to end in one buffer with their end offsets beside them: a key
//! costs its bytes and four more, not an allocation of its own, and a set is built from
//! [`Keys`] (one buffer for a whole list) without allocating per key.

use std::cmp::Ordering;

/// Chunks are split when they grow past twice this and dropped when they empty.
const CHUNK: usize = 256;

/// Keys collected in any order, packed into one buffer: what a list is built from.
#[derive(Debug, Default)]
pub struct Keys {
    bytes: Vec<u8>,
    /// `(start, length)` of each key in `bytes`.
    spans: Vec<(u32, u32)>,
}

impl Keys {
    /// Adds the key `write` appends to the buffer it is given.
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        self.spans.push((start as u32, (self.bytes.len() - start) as u32));
    }

    pub fn push(&mut self, key: &[u8]) {
        self.push_with(|b| b.extend_from_slice(key));
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn key(&self, (start, len): (u32, u32)) -> &[u8] {
        &self.bytes[start as usize..(start + len) as usize]
    }
}

/// Sorted keys packed end to end: key `i` is `bytes[end(i - 1)..end(i)]`.
#[derive(Debug, Default)]
struct Chunk {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Chunk {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] as usize }
    }

    fn key(&self, i: usize) -> &[u8] {
        &self.bytes[self.start(i)..self.ends[i] as usize]
    }

    fn last(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).map(|i| self.key(i))
    }

    fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len() as u32);
    }

    fn insert(&mut self, at: usize, key: &[u8]) {
        let start = self.start(at);
        self.bytes.splice(start..start, key.iter().copied());
        self.ends.insert(at, (start + key.len()) as u32);
        for end in &mut self.ends[at + 1..] {
            *end += key.len() as u32;
        }
    }

    fn remove(&mut self, at: usize) {
        let (start, end) = (self.start(at), self.ends[at] as usize);
        self.bytes.drain(start..end);
        self.ends.remove(at);
        for e in &mut self.ends[at..] {
            *e -= (end - start) as u32;
        }
    }

    /// The keys from `at` on, moved to a new chunk.
    fn split_off(&mut self, at: usize) -> Chunk {
        let start = self.start(at);
        let bytes = self.bytes.split_off(start);
        let ends = self.ends.split_off(at).into_iter().map(|e| e - start as u32).collect();
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
        Chunk { bytes, ends }
    }

    /// What the chunk holds on the heap.
    fn heap(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * 4
    }
}

/// A sorted set of byte strings with rank access.
#[derive(Debug, Default)]
pub struct Ranked {
    /// Non-empty, each sorted, and every key of a chunk below every key of the next.
    chunks: Vec<Chunk>,
    len: usize,
    /// Heap bytes of the chunks, kept as they change.
    heap: usize,
}

impl Ranked {
    /// The set of `keys` (any order; duplicates kept once).
    pub fn from_keys(keys: Keys) -> Ranked {
        Ranked::from_parts(vec![keys])
    }

    /// What [`Ranked::from_parts`] of `parts` holds at its height: the parts themselves, a
    /// sort run of 16 bytes per key, and the list it makes (their key bytes again, and an end
    /// per key).
    pub fn merge_cost(parts: &[Keys]) -> usize {
        parts.iter().map(|p| p.bytes.capacity() * 2 + p.spans.capacity() * 8 + p.len() * (16 + 4)).sum()
    }

    /// The set of the keys of every part (any order, overlapping or not; duplicates kept once):
    /// each part is sorted on a thread of its own, then the parts are merged. A list built from
    /// a store read in parts (`storage::read::scan_split`) sorts on every core.
    pub fn from_parts(parts: Vec<Keys>) -> Ranked {
        let parts: Vec<Keys> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let Some(first) = parts.first().map(|p| p.key(p.spans[0]).to_vec()) else { return Ranked::default() };
        // Most comparisons are settled by eight bytes kept beside each span, so the sort rarely
        // follows a span into the buffer: the eight after what every key shares (titles that all
        // begin alike would otherwise tie on their first eight).
        let shared = on_each(&parts, |p| p.spans.iter().fold(first.len(), |n, s| n.min(common_prefix(&first, p.key(*s)))))
            .into_iter()
            .min()
            .unwrap_or(0);
        let runs = on_each(&parts, |p| {
            let mut run: Vec<Sortable> = p.spans.iter().map(|s| (prefix(p.key(*s), shared), *s)).collect();
            run.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| p.key(a.1).cmp(p.key(b.1))));
            run
        });
        let mut chunks = Vec::with_capacity(runs.iter().map(Vec::len).sum::<usize>() / CHUNK + 1);
        let mut group: Vec<&[u8]> = Vec::with_capacity(CHUNK);
        let mut len = 0;
        let mut close = |group: &mut Vec<&[u8]>| {
            let mut chunk =
                Chunk { bytes: Vec::with_capacity(group.iter().map(|k| k.len()).sum()), ends: Vec::with_capacity(group.len()) };
            group.drain(..).for_each(|k| chunk.push(k));
            len += chunk.len();
            chunks.push(chunk);
        };
        merge(&parts, &runs, |key| {
            group.push(key);
            if group.len() == CHUNK {
                close(&mut group);
            }
        });
        if !group.is_empty() {
            close(&mut group);
        }
        let heap = chunks.iter().map(Chunk::heap).sum::<usize>() + chunks.capacity() * std::mem::size_of::<Chunk>();
        Ranked { chunks, len, heap }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the set holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.heap
    }

    /// The chunk that holds `key` or would: the first whose last key is not below it.
    fn chunk_for(&self, key: &[u8]) -> usize {
        let i = self.chunks.partition_point(|c| c.last().is_some_and(|last| last < key));
        i.min(self.chunks.len().saturating_sub(1))
    }

    /// Runs `f` on chunk `i` (or on the chunk list), keeping the heap figure.
    fn measured<T>(&mut self, f: impl FnOnce(&mut Vec<Chunk>) -> T) -> T {
        let outer = |c: &Vec<Chunk>| c.capacity() * std::mem::size_of::<Chunk>();
        let before = outer(&self.chunks);
        let out = f(&mut self.chunks);
        self.heap = (self.heap + outer(&self.chunks)).saturating_sub(before);
        out
    }

    /// Adds `key`; answers false when it was there already.
    pub fn insert(&mut self, key: &[u8]) -> bool {
        if self.chunks.is_empty() {
            let mut chunk = Chunk::default();
            chunk.push(key);
            self.heap += chunk.heap();
            self.measured(|c| c.push(chunk));
            self.len = 1;
            return true;
        }
        let i = self.chunk_for(key);
        let chunk = &mut self.chunks[i];
        let Err(at) = chunk.search(key) else { return false };
        let before = chunk.heap();
        chunk.insert(at, key);
        let split = (chunk.len() > 2 * CHUNK).then(|| chunk.split_off(CHUNK));
        self.heap = (self.heap + chunk.heap()).saturating_sub(before);
        if let Some(upper) = split {
            self.heap += upper.heap();
            self.measured(|c| c.insert(i + 1, upper));
        }
        self.len += 1;
        true
    }

    /// Removes `key`; answers false when it was not there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let i = self.chunk_for(key);
        let chunk = &mut self.chunks[i];
        let Ok(at) = chunk.search(key) else { return false };
        let before = chunk.heap();
        chunk.remove(at);
        self.heap = (self.heap + chunk.heap()).saturating_sub(before);
        if chunk.len() == 0 {
            let gone = self.measured(|c| c.remove(i));
            self.heap = self.heap.saturating_sub(gone.heap());
        }
        self.len -= 1;
        true
    }

    /// Writes the set in its packed form: the number of keys (u64 little-endian), each key's end
    /// in the keys' bytes (u32 little-endian, ascending), then the keys end to end in order.
    /// It is the held form read back without sorting (see [`Ranked::from_packed`]).
    pub fn write_packed(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let total: usize = self.chunks.iter().map(|c| c.bytes.len()).sum();
        if u32::try_from(total).is_err() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a list of more than 4 GiB of keys cannot be packed",
            ));
        }
        out.write_all(&(self.len as u64).to_le_bytes())?;
        let mut ends = Vec::with_capacity(4 * 2 * CHUNK);
        let mut base = 0u32;
        for chunk in &self.chunks {
            ends.clear();
            for end in &chunk.ends {
                ends.extend_from_slice(&(base + end).to_le_bytes());
            }
            out.write_all(&ends)?;
            base += chunk.bytes.len() as u32;
        }
        for chunk in &self.chunks {
            out.write_all(&chunk.bytes)?;
        }
        Ok(())
    }

    /// The set [`Ranked::write_packed`] wrote, or `None` when `packed` is not such a set: cut
    /// short, ends out of order or past the bytes, keys not strictly ascending. Checked in
    /// full, so a damaged file can never break the order pages rely on.
    pub fn from_packed(packed: &[u8]) -> Option<Ranked> {
        let count = usize::try_from(u64::from_le_bytes(packed.get(..8)?.try_into().ok()?)).ok()?;
        let ends = packed.get(8..count.checked_mul(4)?.checked_add(8)?)?;
        let bytes = &packed[8 + ends.len()..];
        let end = |i: usize| u32::from_le_bytes([ends[4 * i], ends[4 * i + 1], ends[4 * i + 2], ends[4 * i + 3]]) as usize;
        if count > 0 && end(count - 1) != bytes.len() || count == 0 && !bytes.is_empty() {
            return None;
        }
        let mut chunks = Vec::with_capacity(count / CHUNK + 1);
        let (mut start, mut previous): (usize, Option<&[u8]>) = (0, None);
        for first in (0..count).step_by(CHUNK) {
            let upto = (first + CHUNK).min(count);
            let chunk_start = start;
            let mut chunk_ends = Vec::with_capacity(upto - first);
            for i in first..upto {
                let end = end(i);
                let key = bytes.get(start..end)?;
                if previous.is_some_and(|p| p >= key) {
                    return None;
                }
                previous = Some(key);
                chunk_ends.push((end - chunk_start) as u32);
                start = end;
            }
            chunks.push(Chunk { bytes: bytes[chunk_start..start].to_vec(), ends: chunk_ends });
        }
        let heap = chunks.iter().map(Chunk::heap).sum::<usize>() + chunks.capacity() * std::mem::size_of::<Chunk>();
        Some(Ranked { chunks, len: count, heap })
    }

    /// Up to `limit` keys from rank `offset`, in ascending order, or descending when `desc`
    /// (rank 0 is then the greatest key).
    pub fn page(&self, desc: bool, offset: usize, limit: usize) -> Vec<&[u8]> {
        if offset >= self.len || limit == 0 {
            return Vec::new();
        }
        let take = limit.min(self.len - offset);
        // The ascending rank of the page's first key in reading order.
        let start = if desc { self.len - 1 - offset } else { offset };
        let (mut ci, mut before) = (0, 0);
        while before + self.chunks[ci].len() <= start {
            before += self.chunks[ci].len();
            ci += 1;
        }
        let at = start - before;
        let mut out = Vec::with_capacity(take);
        if desc {
            let firsts = (0..=at).rev().map(|i| (ci, i));
            let rest = (0..ci).rev().flat_map(|c| (0..self.chunks[c].len()).rev().map(move |i| (c, i)));
            out.extend(firsts.chain(rest).take(take).map(|(c, i)| self.chunks[c].key(i)));
        } else {
            let firsts = (at..self.chunks[ci].len()).map(|i| (ci, i));
            let rest = (ci + 1..self.chunks.len()).flat_map(|c| (0..self.chunks[c].len()).map(move |i| (c, i)));
            out.extend(firsts.chain(rest).take(take).map(|(c, i)| self.chunks[c].key(i)));
        }
        out
    }
}

/// A key's eight bytes after the `shared` every key begins with, and its span.
type Sortable = (u64, (u32, u32));

fn prefix(key: &[u8], shared: usize) -> u64 {
    let k = key.get(shared..).unwrap_or_default();
    let mut p = [0u8; 8];
    let n = k.len().min(8);
    p[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(p)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `f` of every part, each on a thread of its own when there are several.
fn on_each<T: Send>(parts: &[Keys], f: impl Fn(&Keys) -> T + Sync) -> Vec<T> {
    if parts.len() < 2 {
        return parts.iter().map(&f).collect();
    }
    std::thread::scope(|s| {
        let f = &f;
        // A part whose thread cannot be started is done here instead.
        let threads: Vec<_> =
            parts.iter().map(|p| std::thread::Builder::new().spawn_scoped(s, move || f(p)).map_err(|_| p)).collect();
        threads
            .into_iter()
            .map(|t| match t {
                // A panic in one part is one here, as it would have been without threads.
                Ok(t) => t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                Err(p) => f(p),
            })
            .collect()
    })
}

/// Calls `f` with the keys of the sorted `runs` of `parts` in order, each key once.
fn merge<'a>(parts: &'a [Keys], runs: &[Vec<Sortable>], mut f: impl FnMut(&'a [u8])) {
    let mut heads = vec![0usize; runs.len()];
    let head = |part: usize, at: usize| runs[part].get(at).map(|(p, s)| (*p, parts[part].key(*s)));
    let mut last: Option<&[u8]> = None;
    loop {
        let mut best: Option<(usize, (u64, &[u8]))> = None;
        for (part, at) in heads.iter().enumerate() {
            if let Some(h) = head(part, *at)
                && best.is_none_or(|(_, b)| h < b)
            {
                best = Some((part, h));
            }
        }
        let Some((part, (_, key))) = best else { return };
        heads[part] += 1;
        if last != Some(key) {
            f(key);
            last = Some(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn key(n: u32) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    fn keys_of(ns: impl IntoIterator<Item = u32>) -> Keys {
        let mut keys = Keys::default();
        for n in ns {
            keys.push(&key(n));
        }
        keys
    }

    #[test]
    fn pages_in_both_directions_across_chunks() {
        let set = Ranked::from_keys(keys_of((0..1000).rev()));
        assert_eq!(set.len(), 1000);
        let asc: Vec<_> = set.page(false, 255, 3).into_iter().map(|k| k.to_vec()).collect();
        assert_eq!(asc, vec![key(255), key(256), key(257)]);
        let desc: Vec<_> = set.page(true, 743, 3).into_iter().map(|k| k.to_vec()).collect();
        assert_eq!(desc, vec![key(256), key(255), key(254)]);
        assert_eq!(set.page(true, 998, 5).len(), 2);
        assert!(set.page(false, 1000, 5).is_empty());
    }

    #[test]
    fn keys_of_any_length_keep_byte_order() {
        let mut keys = Keys::default();
        for k in [&b"b"[..], b"abc", b"", b"ab", b"abcdefghij", b"abcdefghi", b"ab"] {
            keys.push(k);
        }
        let set = Ranked::from_keys(keys);
        let all: Vec<&[u8]> = set.page(false, 0, 10);
        assert_eq!(all, [&b""[..], b"ab", b"abc", b"abcdefghi", b"abcdefghij", b"b"]);
        // The same keys in parts, sorted apart and merged.
        let part = |ks: &[&[u8]]| {
            let mut keys = Keys::default();
            ks.iter().for_each(|k| keys.push(k));
            keys
        };
        let parts = vec![part(&[b"abcdefghij", b"ab"]), part(&[b"b", b"", b"ab"]), part(&[b"abcdefghi", b"abc"])];
        assert_eq!(Ranked::from_parts(parts).page(false, 0, 10), all);
    }

    /// The heap figure kept as the set changes is what its buffers hold.
    fn counted(set: &Ranked) -> usize {
        set.chunks.iter().map(Chunk::heap).sum::<usize>() + set.chunks.capacity() * std::mem::size_of::<Chunk>()
    }

    #[test]
    fn a_packed_set_reads_back_whole_and_a_damaged_one_never() {
        let set = Ranked::from_keys(keys_of((0..1000).map(|n| n * 7)));
        let mut packed = Vec::new();
        set.write_packed(&mut packed).unwrap();
        let back = Ranked::from_packed(&packed).unwrap();
        assert_eq!(back.page(false, 0, 2000), set.page(false, 0, 2000));
        assert_eq!((back.len(), back.heap_bytes(), counted(&back)), (1000, back.heap_bytes(), back.heap_bytes()));
        assert!(back.chunks.iter().all(|c| c.len() > 0 && c.len() <= 2 * CHUNK));
        let mut empty = Vec::new();
        Ranked::default().write_packed(&mut empty).unwrap();
        assert!(Ranked::from_packed(&empty).unwrap().is_empty());
        // Cut short, one byte more, two keys swapped, an end past the bytes.
        assert!(Ranked::from_packed(&packed[..packed.len() - 1]).is_none());
        assert!(Ranked::from_packed(&[packed.as_slice(), &[0]].concat()).is_none());
        let keys = 8 + 4 * 1000;
        let mut swapped = packed.clone();
        swapped[keys..keys + 8].copy_from_slice(&[&key(7)[..], &key(0)[..]].concat());
        assert!(Ranked::from_packed(&swapped).is_none());
        let mut past = packed.clone();
        past[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Ranked::from_packed(&past).is_none());
        assert!(Ranked::from_packed(&[1, 0, 0]).is_none());
        assert!(Ranked::from_packed(&u64::MAX.to_le_bytes()).is_none());
    }

    proptest! {
        /// A set made from parts sorted apart and merged is the set of all their keys, each once,
        /// whether the parts overlap, repeat keys or are empty.
        #[test]
        fn parts_merge_into_the_set_of_all_their_keys(
            parts in prop::collection::vec(prop::collection::vec(0u32..5000, 0..700), 0..5),
        ) {
            let set = Ranked::from_parts(parts.iter().map(|p| keys_of(p.iter().copied())).collect());
            let model: BTreeSet<Vec<u8>> = parts.iter().flatten().map(|n| key(*n)).collect();
            let want: Vec<Vec<u8>> = model.into_iter().collect();
            prop_assert_eq!(set.len(), want.len());
            prop_assert_eq!(set.heap_bytes(), counted(&set));
            prop_assert!(set.chunks.iter().all(|c| c.len() > 0 && c.len() <= 2 * CHUNK));
            let got: Vec<Vec<u8>> = set.page(false, 0, usize::MAX).into_iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, want);
        }

        /// Any sequence of inserts and removals leaves the same set, in the same order, as a
        /// BTreeSet, and every page is the matching slice of it.
        #[test]
        fn behaves_like_an_ordered_set(
            start in prop::collection::vec(0u32..3000, 0..600),
            ops in prop::collection::vec((any::<bool>(), 0u32..3000), 0..2000),
            pages in prop::collection::vec((any::<bool>(), 0usize..3000, 0usize..40), 1..20),
        ) {
            let mut set = Ranked::from_keys(keys_of(start.iter().copied()));
            let mut model: BTreeSet<Vec<u8>> = start.iter().map(|n| key(*n)).collect();
            for (insert, n) in ops {
                let k = key(n);
                if insert {
                    prop_assert_eq!(set.insert(&k), model.insert(k.clone()));
                } else {
                    prop_assert_eq!(set.remove(&k), model.remove(&k));
                }
            }
            prop_assert_eq!(set.len(), model.len());
            prop_assert_eq!(set.heap_bytes(), counted(&set));
            prop_assert!(set.chunks.iter().all(|c| c.len() > 0 && c.len() <= 2 * CHUNK));
            // Packed and read back after any changes: the same set.
            let mut packed = Vec::new();
            set.write_packed(&mut packed).unwrap();
            let back = Ranked::from_packed(&packed).unwrap();
            prop_assert_eq!(back.page(false, 0, usize::MAX), set.page(false, 0, usize::MAX));
            let sorted: Vec<Vec<u8>> = model.into_iter().collect();
            for (desc, offset, limit) in pages {
                let got: Vec<Vec<u8>> = set.page(desc, offset, limit).into_iter().map(<[u8]>::to_vec).collect();
                let want: Vec<Vec<u8>> = if desc {
                    sorted.iter().rev().skip(offset).take(limit).cloned().collect()
                } else {
                    sorted.iter().skip(offset).take(limit).cloned().collect()
                };
                prop_assert_eq!(got, want);
            }
        }
    }
}
