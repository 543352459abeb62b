//! A sorted set of byte keys that answers "the n keys from rank r" without walking the first r:
//! the keys sit in sorted chunks of bounded size, so an insert or removal moves at most one
//! chunk's worth of pointers and finding a rank adds up chunk lengths (a few hundred for 100,000
//! keys) instead of visiting keys one by one.

/// Chunks are split when they grow past twice this and dropped when they empty.
const CHUNK: usize = 256;

/// A sorted set of byte strings with rank access.
#[derive(Debug, Default)]
pub struct Ranked {
    /// Non-empty, each sorted, and every key of a chunk below every key of the next.
    chunks: Vec<Vec<Box<[u8]>>>,
    len: usize,
}

impl Ranked {
    /// A set of `keys` (any order; duplicates kept once).
    pub fn from_keys(mut keys: Vec<Box<[u8]>>) -> Ranked {
        keys.sort_unstable();
        keys.dedup();
        let len = keys.len();
        let mut chunks = Vec::with_capacity(len / CHUNK + 1);
        let mut rest = keys.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(rest.by_ref().take(CHUNK).collect());
        }
        Ranked { chunks, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds `key` or would: the first whose last key is not below it.
    fn chunk_for(&self, key: &[u8]) -> usize {
        let i = self.chunks.partition_point(|c| c.last().is_some_and(|last| &**last < key));
        i.min(self.chunks.len().saturating_sub(1))
    }

    /// Adds `key`; answers false when it was there already.
    pub fn insert(&mut self, key: Box<[u8]>) -> bool {
        if self.chunks.is_empty() {
            self.chunks.push(vec![key]);
            self.len = 1;
            return true;
        }
        let i = self.chunk_for(&key);
        let chunk = &mut self.chunks[i];
        let Err(at) = chunk.binary_search(&key) else { return false };
        chunk.insert(at, key);
        self.len += 1;
        if chunk.len() > 2 * CHUNK {
            let upper = chunk.split_off(CHUNK);
            self.chunks.insert(i + 1, upper);
        }
        true
    }

    /// Removes `key`; answers false when it was not there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let i = self.chunk_for(key);
        let chunk = &mut self.chunks[i];
        let Ok(at) = chunk.binary_search_by(|k| (**k).cmp(key)) else { return false };
        chunk.remove(at);
        self.len -= 1;
        if chunk.is_empty() {
            self.chunks.remove(i);
        }
        true
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
            let firsts = self.chunks[ci][..=at].iter().rev();
            let rest = self.chunks[..ci].iter().rev().flat_map(|c| c.iter().rev());
            out.extend(firsts.chain(rest).take(take).map(|k| &**k));
        } else {
            let firsts = self.chunks[ci][at..].iter();
            let rest = self.chunks[ci + 1..].iter().flat_map(|c| c.iter());
            out.extend(firsts.chain(rest).take(take).map(|k| &**k));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn key(n: u32) -> Box<[u8]> {
        n.to_be_bytes().to_vec().into_boxed_slice()
    }

    #[test]
    fn pages_in_both_directions_across_chunks() {
        let set = Ranked::from_keys((0..1000).rev().map(key).collect());
        assert_eq!(set.len(), 1000);
        let asc: Vec<_> = set.page(false, 255, 3).into_iter().map(|k| k.to_vec()).collect();
        assert_eq!(asc, vec![key(255).to_vec(), key(256).to_vec(), key(257).to_vec()]);
        let desc: Vec<_> = set.page(true, 743, 3).into_iter().map(|k| k.to_vec()).collect();
        assert_eq!(desc, vec![key(256).to_vec(), key(255).to_vec(), key(254).to_vec()]);
        assert_eq!(set.page(true, 998, 5).len(), 2);
        assert!(set.page(false, 1000, 5).is_empty());
    }

    proptest! {
        /// Any sequence of inserts and removals leaves the same set, in the same order, as a
        /// BTreeSet, and every page is the matching slice of it.
        #[test]
        fn behaves_like_an_ordered_set(
            start in prop::collection::vec(0u32..3000, 0..600),
            ops in prop::collection::vec((any::<bool>(), 0u32..3000), 0..2000),
            pages in prop::collection::vec((any::<bool>(), 0usize..3000, 0usize..40), 1..20),
        ) {
            let mut set = Ranked::from_keys(start.iter().copied().map(key).collect());
            let mut model: BTreeSet<Vec<u8>> = start.iter().map(|n| key(*n).to_vec()).collect();
            for (insert, n) in ops {
                let k = key(n);
                if insert {
                    prop_assert_eq!(set.insert(k.clone()), model.insert(k.to_vec()));
                } else {
                    prop_assert_eq!(set.remove(&k), model.remove(&k.to_vec()));
                }
            }
            prop_assert_eq!(set.len(), model.len());
            prop_assert!(set.chunks.iter().all(|c| !c.is_empty() && c.len() <= 2 * CHUNK));
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
