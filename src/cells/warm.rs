//! Warming after a restart: the lists held when the cell closed (products' and other records')
//! are read back from the list snapshot (`storage::list_snapshot`, started by `Cell::open`) or,
//! those it does not hold, built again in the background, the most recently read first, so
//! their first read after the restart is answered from memory. Readiness does not wait for it.
//!
//! The hint is `<cell dir>/hot-lists`: `HOT2`, then per list its id as
//! `storage::list_orders::write_id` writes it. A file without the mark is the earlier form: a
//! store id and a product list number per list. It is a hint, not data: a missing or damaged
//! file warms nothing, a store since moved away is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::cells::{Cell, kinds, products};
use crate::storage::list_names::ListParts;
use crate::storage::list_orders::{ListId, ListName, read_id, write_id};

/// Lists warmed at most: beyond these, the budget would be spent on lists nobody asked for yet.
const WARM_MAX: usize = 200;

/// What begins the hint's current form.
const MARK: &[u8] = b"HOT2";

fn hint_path(dir: &Path) -> PathBuf {
    dir.join("hot-lists")
}

/// The lists the hint names, in its order.
pub(super) fn read_hint(dir: &Path) -> Vec<ListId> {
    let bytes = std::fs::read(hint_path(dir)).unwrap_or_default();
    let Some(mut rest) = bytes.strip_prefix(MARK) else {
        return bytes
            .chunks_exact(18)
            .filter_map(|c| Some((Uuid::from_slice(&c[..16]).ok()?, ListName::Product(u16::from_be_bytes([c[16], c[17]])))))
            .take(WARM_MAX)
            .collect();
    };
    let mut lists = Vec::new();
    while lists.len() < WARM_MAX {
        let Some((id, after)) = read_id(rest) else { break };
        lists.push(id);
        rest = after;
    }
    lists
}

/// The hint naming `lists`, in their order.
fn hint(lists: &[ListId]) -> Vec<u8> {
    let mut bytes = MARK.to_vec();
    for id in lists {
        write_id(&mut bytes, id);
    }
    bytes
}

impl Cell {
    /// Writes the hint: the lists held, the most recently read first.
    pub(super) fn save_hottest(&self) {
        let bytes = hint(&self.writer.orders.hottest(WARM_MAX));
        let path = hint_path(&self.dir);
        let tmp = path.with_extension("tmp");
        // Written aside and renamed, so a crash leaves the old hint or the new one.
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path)) {
            tracing::warn!(cell = %self.name, error = %e, "could not save the stores to warm after a restart");
        }
    }

    /// Saves the lists held for the next start (`storage::list_snapshot`); once the writer has
    /// stopped.
    pub(super) fn save_lists(&self) {
        let started = std::time::Instant::now();
        match crate::storage::list_snapshot::save(&self.dir, &self.db, &self.writer.orders) {
            Ok(saved) => tracing::info!(
                cell = %self.name,
                lists = saved.lists,
                bytes = saved.bytes,
                ms = started.elapsed().as_millis() as u64,
                "held lists saved for the next start"
            ),
            Err(e) => tracing::warn!(cell = %self.name, error = %e, "could not save the held lists: the next start builds them"),
        }
    }

    /// Builds, one at a time in the background, the lists held when the cell last closed and
    /// not read back from the snapshot; stops early when the lists' share is mostly used.
    pub fn warm(self: &Arc<Self>) {
        let lists = std::mem::take(&mut *self.warm_hint.lock().unwrap_or_else(|e| e.into_inner()));
        // Outside a runtime (a tool opening the cell) there is nobody to serve: nothing to warm.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if lists.is_empty() {
            return;
        }
        let cell = self.clone();
        runtime.spawn(async move {
            let started = std::time::Instant::now();
            let mut warmed = 0;
            for (store, list) in lists {
                let held = cell.writer.orders.meter.stats();
                if held.bytes >= held.budget / 10 * 8 {
                    break;
                }
                if !cell.holds(store) || cell.writer.orders.holds(&(store, list.clone())) {
                    continue;
                }
                // A view with a text query or a timed filter is built by its record's list when
                // next read.
                if let ListName::Record(name) = &list
                    && !crate::storage::list::builds_by_name(name)
                {
                    continue;
                }
                let warming = match &list {
                    ListName::Product(n) => products::warm_product_list(&cell, store, *n).await,
                    ListName::Record(name) => {
                        let Some(shape) = ListParts::of(name).and_then(|p| kinds::row_shape(p.order)) else { continue };
                        let (db, name) = (cell.db.clone(), name.clone());
                        let now = cell.clock.now_ms();
                        let build = move || crate::storage::list::build_list(&db, store, &name, shape, None, now);
                        cell.writer.orders.read((store, list.clone()), now, build, |_| ()).await
                    }
                };
                match warming {
                    Ok(()) => warmed += 1,
                    Err(e) => tracing::warn!(cell = %cell.name, %store, ?list, error = %e, "warming a list failed"),
                }
            }
            tracing::info!(cell = %cell.name, lists = warmed, ms = started.elapsed().as_millis() as u64, "lists warmed");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_product_and_record_lists_and_reads_the_earlier_form() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let lists = vec![(a, ListName::Product(0x0201)), (b, ListName::Record(vec![0, 7, 0, 2, 1, 1, 9, 9].into()))];
        std::fs::write(hint_path(dir.path()), hint(&lists)).unwrap();
        assert_eq!(read_hint(dir.path()), lists);
        // Cut short: the whole lists before the cut are read.
        let whole = hint(&lists);
        std::fs::write(hint_path(dir.path()), &whole[..whole.len() - 3]).unwrap();
        assert_eq!(read_hint(dir.path()), lists[..1]);
        // The earlier form: a store and a product list number per list.
        std::fs::write(hint_path(dir.path()), [a.as_bytes().as_slice(), &[2, 1]].concat()).unwrap();
        assert_eq!(read_hint(dir.path()), vec![(a, ListName::Product(0x0201))]);
        std::fs::remove_file(hint_path(dir.path())).unwrap();
        assert!(read_hint(dir.path()).is_empty());
    }
}
