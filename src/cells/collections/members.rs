//! A collection's members: the rows that keep a collection's products in its order and a
//! product's collections, kept in step by every collection and product write.

use super::*;

fn member_key(store: Uuid, collection: Uuid, segment: &[u8], product: Uuid) -> Vec<u8> {
    let mut k = Key::store(store).id(collection).into_vec();
    k.extend_from_slice(segment);
    k.extend_from_slice(product.as_bytes());
    k
}

pub(super) fn reverse_key(store: Uuid, product: Uuid, collection: Uuid) -> Vec<u8> {
    Key::store(store).id(product).id(collection).into_vec()
}

/// The sort segment of a membership row.
pub(super) fn segment(kind: SortKind, p: Option<&Product>, position: i64) -> Vec<u8> {
    match (kind, p) {
        (SortKind::Title, Some(p)) => Key::default().str(&title_key(&p.title)).into_vec(),
        (SortKind::Price, Some(p)) => Key::default().i64(p.price()).into_vec(),
        (SortKind::Created, Some(p)) => Key::default().i64(p.created_at).into_vec(),
        _ => Key::default().i64(position).into_vec(),
    }
}

/// A membership as recorded in its reverse row: the sort kind and segment of the ordered row.
type Placement = (SortKind, Vec<u8>);

fn placement_of(bytes: &[u8]) -> ApiResult<Placement> {
    let (&kind, segment) = bytes.split_first().ok_or_else(|| ApiError::internal("empty membership row"))?;
    let kind = SortKind::from_u8(kind).ok_or_else(|| ApiError::internal("unknown membership sort kind"))?;
    Ok((kind, segment.to_vec()))
}

/// Writes a membership from `old` to `new` placement (absent: not a member).
pub(super) fn set_member(
    tx: &mut Tx,
    store: Uuid,
    collection: Uuid,
    product: Uuid,
    old: Option<&Placement>,
    new: Option<&Placement>,
) -> ApiResult<()> {
    if let Some((_, seg)) = old {
        tx.delete(COLLECTION_PRODUCTS, &member_key(store, collection, seg, product))?;
    }
    match new {
        Some((kind, seg)) => {
            tx.put(COLLECTION_PRODUCTS, &member_key(store, collection, seg, product), &[])?;
            let mut v = vec![*kind as u8];
            v.extend_from_slice(seg);
            tx.put(PRODUCT_COLLECTIONS, &reverse_key(store, product, collection), &v)
        }
        None => tx.delete(PRODUCT_COLLECTIONS, &reverse_key(store, product, collection)),
    }
}

pub(super) fn placement(tx: &Tx, store: Uuid, collection: Uuid, product: Uuid) -> ApiResult<Option<Placement>> {
    tx.get(PRODUCT_COLLECTIONS, &reverse_key(store, product, collection))?.map(|b| placement_of(&b)).transpose()
}

/// Adds `p` at the end of `c` (or in its sort place); `false` when it already was a member.
pub(super) fn add_member(tx: &mut Tx, store: Uuid, c: &mut Collection, p: &Product) -> ApiResult<bool> {
    if placement(tx, store, c.id, p.id)?.is_some() {
        return Ok(false);
    }
    let kind = c.sort_order.kind().0;
    let at = (kind, segment(kind, Some(p), c.next_position));
    c.next_position += 1;
    set_member(tx, store, c.id, p.id, None, Some(&at))?;
    c.product_count += 1;
    Ok(true)
}

/// Removes `product` from `c`; `false` when it was not a member.
pub(super) fn remove_member(tx: &mut Tx, store: Uuid, c: &mut Collection, product: Uuid) -> ApiResult<bool> {
    let Some(at) = placement(tx, store, c.id, product)? else { return Ok(false) };
    set_member(tx, store, c.id, product, Some(&at), None)?;
    c.product_count = c.product_count.saturating_sub(1);
    Ok(true)
}

/// The members of `c` in its current display order.
pub(super) fn members_in_order(tx: &Tx, store: Uuid, c: &Collection) -> ApiResult<Vec<Uuid>> {
    let rows = tx.scan_prefix(COLLECTION_PRODUCTS, &row_key(store, c.id), None, usize::MAX)?;
    let mut ids: Vec<Uuid> = rows.iter().filter_map(|(k, _)| trailing_id(k)).collect();
    if c.sort_order.kind().1 {
        ids.reverse();
    }
    Ok(ids)
}

pub(super) fn load_live(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Collection> {
    let c = record::must_load::<Collection>(tx, store, id)?;
    if c.deleted_at.is_some() { Err(ApiError::not_found()) } else { Ok(c) }
}

pub(super) fn load_product(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Option<Product>> {
    tx.get(PRODUCTS, &row_key(store, id))?.map(|b| decode(&b)).transpose()
}

/// Re-keys every membership row of `c` for `order`: manual keeps the current display order as
/// positions 0..n, the other orders take their key from each product.
pub(super) fn resort(tx: &mut Tx, store: Uuid, c: &mut Collection, order: ProductOrder) -> ApiResult<()> {
    let ids = members_in_order(tx, store, c)?;
    let kind = order.kind().0;
    for (i, pid) in ids.iter().enumerate() {
        let old = placement(tx, store, c.id, *pid)?;
        let p = if kind == SortKind::Position { None } else { load_product(tx, store, *pid)? };
        let new = (kind, segment(kind, p.as_ref(), i as i64));
        set_member(tx, store, c.id, *pid, old.as_ref(), Some(&new))?;
    }
    c.next_position = ids.len() as i64;
    c.sort_order = order;
    Ok(())
}

/// Evaluates every product of the store against a smart collection's rules (creation, rule
/// change): matching products join, the others leave. Products are read in chunks so a large
/// store never sits in memory at once.
pub(super) fn refresh_smart(tx: &mut Tx, store: Uuid, c: &mut Collection) -> ApiResult<()> {
    let prefix = Key::store(store).into_vec();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let chunk = tx.scan_prefix(PRODUCTS, &prefix, after.as_deref(), CHUNK)?;
        let Some((last, _)) = chunk.last() else { break };
        after = Some(last.clone());
        for (_, bytes) in &chunk {
            let p: Product = decode(bytes)?;
            if c.rules.matches(&p) {
                add_member(tx, store, c, &p)?;
            } else {
                remove_member(tx, store, c, p.id)?;
            }
        }
    }
    Ok(())
}

/// Keeps collections in step with a product write (`old`/`new` as in `write_product`): a
/// deleted product leaves every collection, a changed one moves in title/price/created orders,
/// and every live smart collection re-evaluates it.
pub fn on_product_write(tx: &mut Tx, store: Uuid, old: Option<&Product>, new: Option<&Product>) -> ApiResult<()> {
    let Some(pid) = old.or(new).map(|p| p.id) else { return Ok(()) };
    let Some(n) = new else {
        for (k, v) in tx.scan_prefix(PRODUCT_COLLECTIONS, &row_key(store, pid), None, usize::MAX)? {
            let Some(cid) = trailing_id(&k) else { continue };
            let Some(before) = record::load::<Collection>(tx, store, cid)? else {
                // A membership without its collection must not block the product's delete.
                set_member(tx, store, cid, pid, Some(&placement_of(&v)?), None)?;
                continue;
            };
            let mut c = before.clone();
            remove_member(tx, store, &mut c, pid)?;
            record::write(tx, store, Some(&before), Some(&c))?;
        }
        return Ok(());
    };
    if let Some(o) = old
        && (title_key(&o.title) != title_key(&n.title) || o.price() != n.price() || o.created_at != n.created_at)
    {
        for (k, v) in tx.scan_prefix(PRODUCT_COLLECTIONS, &row_key(store, pid), None, usize::MAX)? {
            let Some(cid) = trailing_id(&k) else { continue };
            let at = placement_of(&v)?;
            let moved = (at.0, segment(at.0, Some(n), 0));
            if at.0 != SortKind::Position && moved != at {
                set_member(tx, store, cid, pid, Some(&at), Some(&moved))?;
            }
        }
    }
    for (k, v) in tx.scan_prefix(COLLECTION_RULES, &Key::store(store).into_vec(), None, usize::MAX)? {
        let Some(cid) = trailing_id(&k) else { continue };
        let rules: SmartRules = decode(&v)?;
        let belongs = rules.matches(n);
        if belongs == placement(tx, store, cid, pid)?.is_some() {
            continue;
        }
        let before = record::must_load::<Collection>(tx, store, cid)?;
        let mut c = before.clone();
        if belongs {
            add_member(tx, store, &mut c, n)?;
        } else {
            remove_member(tx, store, &mut c, pid)?;
        }
        record::write(tx, store, Some(&before), Some(&c))?;
    }
    Ok(())
}
