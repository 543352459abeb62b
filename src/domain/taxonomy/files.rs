//! Where a process's taxonomy comes from: the starter compiled into the binary, or the file an
//! operator imported into the data directory (`shopcell admin taxonomy import`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::Taxonomy;

/// The file an imported taxonomy lives in.
pub fn taxonomy_path(data: &Path) -> PathBuf {
    data.join("taxonomy.json")
}

/// The starter taxonomy, parsed once per process and shared.
pub fn starter() -> Arc<Taxonomy> {
    static STARTER: OnceLock<Arc<Taxonomy>> = OnceLock::new();
    STARTER.get_or_init(|| Arc::new(Taxonomy::starter())).clone()
}

/// The taxonomy a process with data directory `data` serves: the imported file, or the starter.
/// An imported file that no longer validates stops the start rather than silently serving
/// another taxonomy.
pub fn load(data: &Path) -> Result<Arc<Taxonomy>, String> {
    let path = taxonomy_path(data);
    match std::fs::read_to_string(&path) {
        Ok(json) => Taxonomy::from_json(&json).map(Arc::new).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(starter()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `shopcell admin taxonomy import FILE`: validates `file` and installs it as `<data>/taxonomy.json`
/// (temp file, fsync, rename, so a crash never leaves half a file). Served from the next start.
pub fn import(file: &Path, data: &Path) -> Result<usize, String> {
    let json = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let taxonomy = Taxonomy::from_json(&json).map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::create_dir_all(data).map_err(|e| format!("{}: {e}", data.display()))?;
    let target = taxonomy_path(data);
    let temp = data.join("taxonomy.json.tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(json.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&temp, &target)?;
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(data)?.sync_all()
    };
    write().map_err(|e| format!("{}: {e}", target.display()))?;
    Ok(taxonomy.len())
}
