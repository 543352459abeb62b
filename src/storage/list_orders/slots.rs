//! The lists held, by id, and beside them each store's record lists with what each keeps: a
//! record's write reaches the held lists of its kind through these members, whatever lists
//! were asked for, without naming them (`storage::list_names`). Every insert and removal goes
//! through [`Slots`], so the members are always exactly the record lists in the map.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::storage::list_names::{Keeps, ListParts};
use crate::storage::list_orders::{ListId, ListName};

/// A record list of a store, as its name says.
pub(super) struct Member {
    pub name: Arc<[u8]>,
    pub tag: u8,
    pub keeps: Keeps,
}

impl Member {
    pub fn is_view(&self) -> bool {
        matches!(self.keeps, Keeps::View(_))
    }
}

/// Lists by id (`S`: what is kept of each), with the members of each store by record kind and
/// scope (what their names start with): a write reaches its kind's lists without passing the
/// others (a store holding the lists of thousands of orders' fulfillment orders, each under
/// its order).
pub(super) struct Slots<S> {
    map: HashMap<ListId, S>,
    members: HashMap<Uuid, HashMap<Box<[u8]>, Vec<Member>>>,
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Slots { map: HashMap::new(), members: HashMap::new() }
    }
}

impl<S> Slots<S> {
    pub fn get(&self, id: &ListId) -> Option<&S> {
        self.map.get(id)
    }

    pub fn contains_key(&self, id: &ListId) -> bool {
        self.map.contains_key(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ListId, &S)> {
        self.map.iter()
    }

    pub fn values(&self) -> impl Iterator<Item = &S> {
        self.map.values()
    }

    pub fn insert(&mut self, id: ListId, slot: S) {
        let (store, list) = (id.0, id.1.clone());
        if self.map.insert(id, slot).is_none()
            && let ListName::Record(name) = list
            && let Some(parts) = ListParts::of(&name)
        {
            let kind: Box<[u8]> = name[..parts.kind_len].into();
            let member = Member { name, tag: parts.tag, keeps: parts.keeps };
            self.members.entry(store).or_default().entry(kind).or_default().push(member);
        }
    }

    pub fn remove(&mut self, id: &ListId) -> Option<S> {
        let slot = self.map.remove(id)?;
        unregister(&mut self.members, id);
        Some(slot)
    }

    /// Keeps the lists `keep` answers true for.
    pub fn retain(&mut self, mut keep: impl FnMut(&ListId, &mut S) -> bool) {
        let members = &mut self.members;
        self.map.retain(|id, slot| {
            let kept = keep(id, slot);
            if !kept {
                unregister(members, id);
            }
            kept
        });
    }

    /// The record lists of `store` whose names start with `kind` (one record kind under one
    /// scope).
    pub fn members_of(&self, store: Uuid, kind: &[u8]) -> &[Member] {
        self.members.get(&store).and_then(|kinds| kinds.get(kind)).map(Vec::as_slice).unwrap_or_default()
    }
}

fn unregister(members: &mut HashMap<Uuid, HashMap<Box<[u8]>, Vec<Member>>>, (store, list): &ListId) {
    let ListName::Record(name) = list else { return };
    let Some(kind) = ListParts::of(name).and_then(|p| name.get(..p.kind_len)) else { return };
    let Some(kinds) = members.get_mut(store) else { return };
    if let Some(of_kind) = kinds.get_mut(kind) {
        of_kind.retain(|m| m.name != *name);
        if of_kind.is_empty() {
            kinds.remove(kind);
        }
    }
    if kinds.is_empty() {
        members.remove(store);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::list_names::{View, name};

    #[test]
    fn members_are_exactly_the_record_lists_held_by_store_and_kind() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let list = |kind: &[u8], keeps: Keeps| ListName::Record(name(kind, 0, &keeps).unwrap());
        let orders = [0u8, 7, 0];
        let scoped = [&[0u8, 9, 1][..], Uuid::from_u128(5).as_bytes()].concat();
        let mut slots: Slots<u8> = Slots::default();
        slots.insert((a, list(&orders, Keeps::All)), 1);
        slots.insert((a, list(&orders, Keeps::View(View::default()))), 2);
        slots.insert((a, list(&scoped, Keeps::All)), 3);
        slots.insert((b, list(&orders, Keeps::All)), 4);
        slots.insert((a, ListName::Product(1)), 5);
        // Inserting a held list again (a build replacing its slot) adds no second member.
        slots.insert((a, list(&orders, Keeps::All)), 6);
        let count = |slots: &Slots<u8>, store, kind: &[u8]| slots.members_of(store, kind).len();
        assert_eq!((count(&slots, a, &orders), count(&slots, a, &scoped), count(&slots, b, &orders)), (2, 1, 1));
        assert_eq!(slots.members_of(a, &orders).iter().filter(|m| m.is_view()).count(), 1);
        assert_eq!(count(&slots, a, &[0, 7]), 0, "a kind is matched whole");

        slots.remove(&(a, list(&orders, Keeps::All)));
        assert_eq!(count(&slots, a, &orders), 1);
        slots.retain(|(store, _), _| *store != a);
        assert_eq!((count(&slots, a, &orders), count(&slots, a, &scoped), count(&slots, b, &orders)), (0, 0, 1));
        assert!(!slots.members.contains_key(&a), "a store without lists keeps no entry");
        assert_eq!(slots.values().count(), 1);
    }
}
