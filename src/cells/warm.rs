//! Warming after a restart: the product lists held when the cell closed are built again in the
//! background, the most recently read first, so their first read after the restart is answered
//! from memory. Readiness does not wait for it.
//!
//! The hint is `<cell dir>/hot-lists`: a store id (16 bytes) and a list number (u16 big-endian)
//! per list. It is a hint, not data: a missing or damaged file warms nothing, a store since
//! moved away is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::products;
use crate::storage::list_orders::ListName;

/// Lists warmed at most: beyond these, the budget would be spent on lists nobody asked for yet.
const WARM_MAX: usize = 200;

fn hint_path(dir: &Path) -> PathBuf {
    dir.join("hot-lists")
}

/// A product list of a store, by its number (`cells::products`).
pub(super) type ProductList = (Uuid, u16);

/// The lists the hint names, in its order.
pub(super) fn read_hint(dir: &Path) -> Vec<ProductList> {
    let bytes = std::fs::read(hint_path(dir)).unwrap_or_default();
    bytes
        .chunks_exact(18)
        .filter_map(|c| Some((Uuid::from_slice(&c[..16]).ok()?, u16::from_be_bytes([c[16], c[17]]))))
        .take(WARM_MAX)
        .collect()
}

impl Cell {
    /// Writes the hint: the product lists held, the most recently read first. (Other records'
    /// lists are built on their first read: a build reads keys alone, no record.)
    pub(super) fn save_hottest(&self) {
        let hot = self.writer.orders.hottest(WARM_MAX);
        let bytes: Vec<u8> = hot
            .iter()
            .filter_map(|(store, list)| match list {
                ListName::Product(n) => Some([store.as_bytes().as_slice(), &n.to_be_bytes()].concat()),
                ListName::Record(_) => None,
            })
            .flatten()
            .collect();
        let path = hint_path(&self.dir);
        let tmp = path.with_extension("tmp");
        // Written aside and renamed, so a crash leaves the old hint or the new one.
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path)) {
            tracing::warn!(cell = %self.name, error = %e, "could not save the stores to warm after a restart");
        }
    }

    /// Builds, one at a time in the background, the lists held when the cell last closed; stops
    /// early when the lists' share is mostly used.
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
                if !cell.holds(store) {
                    continue;
                }
                match products::warm_product_list(&cell, store, list).await {
                    Ok(()) => warmed += 1,
                    Err(e) => tracing::warn!(cell = %cell.name, %store, list, error = %e, "warming a list failed"),
                }
            }
            tracing::info!(cell = %cell.name, lists = warmed, ms = started.elapsed().as_millis() as u64, "lists warmed");
        });
    }
}
