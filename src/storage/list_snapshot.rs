//! Held lists kept across a clean restart: at a clean stop, once the writer has stopped, the
//! lists a cell holds are written to `<cell dir>/lists.snapshot` in their packed form (the most
//! recently read first), and read back at the next start instead of being built from redb,
//! whose cache is cold then (a list of 1,000,000 products took 326 ms to build after a restart).
//!
//! A snapshot holds the lists of exactly the rows committed when it was taken, so it is paired
//! with that state and no other: it carries a random token, and the stop's last transaction
//! (after the file is durable) records the same token in the database's `meta` table
//! ([`crate::storage::LISTS_TOKEN`]). Every open of the database takes that row out in its
//! first transaction, whoever opens it (`storage::open`): a start that serves, an admin command
//! that writes, a migration. So the file is used only by the first open after the stop that
//! wrote it, and only if nothing opened the database in between; a process killed later leaves
//! no token, a database copied in from elsewhere carries another one (or none). The file itself
//! is unlinked as soon as it is opened, before the writer takes a job.
//!
//! Layout (integers little-endian): a header of [`HEADER`] bytes (`SCLISTS\0`, [`VERSION`] u32,
//! the database format version u32, the token (16 bytes), the index's offset u64 and length
//! u64, CRC-32 of the header before it u32); each list's packed keys
//! ([`Ranked::write_packed`]) followed by their CRC-32 u32; the index (the number of lists u32,
//! then per list its id as [`write_id`] writes it, its offset u64 and length u64 with the CRC)
//! followed by its CRC-32 u32. A damaged header or index ignores the file; a damaged list is
//! built from its rows as if it had not been saved.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::Database;
use uuid::Uuid;

use crate::storage::list_orders::{ListId, ListOrders, SavedList, read_id, write_id};
use crate::storage::ranked::Ranked;
use crate::storage::tables::META;

/// The snapshot's name in its cell's directory.
pub const FILE: &str = "lists.snapshot";
const MAGIC: &[u8; 8] = b"SCLISTS\0";
/// The layout above. Raise it with any change of the layout or of how list keys or list names
/// are made (a saved key must be the key the running build would write).
pub const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 4 + 16 + 8 + 8 + 4;

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Counts and checksums what passes through to `out`.
struct Summed<'a, W: Write> {
    out: &'a mut W,
    len: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Summed<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// What a clean stop saved.
#[derive(Debug, PartialEq, Eq)]
pub struct Saved {
    pub lists: usize,
    pub bytes: u64,
}

/// Saves every list `orders` holds to `dir` and pairs the file with `db`'s committed state.
/// Call it only once nothing will write `db` again in this process (after its writer stopped).
pub fn save(dir: &Path, db: &Database, orders: &ListOrders) -> std::io::Result<Saved> {
    // Nothing held, nothing to save: no file, and the stop writes nothing into the database.
    if !orders.holds_any() {
        return Ok(Saved { lists: 0, bytes: 0 });
    }
    let token = Uuid::new_v4();
    let tmp = path(dir).with_extension("snapshot.tmp");
    let mut file = File::create(&tmp)?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    out.write_all(&[0; HEADER])?;
    let (mut at, mut index, mut count) = (HEADER as u64, vec![0; 4], 0u32);
    orders.each_held(|id, keys| {
        let mut entry = Vec::new();
        if !write_id(&mut entry, id) {
            return Ok(());
        }
        let mut summed = Summed { out: &mut out, len: 0, crc: crc32fast::Hasher::new() };
        match keys.write_packed(&mut summed) {
            // Too large to pack: checked before a byte is written, so it is merely left out.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput && summed.len == 0 => return Ok(()),
            result => result?,
        }
        let (len, sum) = (summed.len + 4, summed.crc.finalize());
        out.write_all(&sum.to_le_bytes())?;
        entry.extend_from_slice(&at.to_le_bytes());
        entry.extend_from_slice(&len.to_le_bytes());
        index.extend_from_slice(&entry);
        at += len;
        count += 1;
        Ok::<(), std::io::Error>(())
    })?;
    index[..4].copy_from_slice(&count.to_le_bytes());
    out.write_all(&index)?;
    out.write_all(&crc(&index).to_le_bytes())?;
    out.flush()?;
    drop(out);
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&crate::storage::FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(token.as_bytes());
    header.extend_from_slice(&at.to_le_bytes());
    header.extend_from_slice(&(index.len() as u64).to_le_bytes());
    header.extend_from_slice(&crc(&header).to_le_bytes());
    file.rewind()?;
    file.write_all(&header)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path(dir))?;
    File::open(dir)?.sync_all()?;
    // Last: until this commits, the database names no snapshot (or an older one's token).
    let txn = db.begin_write().map_err(std::io::Error::other)?;
    txn.open_table(META)
        .map_err(std::io::Error::other)?
        .insert(crate::storage::LISTS_TOKEN, token.as_bytes().as_slice())
        .map_err(std::io::Error::other)?;
    txn.commit().map_err(std::io::Error::other)?;
    Ok(Saved { lists: count as usize, bytes: at + index.len() as u64 + 4 })
}

/// A snapshot found valid at a start: its lists, the most recently read first, each with where
/// its bytes are.
pub struct Snapshot {
    file: Arc<File>,
    lists: Vec<(ListId, u64, u64)>,
}

/// Why a snapshot found was not used.
fn ignored(dir: &Path, why: &str) -> Option<Snapshot> {
    tracing::warn!(file = %path(dir).display(), why, "the list snapshot is ignored: lists are built from the database");
    None
}

impl Snapshot {
    /// The snapshot in `dir` when it is whole and carries `token` (what the database's open took
    /// out, [`crate::storage::open_with`]); a file found is removed either way.
    pub fn open(dir: &Path, token: Option<&[u8]>) -> Option<Snapshot> {
        let mut file = match File::open(path(dir)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return ignored(dir, &format!("cannot be opened: {e}")),
        };
        // Never read by a later start: its token is spent. What this start loads is read
        // through the open file.
        if let Err(e) = std::fs::remove_file(path(dir)) {
            return ignored(dir, &format!("cannot be removed: {e}"));
        }
        let mut header = [0u8; HEADER];
        if file.read_exact(&mut header).is_err() {
            return ignored(dir, "cut short");
        }
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        if &header[..8] != MAGIC || u32_at(&header, HEADER - 4) != crc(&header[..HEADER - 4]) {
            return ignored(dir, "not a list snapshot, or its header is damaged");
        }
        if u32_at(&header, 8) != VERSION || u32_at(&header, 12) != crate::storage::FORMAT_VERSION {
            return ignored(dir, "written by another version");
        }
        if token != Some(&header[16..32]) {
            return ignored(dir, "not taken at the database's last clean stop");
        }
        let (index_at, index_len) = (u64_at(&header, 32), u64_at(&header, 40));
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if index_at.checked_add(index_len).and_then(|end| end.checked_add(4)) != Some(size) {
            return ignored(dir, "cut short");
        }
        let mut index = vec![0u8; index_len as usize + 4];
        if file.read_exact_at(&mut index, index_at).is_err() || index.len() < 8 {
            return ignored(dir, "cut short");
        }
        let (index, sum) = index.split_at(index.len() - 4);
        if u32_at(sum, 0) != crc(index) {
            return ignored(dir, "its index is damaged");
        }
        let count = u32_at(index, 0) as usize;
        let mut rest = &index[4..];
        let mut lists = Vec::with_capacity(count.min(rest.len() / 35));
        while let Some((id, after)) = read_id(rest) {
            let (Some(at), Some(len)) = (after.get(..8), after.get(8..16)) else { break };
            let (at, len) = (u64_at(at, 0), u64_at(len, 0));
            if len < 4 || at.checked_add(len).is_none_or(|end| end > index_at) {
                return ignored(dir, "its index names bytes it does not hold");
            }
            lists.push((id, at, len));
            rest = &after[16..];
        }
        if lists.len() != count || !rest.is_empty() {
            return ignored(dir, "its index is damaged");
        }
        Some(Snapshot { file: Arc::new(file), lists })
    }

    pub fn len(&self) -> usize {
        self.lists.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The lists `keep` accepts, each with how it is read back (checked against its CRC and
    /// for order; `None` after a warning when damaged).
    pub fn lists(self, keep: impl Fn(&ListId) -> bool) -> Vec<(ListId, SavedList)> {
        let file = self.file;
        self.lists
            .into_iter()
            .filter(|(id, _, _)| keep(id))
            .map(|(id, at, len)| {
                let (file, name) = (file.clone(), id.clone());
                let load: SavedList = Box::new(move || {
                    let mut bytes = vec![0u8; len as usize];
                    let read = file.read_exact_at(&mut bytes, at);
                    let (packed, sum) = bytes.split_at(bytes.len().saturating_sub(4));
                    let whole = read.is_ok() && sum.len() == 4 && crc(packed).to_le_bytes() == sum;
                    let keys = if whole { Ranked::from_packed(packed) } else { None };
                    if keys.is_none() {
                        tracing::warn!(store = %name.0, list = ?name.1, "a saved list is damaged: it is built from the database");
                    }
                    keys
                });
                (id, load)
            })
            .collect()
    }
}

/// Reads a snapshot's lists back in the background, hottest first (see
/// [`ListOrders::load_restored`]); what it has not reached when the cell stops is loaded then,
/// so the stop saves it again.
pub struct Loader {
    orders: Arc<ListOrders>,
    stop: Arc<AtomicBool>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<Vec<ListId>>>>,
}

impl Loader {
    /// Marks the lists of `snapshot` that `keep` accepts as loading in `orders` (before this
    /// returns: call it before the writer takes a job) and starts reading them back.
    pub fn start(name: &str, orders: &Arc<ListOrders>, snapshot: Snapshot, keep: impl Fn(&ListId) -> bool) -> Loader {
        let marked = orders.restore(snapshot.lists(keep));
        let stop = Arc::new(AtomicBool::new(false));
        let (background, stopped, cell, lists) = (orders.clone(), stop.clone(), name.to_string(), marked.clone());
        let spawned = std::thread::Builder::new().name(format!("lists-{name}")).spawn(move || {
            let started = std::time::Instant::now();
            let count = lists.len();
            let left = background.load_restored(lists, &stopped);
            let held = background.meter.stats();
            tracing::info!(
                cell,
                lists = count,
                held = held.entries,
                left = left.len(),
                ms = started.elapsed().as_millis() as u64,
                "saved lists loaded"
            );
            left
        });
        let thread = match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "could not load the saved lists: they are built when read");
                orders.unmark(marked);
                None
            }
        };
        Loader { orders: orders.clone(), stop, thread: std::sync::Mutex::new(thread) }
    }

    /// Stops loading in the background and loads, on this thread, the lists it had not reached
    /// (within the lists' share), so the stop saves them again. Call it once nothing writes the
    /// database: the lists loaded here replay what their queues hold and no more.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) else { return };
        let left = thread.join().unwrap_or_default();
        if !left.is_empty() {
            self.orders.load_restored(left, &AtomicBool::new(false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::list_orders::ListName;
    use crate::storage::ranked::Keys;
    use crate::storage::tests::CELL;
    use crate::storage::{ONE_OFF_CACHE, Opened, open, open_with};

    fn db_path(dir: &Path) -> PathBuf {
        dir.join("cell.redb")
    }

    fn product(store: u128, n: u16) -> ListId {
        (Uuid::from_u128(store), ListName::Product(n))
    }

    /// Keys `0..n` of a list, four bytes each, then `tag`.
    fn keys(n: u32, tag: u8) -> Keys {
        let mut keys = Keys::default();
        for i in (0..n).rev() {
            keys.push(&[&i.to_be_bytes()[..], &[tag]].concat());
        }
        keys
    }

    /// Holds three lists (the record list read last), saves them with `db`, and answers each
    /// list's keys in order, the most recently read first.
    async fn saved_three(dir: &Path) -> Vec<(ListId, Vec<Vec<u8>>)> {
        let db = open(&db_path(dir), CELL, ONE_OFF_CACHE).unwrap();
        let orders = Arc::new(ListOrders::new(1 << 30));
        let ids = [product(1, 0x0100), product(2, 0x0203), (Uuid::from_u128(1), ListName::Record(vec![0, 35, 2].into()))];
        let mut held = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let n = [600, 0, 3][i];
            let all = orders
                .read(
                    id.clone(),
                    0,
                    move || Ok(vec![keys(n, i as u8)]),
                    |l| l.page(false, 0, usize::MAX).0.iter().map(|k| k.to_vec()).collect(),
                )
                .await
                .unwrap();
            held.insert(0, (id.clone(), all));
        }
        assert_eq!(save(dir, &db, &orders).unwrap().lists, 3);
        held
    }

    fn read_back(saved: Vec<(ListId, SavedList)>) -> Vec<(ListId, Option<Vec<Vec<u8>>>)> {
        saved
            .into_iter()
            .map(|(id, load)| (id, load().map(|r| r.page(false, 0, usize::MAX).iter().map(|k| k.to_vec()).collect())))
            .collect()
    }

    #[tokio::test]
    async fn the_next_open_reads_every_list_back_as_it_was_held_and_no_later_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let held = saved_three(dir.path()).await;
        let Opened { db, lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
        let snapshot = Snapshot::open(dir.path(), token.as_deref()).expect("the snapshot of the last stop");
        assert!(!path(dir.path()).exists(), "the file is removed once opened");
        let back = read_back(snapshot.lists(|_| true));
        assert_eq!(back, held.into_iter().map(|(id, keys)| (id, Some(keys))).collect::<Vec<_>>());
        // The token was taken out by that open: the next one finds none.
        drop(db);
        let Opened { lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
        assert_eq!(token, None);
    }

    #[tokio::test]
    async fn a_stop_soon_after_a_start_saves_every_list_again_whatever_the_loader_reached() {
        let dir = tempfile::tempdir().unwrap();
        let held = saved_three(dir.path()).await;
        for _ in 0..2 {
            let Opened { db, lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
            let snapshot = Snapshot::open(dir.path(), token.as_deref()).expect("the snapshot of the last stop");
            let orders = Arc::new(ListOrders::new(1 << 30));
            // Stopped at once: the thread may have loaded none, some or all of the lists.
            let loader = Loader::start("cell", &orders, snapshot, |_| true);
            loader.stop();
            assert_eq!(orders.meter.stats().entries, 3);
            assert_eq!(save(dir.path(), &db, &orders).unwrap().lists, 3);
        }
        let Opened { lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
        let back = read_back(Snapshot::open(dir.path(), token.as_deref()).unwrap().lists(|_| true));
        assert_eq!(back, held.into_iter().map(|(id, keys)| (id, Some(keys))).collect::<Vec<_>>(), "in the order they were read");
    }

    #[tokio::test]
    async fn a_database_opened_in_between_is_never_paired_with_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        saved_three(dir.path()).await;
        let saved = std::fs::read(path(dir.path())).unwrap();
        // An admin command opens the file (and may write) while nothing serves.
        drop(open(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap());
        let Opened { lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
        assert_eq!(token, None);
        assert!(Snapshot::open(dir.path(), token.as_deref()).is_none());
        assert!(!path(dir.path()).exists(), "an unusable file is removed too");
        // A snapshot of another stop (a file copied in, or a database copied over) does not
        // carry this database's token either.
        std::fs::write(path(dir.path()), &saved).unwrap();
        assert!(Snapshot::open(dir.path(), Some(Uuid::new_v4().as_bytes())).is_none());
    }

    #[tokio::test]
    async fn a_damaged_snapshot_is_ignored_and_a_damaged_list_alone_is_built() {
        let dir = tempfile::tempdir().unwrap();
        let held = saved_three(dir.path()).await;
        let Opened { lists_token: token, .. } = open_with(&db_path(dir.path()), CELL, ONE_OFF_CACHE).unwrap();
        let whole = std::fs::read(path(dir.path())).unwrap();
        let try_with = |bytes: &[u8]| {
            std::fs::write(path(dir.path()), bytes).unwrap();
            Snapshot::open(dir.path(), token.as_deref())
        };
        // Cut short anywhere, a header byte changed, another version, an index byte changed.
        for cut in [0, 10, HEADER, HEADER + 100, whole.len() - 1] {
            assert!(try_with(&whole[..cut]).is_none(), "cut at {cut}");
        }
        let mut bad = whole.clone();
        bad[20] ^= 1;
        assert!(try_with(&bad).is_none());
        let mut other = whole.clone();
        other[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
        let sum = crc(&other[..HEADER - 4]);
        other[HEADER - 4..HEADER].copy_from_slice(&sum.to_le_bytes());
        assert!(try_with(&other).is_none(), "another version, its header checksum right");
        let mut index = whole.clone();
        let at = whole.len() - 10;
        index[at] ^= 1;
        assert!(try_with(&index).is_none());
        // One list's byte changed: that list alone fails its check.
        let mut list = whole.clone();
        list[HEADER + 200] ^= 0x40;
        let back = read_back(try_with(&list).expect("the header and index are whole").lists(|_| true));
        assert_eq!(back[2], (held[2].0.clone(), None), "the list of 600 keys, saved last, is damaged");
        assert_eq!(back[..2], held[..2].iter().map(|(id, keys)| (id.clone(), Some(keys.clone()))).collect::<Vec<_>>());
        // And whole again, it is read as saved.
        assert_eq!(try_with(&whole).unwrap().len(), 3);
    }
}
