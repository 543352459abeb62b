//! Recent admission answers (session live, role in the store, the store's cell), kept per
//! directory write generation: the dispatcher asks for one on every store request, while the
//! directory changes rarely (sign-ins, member and store changes, and a session's `lastActive`
//! at most once a minute).

use std::collections::HashMap;
use std::sync::RwLock;

use uuid::Uuid;

use crate::domain::role::Role;
use crate::memory::Meter;

/// Whether the session is live, the caller's role in the store, and the cell holding the store.
pub type Admission = (bool, Option<Role>, Option<String>);

/// (session, user, store) — everything an answer depends on besides the directory.
type Key = (Uuid, Uuid, Option<Uuid>);

/// What one answer costs: its map slot and the cell name's bytes, estimated.
const ENTRY_COST: usize = std::mem::size_of::<(Key, Admission)>() + 32;

/// Answers kept within a byte budget (the account service's share): past it the map starts
/// afresh (answers are one read each to rebuild).
pub struct Admissions {
    /// The directory generation the answers were read at, and the answers.
    map: RwLock<(u64, HashMap<Key, Admission>)>,
    pub meter: Meter,
}

impl Admissions {
    pub fn new(budget: u64) -> Admissions {
        Admissions { map: RwLock::default(), meter: Meter::new(budget) }
    }

    /// The answer of `key`, when it was read at `generation`.
    pub fn get(&self, key: &Key, generation: u64) -> Option<Admission> {
        let map = self.map.read().ok()?;
        let found = if map.0 == generation { map.1.get(key).cloned() } else { None };
        match found {
            Some(_) => self.meter.hit(),
            None => self.meter.miss(),
        }
        found
    }

    /// Keeps `answer`, read from a snapshot taken after the directory was at `generation`. An
    /// answer of an older generation than the kept ones is dropped; a newer one replaces them all.
    pub fn put(&self, key: Key, generation: u64, answer: Admission) {
        let Ok(mut map) = self.map.write() else { return };
        if generation < map.0 {
            return;
        }
        if generation > map.0 || (map.1.len() + 1) * ENTRY_COST > self.meter.budget() as usize {
            map.0 = generation;
            map.1.clear();
        }
        map.1.insert(key, answer);
        self.meter.holds((map.1.len() * ENTRY_COST) as u64, map.1.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_serve_only_their_generation() {
        let a = Admissions::new(1 << 20);
        let key = (Uuid::from_u128(1), Uuid::from_u128(2), Some(Uuid::from_u128(3)));
        a.put(key, 5, (true, Some(Role::Staff), Some("cell-1".into())));
        assert_eq!(a.get(&key, 5), Some((true, Some(Role::Staff), Some("cell-1".into()))));
        assert_eq!(a.get(&key, 6), None, "a later directory write retires the answer");
        a.put(key, 4, (true, Some(Role::Owner), None));
        assert_eq!(a.get(&key, 4), None, "an answer older than the kept ones is not kept");
        a.put(key, 6, (false, None, None));
        assert_eq!(a.get(&key, 6), Some((false, None, None)));
        assert_eq!(a.get(&key, 5), None);
    }
}
