//! Reads of a database file through a read-only shared mapping, for redb's page cache misses.
//!
//! redb reads a page it does not hold with one `pread` of 4 KiB: a backup's scan of a cell makes
//! a million of them, and a system call and a copy each were most of the scan's CPU (stolen
//! from the writers a backup must not slow). The file's pages are in the kernel's page cache
//! either way; through a mapping a read is a copy, and the kernel maps a page's neighbours with
//! it. Writes still go by `pwrite` and `fdatasync`: Linux keeps a shared mapping and the file's
//! writes coherent (one page cache), so a read sees every write before it, as with `pread`.
//!
//! The mapping is made once, far larger than the file (address space, not memory), so the file
//! grows under it without a new mapping. A read is served from it only below the file's length
//! as last set, under a lock a change of length takes exclusively: a page past the end of a
//! file is a `SIGBUS`, and a shrinking file must never have a reader there. Anything else (a
//! mapping refused, a read past the length or past the mapping) reads by `pread` as before.

use std::fs::File;
use std::io;
use std::sync::RwLock;

use memmap2::{Mmap, MmapOptions};

/// Address space asked for: a cell is never larger (a read past it goes by `pread`).
const SPANS: [u64; 3] = [1 << 40, 1 << 36, 1 << 32];

#[derive(Debug)]
pub struct MappedReads {
    map: Option<Mmap>,
    /// The file's length as last set: reads below it are within the file.
    len: RwLock<u64>,
}

impl MappedReads {
    /// A mapping of `file` (whose length is `len`), or none when the system refuses every span.
    pub fn new(file: &File, len: u64) -> MappedReads {
        let map = SPANS.iter().find_map(|span| {
            // SAFETY: the mapping is read-only and shared, and read only below the file's
            // length, which only `set_len` changes, under the write lock.
            unsafe { MmapOptions::new().len(*span as usize).map(file) }.ok()
        });
        MappedReads { map, len: RwLock::new(len) }
    }

    /// Copies the bytes at `offset` into `out` when the mapping holds them; `false` to read
    /// them another way.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> bool {
        let Some(map) = &self.map else { return false };
        let Ok(len) = self.len.read() else { return false };
        let Some(end) = offset.checked_add(out.len() as u64) else { return false };
        if end > *len {
            return false;
        }
        match map.get(offset as usize..end as usize) {
            Some(bytes) => {
                out.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    /// Runs `set_len` (changing the file's length to `len`) with no read under way.
    pub fn set_len(&self, len: u64, set_len: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut held = self.len.write().map_err(|_| io::Error::other("the file's length lock is poisoned"))?;
        // Shrinking, reads stop at the new end first; growing, only once the file is that long.
        *held = held.min(len);
        set_len()?;
        *held = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    use super::*;

    #[test]
    fn reads_see_every_write_and_stop_at_the_files_length() {
        let dir = tempfile::tempdir().unwrap();
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.path().join("f")).unwrap();
        file.write_all(&[1u8; 8192]).unwrap();
        let reads = MappedReads::new(&file, 8192);
        assert!(reads.map.is_some(), "the system maps the file");
        let mut out = [0u8; 4096];
        assert!(reads.read(4096, &mut out));
        assert_eq!(out, [1u8; 4096]);
        // A write by `pwrite` is seen by the next read through the mapping.
        file.write_all_at(&[7u8; 4096], 4096).unwrap();
        assert!(reads.read(4096, &mut out));
        assert_eq!(out, [7u8; 4096]);
        // Past the length: not read here (it would fault), whatever the mapping spans.
        assert!(!reads.read(8192, &mut out));
        assert!(!reads.read(6144, &mut out));
        assert!(!reads.read(u64::MAX - 10, &mut out));
        // Grown, the new pages are read; shrunk, they are not.
        reads.set_len(16384, || file.set_len(16384)).unwrap();
        assert!(reads.read(12288, &mut out));
        assert_eq!(out, [0u8; 4096]);
        reads.set_len(4096, || file.set_len(4096)).unwrap();
        assert!(!reads.read(4096, &mut out));
        assert!(reads.read(0, &mut out));
        assert_eq!(out, [1u8; 4096]);
        // A failed change of length leaves reads at the shorter of the two.
        let failed = reads.set_len(1 << 20, || Err(io::Error::other("disk full")));
        assert!(failed.is_err());
        assert!(!reads.read(8192, &mut out));
        assert!(reads.read(0, &mut out));
    }
}
