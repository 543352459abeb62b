//! The portable store file on disk (layout: `data-format/README.md`, "Portable store files"):
//!
//! ```text
//! magic "shopcell.store\n\0" (16 bytes) · format u32 LE · header length u32 LE · header (JSON)
//! frames: 1 u8 · length u32 LE · rows (the codec's Vec<Row>)   … one per chunk
//! end:    0 u8 · rows u64 LE · SHA-256 of every byte before it (32 bytes)
//! ```
//!
//! Written as `FILE.partial`, synced and renamed when complete, so a file under its own name is
//! always whole. Read twice by an import: once to verify everything (checksum, versions,
//! counts, that every row is the store's) before the service is asked anything, then to send
//! the frames, hashing again so a file changed in between is caught before the import finishes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use redb::TableHandle;
use ring::digest::{Context, SHA256};

use crate::cells::moves::Row;
use crate::error::BoxError;
use crate::portable::{Header, PORTABLE_FORMAT};
use crate::storage::FORMAT_VERSION;
use crate::storage::keys::Key;
use crate::storage::tables::STORE_TABLES;

/// The first bytes of every portable store file.
pub const MAGIC: &[u8; 16] = b"shopcell.store\n\0";
/// The largest header and the largest frame a reader accepts: a chunk is about
/// [`crate::portable::CHUNK_BYTES`] of rows, and a frame travels as one internal request.
pub const MAX_HEADER: u32 = 16 << 20;
pub const MAX_FRAME: u32 = 48 << 20;

const FRAME_ROWS: u8 = 1;
const FRAME_END: u8 = 0;

/// A portable file being written.
pub struct FileWriter {
    out: BufWriter<File>,
    hash: Context,
    rows: u64,
    /// Bytes put so far, and their steady writeback (an export beside the service it reads).
    bytes: u64,
    writeback: crate::private_files::Writeback,
    partial: PathBuf,
    path: PathBuf,
}

fn partial_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

impl FileWriter {
    /// Starts `path` (refused if it exists) with the header; written as `path.partial` until
    /// [`FileWriter::finish`].
    pub fn create(path: &Path, header: &Header) -> Result<FileWriter, BoxError> {
        if path.exists() {
            return Err(format!("{} exists: export into a new file", path.display()).into());
        }
        let partial = partial_of(path);
        // A leftover of an export that died is ours to replace.
        let _ = std::fs::remove_file(&partial);
        let file = crate::private_files::create_private_file(&partial).map_err(|e| format!("{}: {e}", partial.display()))?;
        let mut w = FileWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            hash: Context::new(&SHA256),
            rows: 0,
            bytes: 0,
            writeback: Default::default(),
            partial,
            path: path.to_path_buf(),
        };
        let json = serde_json::to_vec(header)?;
        w.put(MAGIC)?;
        w.put(&PORTABLE_FORMAT.to_le_bytes())?;
        w.put(&(json.len() as u32).to_le_bytes())?;
        w.put(&json)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        self.hash.update(bytes);
        self.out.write_all(bytes).map_err(|e| format!("{}: {e}", self.partial.display()))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Appends one chunk of rows.
    pub fn rows(&mut self, rows: &[Row]) -> Result<(), BoxError> {
        let bytes = crate::storage::codec::encode(&rows).map_err(|e| e.message)?;
        self.put(&[FRAME_ROWS])?;
        self.put(&(bytes.len() as u32).to_le_bytes())?;
        self.put(&bytes)?;
        self.rows += rows.len() as u64;
        // What the buffer still holds is not in the file yet.
        let in_file = self.bytes - self.out.buffer().len() as u64;
        self.writeback.written(self.out.get_ref(), in_file).map_err(|e| format!("{}: {e}", self.partial.display()))?;
        Ok(())
    }

    /// Ends the file with the row total and the checksum, makes it durable and gives it its
    /// name. Answers the rows written.
    pub fn finish(mut self) -> Result<u64, BoxError> {
        self.put(&[FRAME_END])?;
        let rows = self.rows;
        self.put(&rows.to_le_bytes())?;
        let sum = self.hash.clone().finish();
        self.out.write_all(sum.as_ref())?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&self.partial, &self.path)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::private_files::sync_dir(dir)?;
        }
        Ok(rows)
    }

    /// Removes what was written (the export failed).
    pub fn discard(self) {
        let partial = self.partial.clone();
        drop(self);
        let _ = std::fs::remove_file(partial);
    }
}

/// A portable file being read, frame by frame.
pub struct FileReader {
    input: BufReader<File>,
    hash: Context,
    pub header: Header,
    rows: u64,
    name: String,
}

impl FileReader {
    /// Opens `path` and reads its header, refusing another kind of file, another layout or
    /// rows of another data format.
    pub fn open(path: &Path) -> Result<FileReader, BoxError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
        let mut r = FileReader {
            input: BufReader::with_capacity(1 << 20, file),
            hash: Context::new(&SHA256),
            header: empty_header(),
            rows: 0,
            name,
        };
        let magic: [u8; 16] = r.take_array()?;
        if &magic != MAGIC {
            return Err(format!("{}: not a portable store file (written by shopcell admin export-store)", r.name).into());
        }
        let format = u32::from_le_bytes(r.take_array()?);
        if format != PORTABLE_FORMAT {
            let which = if format > PORTABLE_FORMAT { "a newer" } else { "an older" };
            return Err(format!(
                "{}: portable format {format}, written by {which} shopcell; this one reads format {PORTABLE_FORMAT}",
                r.name
            )
            .into());
        }
        let len = u32::from_le_bytes(r.take_array()?);
        if len > MAX_HEADER {
            return Err(format!("{}: the header claims {len} bytes: the file is damaged", r.name).into());
        }
        let json = r.take(len as usize)?;
        r.header = serde_json::from_slice(&json).map_err(|e| format!("{}: the header is unreadable: {e}", r.name))?;
        if r.header.data_format != FORMAT_VERSION {
            return Err(format!(
                "{}: rows of data format {}, this shopcell stores format {FORMAT_VERSION}: import it with a shopcell of that format",
                r.name, r.header.data_format
            )
            .into());
        }
        Ok(r)
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, BoxError> {
        let mut buf = vec![0u8; n];
        self.input.read_exact(&mut buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => format!("{}: the file ends early (truncated)", self.name),
            _ => format!("{}: {e}", self.name),
        })?;
        self.hash.update(&buf);
        Ok(buf)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], BoxError> {
        let v = self.take(N)?;
        v.try_into().map_err(|_| "short read".into())
    }

    /// The next chunk of rows; `None` once the end and its checksum have been read and match.
    pub fn next_rows(&mut self) -> Result<Option<Vec<Row>>, BoxError> {
        let [kind] = self.take_array::<1>()?;
        match kind {
            FRAME_ROWS => {
                let len = u32::from_le_bytes(self.take_array()?);
                if len > MAX_FRAME {
                    return Err(format!("{}: a chunk claims {len} bytes: the file is damaged", self.name).into());
                }
                let bytes = self.take(len as usize)?;
                let rows: Vec<Row> = crate::storage::codec::decode(&bytes)
                    .map_err(|_| format!("{}: a chunk is unreadable: the file is damaged", self.name))?;
                self.rows += rows.len() as u64;
                Ok(Some(rows))
            }
            FRAME_END => {
                let total = u64::from_le_bytes(self.take_array()?);
                let expected = self.hash.clone().finish();
                let mut sum = [0u8; 32];
                self.input
                    .read_exact(&mut sum)
                    .map_err(|_| format!("{}: the file ends early (truncated before its checksum)", self.name))?;
                if sum != expected.as_ref() {
                    return Err(format!("{}: the checksum does not match: the file was altered or damaged", self.name).into());
                }
                if total != self.rows {
                    return Err(format!("{}: the end counts {total} rows, {} came", self.name, self.rows).into());
                }
                let mut rest = [0u8; 1];
                if self.input.read(&mut rest)? != 0 {
                    return Err(format!("{}: bytes follow the checksum: the file was altered", self.name).into());
                }
                Ok(None)
            }
            other => Err(format!("{}: unknown frame {other}: the file is damaged", self.name).into()),
        }
    }
}

/// Reads the whole file at `path` and answers its header once everything holds: the checksum,
/// the versions, every row the header's store's and in a known table, and the rows of each
/// table as many as the header counts.
pub fn verify(path: &Path) -> Result<Header, BoxError> {
    let mut r = FileReader::open(path)?;
    let prefix = Key::store(r.header.store_id).into_vec();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(rows) = r.next_rows()? {
        for row in &rows {
            let table = STORE_TABLES
                .get(row.table as usize)
                .ok_or_else(|| format!("{}: a row names table {}, unknown to this format", r.name, row.table))?;
            if !row.key.starts_with(&prefix) {
                return Err(format!("{}: a row of {} belongs to another store", r.name, table.def.name()).into());
            }
            if row.value.is_none() {
                return Err(format!("{}: a row of {} has no value", r.name, table.def.name()).into());
            }
            *counts.entry(table.def.name().to_string()).or_insert(0) += 1;
        }
    }
    if counts != r.header.counts {
        return Err(format!("{}: the rows of each table differ from the header's counts", r.name).into());
    }
    Ok(r.header)
}

fn empty_header() -> Header {
    Header {
        data_format: 0,
        store_id: uuid::Uuid::nil(),
        store_name: String::new(),
        exported_at_ms: 0,
        counts: BTreeMap::new(),
        owner_email: String::new(),
        members: Vec::new(),
        publishable_keys: Vec::new(),
        to_reenter: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::tables::{PRODUCTS, STORES};

    fn header(store: uuid::Uuid, products: u64) -> Header {
        let mut h = empty_header();
        h.data_format = FORMAT_VERSION;
        h.store_id = store;
        h.counts.insert("stores".into(), 1);
        h.counts.insert("products".into(), products);
        h
    }

    fn write(path: &Path, store: uuid::Uuid) {
        let mut w = FileWriter::create(path, &header(store, 2)).unwrap();
        let row = |table: u16, id: u128| Row {
            table,
            key: Key::store(store).id(uuid::Uuid::from_u128(id)).into_vec(),
            value: Some(b"v".to_vec()),
        };
        w.rows(&[Row { table: STORES.index, key: Key::store(store).into_vec(), value: Some(b"s".to_vec()) }]).unwrap();
        w.rows(&[row(PRODUCTS.index, 1), row(PRODUCTS.index, 2)]).unwrap();
        assert_eq!(w.finish().unwrap(), 3);
    }

    #[test]
    fn a_whole_file_verifies_and_any_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.shopcell");
        let store = uuid::Uuid::from_u128(7);
        write(&path, store);
        assert!(!partial_of(&path).exists());
        assert_eq!(verify(&path).unwrap().store_id, store);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let good = std::fs::read(&path).unwrap();
        let damaged = dir.path().join("damaged");
        let check = |bytes: &[u8], says: &str| {
            std::fs::write(&damaged, bytes).unwrap();
            let e = verify(&damaged).unwrap_err().to_string();
            assert!(e.contains(says), "{e} should say {says}");
        };
        check(&good[..good.len() - 10], "truncated");
        check(&good[..40], "ends early");
        let mut altered = good.clone();
        let at = altered.len() - 40;
        altered[at] ^= 1;
        check(&altered, "checksum");
        let mut newer = good.clone();
        newer[16..20].copy_from_slice(&(PORTABLE_FORMAT + 1).to_le_bytes());
        check(&newer, "newer shopcell");
        check(b"not a store file at all, just text", "not a portable store file");
        let mut extra = good.clone();
        extra.push(0);
        check(&extra, "follow the checksum");
        assert!(FileWriter::create(&path, &header(store, 0)).err().unwrap().to_string().contains("exists"));
    }

    #[test]
    fn counts_and_rows_of_another_store_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let store = uuid::Uuid::from_u128(7);
        let mut w = FileWriter::create(&path, &header(store, 2)).unwrap();
        let other = Key::store(uuid::Uuid::from_u128(8)).into_vec();
        w.rows(&[Row { table: STORES.index, key: other, value: Some(vec![1]) }]).unwrap();
        w.finish().unwrap();
        assert!(verify(&path).unwrap_err().to_string().contains("another store"));
        let path = dir.path().join("g");
        let mut w = FileWriter::create(&path, &header(store, 5)).unwrap();
        w.rows(&[Row { table: STORES.index, key: Key::store(store).into_vec(), value: Some(vec![1]) }]).unwrap();
        w.finish().unwrap();
        assert!(verify(&path).unwrap_err().to_string().contains("counts"));
    }
}
