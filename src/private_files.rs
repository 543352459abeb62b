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
