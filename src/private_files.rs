//! Files only the service's user may read: keys, mail, backups. The process's umask is 077
//! already; these set the modes anyway, so a directory made by hand or a file left by an older
//! release is tightened, and each write is durable before it is relied on.

use std::io::Write;
use std::path::Path;

/// Creates `dir` (and missing parents) with mode 0700, and sets 0700 on it if it existed.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        builder.mode(0o700);
        builder.create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    builder.create(dir)?;
    Ok(())
}

/// Writes `bytes` as `path` (replacing it) with mode 0600, and syncs it and its directory.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = open(path, false)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(bytes)?;
    f.sync_all()?;
    match path.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Writes `bytes` as a new file `path` with mode 0600 (refused if it exists), synced; the
/// caller syncs the directory once its entry is final (a rename, say).
pub fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = open(path, true)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// A new file `path` with mode 0600 (refused if it exists), to be written piece by piece (a
/// portable store file); the caller syncs it and its directory when done.
pub fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    open(path, true)
}

/// Makes the entries of `dir` durable (new and renamed files).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn open(path: &Path, new: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Steady writeback of a large file written beside a service (a backup on the service's own
/// disk): after each [`Writeback::STEP`] written, the disk is started on that step and the step
/// before is waited for and dropped from the page cache. The device then never queues more than
/// two steps of the file before the service's fsyncs, and the file does not push the service's
/// own pages out of the cache. Durability still comes from the caller's final `sync_all` (this
/// flushes no device cache).
#[derive(Debug, Default)]
pub struct Writeback {
    /// Where writeback was last started: the disk has been asked for everything before.
    started: u64,
    /// Everything before this is on the disk and out of the cache.
    waited: u64,
}

impl Writeback {
    pub const STEP: u64 = 4 << 20;

    /// Tells the writeback that `file` holds `upto` bytes.
    pub fn written(&mut self, file: &std::fs::File, upto: u64) -> std::io::Result<()> {
        if upto.saturating_sub(self.started) < Self::STEP {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (fd, span) = (file.as_raw_fd(), |from: u64, to: u64| (from as libc::off64_t, (to - from) as libc::off64_t));
            let (at, len) = span(self.started, upto);
            // SAFETY: a range of an open descriptor this function borrows; no memory is passed.
            if unsafe { libc::sync_file_range(fd, at, len, libc::SYNC_FILE_RANGE_WRITE) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if self.started > self.waited {
                let (at, len) = span(self.waited, self.started);
                let wait = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
                // SAFETY: as above.
                if unsafe { libc::sync_file_range(fd, at, len, wait) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: as above. Advice only: a failure changes nothing written.
                unsafe { libc::posix_fadvise(fd, at, len, libc::POSIX_FADV_DONTNEED) };
                self.waited = self.started;
            }
            self.started = upto;
        }
        #[cfg(not(target_os = "linux"))]
        if upto.saturating_sub(self.waited) >= 16 * Self::STEP {
            file.sync_data()?;
            (self.started, self.waited) = (upto, upto);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::Writeback;

    #[test]
    #[cfg(target_os = "linux")]
    fn a_large_file_is_written_back_a_step_behind_and_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        let mut file = super::create_private_file(&path).unwrap();
        let mut writeback = Writeback::default();
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        let mut seen = Vec::new();
        for n in 1..=10u64 {
            file.write_all(&chunk).unwrap();
            writeback.written(&file, n << 20).unwrap();
            seen.push((writeback.started >> 20, writeback.waited >> 20));
        }
        // Started at each whole step, waited for one step behind.
        assert_eq!(seen[3], (4, 0));
        assert_eq!(seen[7], (8, 4));
        assert_eq!(seen[9], (8, 4));
        file.sync_all().unwrap();
        let mut back = Vec::new();
        std::fs::File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 10 << 20);
        assert!(back.chunks(1 << 20).all(|c| c == chunk.as_slice()));
    }
}
