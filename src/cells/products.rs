//! Products in a cell. [`write_product`] is the one function that writes a product row and all
//! its secondary rows (handle, variant lookup, view, search outbox) and its list-order keys,
//! which live in memory (`storage::list_orders`) and are built from the product rows when a
//! store's list is first read.

use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::catalogs;
use crate::cells::collections;
use crate::cells::events;
use crate::cells::handles::{handle_key, resolve_handle};
use crate::cells::stock::levels;
use crate::cells::stores;
use crate::domain::product::*;
use crate::domain::stock::Actor;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{Fields, decode, encode};
use crate::storage::keys::{Key, trailing_id};
use crate::storage::list::{ListQuery, Listed};
use crate::storage::list_orders::{HeldList, ListName};
use crate::storage::ranked::Keys;
use crate::storage::read;
use crate::storage::record::{Filter, FilterValue, List, Listable, Sort};
use crate::storage::row_cache::Cached;
use crate::storage::tables::{PRODUCT_HANDLES, PRODUCT_SORTS, PRODUCT_VIEWS, PRODUCTS, VARIANTS};
use crate::storage::tx::Tx;

/// The product list, declared as every record list is: its sortable fields (by name; a tag is
/// the field's number in the in-memory list numbers) and its status filter. Its orders are not
/// rows in redb but lists held in memory (`storage::list_orders`), built from the
/// `product_sorts` rows one list at a time: `order` is `None`.
impl Listable for ProductSorts {
    const LIST: List<ProductSorts> = List {
        order: None,
        sorts: &[
            Sort { name: "created_at", tag: 0, key: |s, k| k.i64(s.created_at) },
            Sort { name: "updated_at", tag: 1, key: |s, k| k.i64(s.updated_at) },
            Sort { name: "title", tag: 2, key: |s, k| k.str(&s.title) },
            Sort { name: "price", tag: 3, key: |s, k| k.i64(s.price) },
            Sort { name: "inventory", tag: 4, key: |s, k| k.i64(s.inventory) },
        ],
        default_sort: "created_at",
        summaries: "created_at",
        own_order: false,
        filters: &[Filter::enumerated::<Status>("status", |s| Some(FilterValue::Enum(s.status.name())), "the product's status")],
        ranges: &[],
        search: None,
    };
}

/// Status bucket 0 lists every product; buckets 1.. hold one status each.
const ANY: u8 = 0;

fn bucket(s: Status) -> u8 {
    s as u8 + 1
}

/// The number of the in-memory list holding sort field `field` of status bucket `bucket`.
fn list(field: u8, bucket: u8) -> u16 {
    u16::from(field) << 8 | u16::from(bucket)
}

/// The key of product `id` in the lists sorted by `field`: sort value ‖ id.
fn sort_key(sorts: &ProductSorts, field: u8, id: Uuid) -> Box<[u8]> {
    let sort = &ProductSorts::LIST.sorts[field as usize];
    (sort.key)(sorts, Key::default()).id(id).into_vec().into_boxed_slice()
}

/// Every list-order key of product `id` sorted by `sorts`: `(list, sort value ‖ id)` for each
/// sort field, in the list of every product and in the list of its status.
fn order_keys(sorts: &ProductSorts, id: Uuid) -> Vec<(u16, Box<[u8]>)> {
    let sorts_len = ProductSorts::LIST.sorts.len();
    let mut keys = Vec::with_capacity(sorts_len * 2);
    for field in 0..sorts_len as u8 {
        let key = sort_key(sorts, field, id);
        keys.push((list(field, bucket(sorts.status)), key.clone()));
        keys.push((list(field, ANY), key));
    }
    keys
}

/// The keys of list `which` of `store`, read from its committed `product_sorts` rows in parts
/// read at once, packed as they are read (one buffer per part, no allocation per key).
fn stored_list_keys(txn: &redb::ReadTransaction, store: Uuid, which: u16) -> ApiResult<Vec<Keys>> {
    let (field, wanted) = ((which >> 8) as u8, (which & 0xFF) as u8);
    // The list number may come from the restart hint, a file: one naming no sort lists nothing.
    let Some(sort) = ProductSorts::LIST.sorts.get(field as usize) else { return Ok(Vec::new()) };
    /// A part's keys, with one row value and one key buffer reused from row to row.
    struct Part {
        keys: Keys,
        sorts: ProductSorts,
        scratch: Vec<u8>,
    }
    let new = || Part {
        keys: Keys::default(),
        sorts: ProductSorts { created_at: 0, updated_at: 0, title: String::new(), price: 0, inventory: 0, status: Status::Draft },
        scratch: Vec::new(),
    };
    let parts =
        read::scan_split(txn, PRODUCT_SORTS, Key::store(store).bytes(), read::build_threads(), new, |p: &mut Part, k, v| {
            let Some(id) = trailing_id(k) else { return Ok(()) };
            if read_sorts(v, &mut p.sorts).is_none() {
                // Read whole; a row that does not decode is logged by the codec and left out.
                let Ok(whole) = decode::<ProductSorts>(v) else { return Ok(()) };
                p.sorts = whole;
            }
            if wanted == ANY || wanted == bucket(p.sorts.status) {
                let key = (sort.key)(&p.sorts, Key::reuse(std::mem::take(&mut p.scratch))).id(id);
                p.keys.push(key.bytes());
                p.scratch = key.into_vec();
            }
            Ok(())
        })?;
    Ok(parts.into_iter().map(|p| p.keys).collect())
}

/// Reads a `product_sorts` row into `into`, fields in their bincode order, reusing its title's
/// buffer: a build reads every row of a store, and decoding each whole would allocate a title
/// per row. `None` when the row does not read so (the caller then decodes it whole).
fn read_sorts(row: &[u8], into: &mut ProductSorts) -> Option<()> {
    let mut f = Fields::new(row);
    into.created_at = f.i64()?;
    into.updated_at = f.i64()?;
    let title = f.str()?;
    into.title.clear();
    into.title.push_str(title);
    into.price = f.i64()?;
    into.inventory = f.i64()?;
    into.status = match f.variant()? {
        0 => Status::Draft,
        1 => Status::Active,
        2 => Status::Archived,
        _ => return None,
    };
    f.is_done().then_some(())
}

/// A product's two stored forms: the view row (status byte, then the JSON view) and the record.
#[derive(Clone)]
pub struct Rendered {
    pub view: Vec<u8>,
    pub record: Vec<u8>,
}

impl Rendered {
    pub fn of(p: &Product) -> ApiResult<Rendered> {
        let mut view = vec![p.status as u8];
        serde_json::to_writer(&mut view, &p.view()).map_err(ApiError::internal)?;
        Ok(Rendered { view, record: encode(p)? })
    }

    /// The JSON view alone, as answered to clients.
    pub fn json(&self) -> &[u8] {
        self.view.get(1..).unwrap_or_default()
    }
}

/// A stored view row: the product's status byte, then its JSON view.
#[derive(Clone)]
pub struct ViewRow(pub Arc<[u8]>);

impl ViewRow {
    pub fn status(&self) -> Option<Status> {
        self.0.first().and_then(|b| Status::NAMES.get(*b as usize)).and_then(|n| Status::parse(n))
    }
}

impl AsRef<[u8]> for ViewRow {
    /// The JSON view alone, as answered to clients.
    fn as_ref(&self) -> &[u8] {
        self.0.get(1..).unwrap_or_default()
    }
}

/// Writes `new` in place of `old` (either may be absent: create, delete) with every secondary row
/// and the events it makes, at `now`.
pub fn write_product(tx: &mut Tx, store: Uuid, old: Option<&Product>, new: Option<&Product>, now: i64) -> ApiResult<()> {
    let rendered = new.map(Rendered::of).transpose()?;
    write_rendered(tx, store, old, new.zip(rendered.as_ref()), now)
}

/// Writes the rows every product keeps beside its record (handle, variants, view, sort values:
/// what [`write_rendered`] writes with it), in every store, from the products: a restore's step,
/// as the backup leaves them out (`tables::REBUILT`).
pub fn refill_derived(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    use redb::ReadableTable;
    let corrupt = |e: ApiError| redb::Error::Corrupted(format!("products: {e}"));
    let products = txn.open_table(PRODUCTS.def)?;
    let (mut handles, mut variants) = (txn.open_table(PRODUCT_HANDLES.def)?, txn.open_table(VARIANTS.def)?);
    let (mut views, mut sorts) = (txn.open_table(PRODUCT_VIEWS.def)?, txn.open_table(PRODUCT_SORTS.def)?);
    for item in products.iter()? {
        let (k, v) = item?;
        let Some(store) = crate::storage::keys::leading_store(k.value()) else { continue };
        let p: Product = decode(v.value()).map_err(corrupt)?;
        let id = Key::store(store).id(p.id).into_vec();
        handles.insert(handle_key(store, &p.handle).as_slice(), p.id.as_bytes().as_slice())?;
        for var in &p.variants {
            variants.insert(Key::store(store).id(var.id).bytes(), p.id.as_bytes().as_slice())?;
        }
        views.insert(id.as_slice(), Rendered::of(&p).map_err(corrupt)?.view.as_slice())?;
        sorts.insert(id.as_slice(), encode(&ProductSorts::of(&p)).map_err(corrupt)?.as_slice())?;
    }
    Ok(())
}

/// The events of a product write: created, updated or deleted (a change of stock has its own,
/// per level: `stock::levels`).
fn product_events(
    tx: &mut Tx,
    store: Uuid,
    old: Option<&Product>,
    new: Option<(&Product, &Rendered)>,
    now: i64,
) -> ApiResult<()> {
    match (old, new) {
        (None, Some((_, r))) => events::append(tx, store, "product.created", r.json().to_vec(), now)?,
        (Some(_), Some((_, r))) => events::append(tx, store, "product.updated", r.json().to_vec(), now)?,
        (Some(o), None) => events::append_json(tx, store, "product.deleted", &serde_json::json!({"id": o.id}), now)?,
        (None, None) => {}
    }
    Ok(())
}

/// [`write_product`] with the new product already rendered (creates render it before they queue,
/// so the writer thread, which every write of the cell waits on, does not).
fn write_rendered(
    tx: &mut Tx,
    store: Uuid,
    old: Option<&Product>,
    new: Option<(&Product, &Rendered)>,
    now: i64,
) -> ApiResult<()> {
    product_events(tx, store, old, new, now)?;
    let (new, rendered) = (new.map(|(p, _)| p), new.map(|(_, r)| r));
    // The search document follows through the outbox, committed with the row itself. A write
    // that leaves it as it was (a change of stock: every order placed or shipped) queues nothing,
    // so the indexer neither reads the product nor commits the index again for it.
    if let Some(id) = new.or(old).map(|p| p.id) {
        if !matches!((old, new), (Some(o), Some(n)) if crate::search::schema::same_document(o, n)) {
            crate::search::outbox_append(tx, store, id)?;
        }
        tx.row_changed(store, id);
    }
    // Smart collections, collection orders and catalog counts follow in the same transaction.
    collections::on_product_write(tx, store, old, new)?;
    catalogs::on_product_write(tx, store, old, new)?;
    // The lists and the sort row change only when a sort value or the status does (a stock
    // change does; a new description does not).
    let (old_sorts, new_sorts) = (old.map(ProductSorts::of), new.map(ProductSorts::of));
    if old_sorts != new_sorts {
        if let (Some(o), Some(sorts)) = (old, &old_sorts) {
            for (list, key) in order_keys(sorts, o.id) {
                tx.order_remove(store, ListName::Product(list), key);
            }
        }
        match (new, &new_sorts) {
            (Some(n), Some(sorts)) => {
                for (list, key) in order_keys(sorts, n.id) {
                    tx.order_insert(store, ListName::Product(list), key);
                }
                tx.put(PRODUCT_SORTS, Key::store(store).id(n.id).bytes(), &encode(sorts)?)?;
            }
            _ => {
                if let Some(o) = old {
                    tx.delete(PRODUCT_SORTS, Key::store(store).id(o.id).bytes())?;
                }
            }
        }
    }
    // The handle and variant rows only where they change (both name this product): a stock or
    // price change, every order's, leaves them as they are and two tables fewer in the commit.
    if old.map(|o| &o.handle) != new.map(|n| &n.handle) {
        if let Some(o) = old {
            tx.delete(PRODUCT_HANDLES, &handle_key(store, &o.handle))?;
        }
        if let Some(n) = new {
            tx.put(PRODUCT_HANDLES, &handle_key(store, &n.handle), n.id.as_bytes())?;
        }
    }
    let has = |p: Option<&Product>, id: Uuid| p.is_some_and(|p| p.variants.iter().any(|v| v.id == id));
    for v in old.iter().flat_map(|o| &o.variants).filter(|v| !has(new, v.id)) {
        tx.delete(VARIANTS, Key::store(store).id(v.id).bytes())?;
    }
    if let Some(n) = new {
        for v in n.variants.iter().filter(|v| !has(old, v.id)) {
            tx.put(VARIANTS, Key::store(store).id(v.id).bytes(), n.id.as_bytes())?;
        }
    }
    match new {
        Some(n) => {
            let r = rendered.ok_or_else(|| ApiError::internal("a written product is rendered"))?;
            tx.put(PRODUCT_VIEWS, Key::store(store).id(n.id).bytes(), &r.view)?;
            tx.put(PRODUCTS, Key::store(store).id(n.id).bytes(), &r.record)
        }
        None => match old {
            Some(o) => {
                tx.delete(PRODUCT_VIEWS, Key::store(store).id(o.id).bytes())?;
                tx.delete(PRODUCTS, Key::store(store).id(o.id).bytes())
            }
            None => Ok(()),
        },
    }
}

/// A product write made by a member or the service: written quantities go to the default
/// location first ([`levels::sync_written`]), then the product is written with its variants'
/// sellable sums.
fn write_as(
    tx: &mut Tx,
    store: Uuid,
    old: Option<&Product>,
    new: Option<Product>,
    actor: Actor,
    now: i64,
) -> ApiResult<Option<Product>> {
    let sums = levels::sync_written(tx, store, old, new.as_ref(), actor, now)?;
    let new = new.map(|mut p| {
        for (id, sum) in sums {
            if let Some(v) = p.variants.iter_mut().find(|v| v.id == id) {
                v.inventory_quantity = sum;
            }
        }
        p
    });
    write_product(tx, store, old, new.as_ref(), now)?;
    Ok(new)
}

/// Moves the sellable sums of some variants of `product` (by how much each one's available at
/// sellable locations moved), inside the write that moved them. A product gone meanwhile has
/// nothing to move.
pub fn move_sellable(tx: &mut Tx, store: Uuid, product: Uuid, deltas: &[(Uuid, i64)], now: i64) -> ApiResult<()> {
    let Some(bytes) = tx.get(PRODUCTS, Key::store(store).id(product).bytes())? else { return Ok(()) };
    let old: Product = decode(&bytes)?;
    let mut new = old.clone();
    for (variant, d) in deltas {
        if let Some(v) = new.variants.iter_mut().find(|v| v.id == *variant) {
            v.inventory_quantity = v.inventory_quantity.saturating_add(*d);
            v.updated_at = now;
        }
    }
    new.updated_at = now;
    write_product(tx, store, Some(&old), Some(&new), now)
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Product> {
    let bytes = tx.get(PRODUCTS, Key::store(store).id(id).bytes())?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
}

/// Creates a product and answers it with its rendered JSON view (the bytes stored in
/// `product_views`, which the 201 answers as they are).
pub async fn create_product(cell: &Cell, store: Uuid, input: CreateProduct, actor: Actor) -> ApiResult<(Product, Vec<u8>)> {
    let currency = stores::store_settings_cached(cell, store)?.currency;
    validate_create(&input, currency)?;
    let now = cell.clock.now_ms();
    let variants = if input.variants.is_empty() {
        vec![new_variant(&VariantInput::default(), input.price, &[], cell.clock.new_id(), now)]
    } else {
        input.variants.iter().map(|v| new_variant(v, input.price, &input.options, cell.clock.new_id(), now)).collect()
    };
    let title = input.title.trim().to_string();
    let base = slugify(&title);
    let requested = input.handle;
    let draft = Product {
        id: cell.clock.new_id(),
        // Rendered with the handle it gets unless another product holds that one meanwhile;
        // the writer renders again only in that case.
        handle: requested.clone().unwrap_or_else(|| base.clone()),
        title,
        description: input.description,
        vendor: input.vendor.trim().to_string(),
        product_type: input.product_type.trim().to_string(),
        tags: input.tags.iter().map(|t| t.trim().to_string()).collect(),
        status: input.status.as_deref().and_then(Status::parse).unwrap_or(Status::Draft),
        category_id: input.category_id,
        options: input.options,
        variants,
        currency,
        created_at: now,
        updated_at: now,
    };
    let rendered = Rendered::of(&draft)?;
    let draft = Arc::new((draft, rendered));
    let queued = draft.clone();
    // The writer answers only what differs from the draft: a handle taken meanwhile.
    let moved: Option<(Product, Rendered)> = cell
        .writer
        .write(Some(store), move |tx| {
            let (draft, rendered) = &*queued;
            let handle = resolve_handle(tx, PRODUCT_HANDLES, store, draft.id, requested.as_deref(), &base, "product")?;
            // Every variant is new: its sellable sum is the number written, at the default
            // location, whose level follows the product's own row and event.
            if handle == draft.handle {
                write_rendered(tx, store, None, Some((draft, rendered)), now)?;
                levels::sync_written(tx, store, None, Some(draft), actor, now)?;
                return Ok(None);
            }
            let mut p = draft.clone();
            p.handle = handle;
            let fresh = Rendered::of(&p)?;
            write_rendered(tx, store, None, Some((&p, &fresh)), now)?;
            levels::sync_written(tx, store, None, Some(&p), actor, now)?;
            Ok(Some((p, fresh)))
        })
        .await?;
    let (p, view) = match moved {
        Some((p, r)) => (p, r.json().to_vec()),
        None => {
            let (p, r) = Arc::try_unwrap(draft).unwrap_or_else(|shared| (shared.0.clone(), shared.1.clone()));
            let view = r.json().to_vec();
            (p, view)
        }
    };
    Ok((p, view))
}

pub fn product(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<Product> {
    read::get(&cell.read()?, PRODUCTS, Key::store(store).id(id).bytes())?.ok_or_else(ApiError::not_found)
}

/// A page of products (their rendered JSON views) as `q` asks, with the total, from the
/// store's in-memory list orders (built off the async workers when not held). Several
/// statuses merge their lists up to the page's end: a deep page of such a list costs its
/// offset.
pub async fn list_product_views(cell: &Cell, store: Uuid, q: &ListQuery) -> ApiResult<Listed<ViewRow>> {
    let field = ProductSorts::LIST.sorts.iter().position(|f| f.name == q.sort).unwrap_or(0) as u8;
    let statuses: &[Vec<u8>] = q.filters.first().map(|(_, values)| values.as_slice()).unwrap_or_default();
    let status = |v: &Vec<u8>| std::str::from_utf8(v).ok().and_then(Status::parse);
    let every = Status::NAMES.iter().all(|n| statuses.iter().any(|v| v.eq_ignore_ascii_case(n.as_bytes())));
    let (ids, total) = match statuses {
        // One list answers: every product, or one status.
        _ if statuses.is_empty() || every || statuses.len() == 1 => {
            let one = statuses.first().filter(|_| !every).and_then(status);
            let which = list(field, one.map(bucket).unwrap_or(ANY));
            let (offset, limit, desc) = (q.offset, q.limit, q.desc);
            read_list(cell, store, which, move |held| {
                let (keys, total) = held.page(desc, offset, limit);
                (keys.into_iter().filter_map(trailing_id).collect::<Vec<_>>(), total)
            })
            .await?
        }
        _ => {
            let end = q.offset.saturating_add(q.limit);
            let mut keys: Vec<Box<[u8]>> = Vec::new();
            let mut total = 0;
            for b in statuses.iter().filter_map(status).map(bucket) {
                let desc = q.desc;
                let (mut head, n) = read_list(cell, store, list(field, b), move |held| {
                    let (keys, total) = held.page(desc, 0, end);
                    (keys.into_iter().map(Box::from).collect::<Vec<Box<[u8]>>>(), total)
                })
                .await?;
                keys.append(&mut head);
                total += n;
            }
            keys.sort_unstable();
            if q.desc {
                keys.reverse();
            }
            (keys.iter().skip(q.offset).take(q.limit).filter_map(|k| trailing_id(k)).collect(), total)
        }
    };
    // Read after the page: the orders hold only committed writes, so every id of the page
    // has its row unless its product was deleted meanwhile.
    let items = view_rows(cell, store, &ids)?.into_iter().flatten().map(ViewRow).collect();
    Ok(Listed { items, total: total as u64 })
}

/// Reads list `which` of `store` with `f`, building it first when it is not held.
async fn read_list<T: Send + 'static>(
    cell: &Cell,
    store: Uuid,
    which: u16,
    f: impl FnOnce(&HeldList) -> T + Send + 'static,
) -> ApiResult<T> {
    let db = cell.db.clone();
    cell.writer
        .orders
        .read(
            (store, ListName::Product(which)),
            cell.clock.now_ms(),
            move || stored_list_keys(&redb::ReadableDatabase::begin_read(&*db)?, store, which),
            f,
        )
        .await
}

/// Builds list `which` of `store` if it is not held (a restart's warm-up).
pub async fn warm_product_list(cell: &Cell, store: Uuid, which: u16) -> ApiResult<()> {
    read_list(cell, store, which, |_| ()).await
}

/// The stored view rows of `ids` (in order; `None` for a product that does not exist),
/// from the cell's row cache where held, else from one snapshot taken after the lookups.
pub fn view_rows(cell: &Cell, store: Uuid, ids: &[Uuid]) -> ApiResult<Vec<Option<Arc<[u8]>>>> {
    let cache = &cell.writer.rows;
    let mut out = Vec::with_capacity(ids.len());
    let mut misses = Vec::new();
    for (i, found) in cache.get_all(store, ids).enumerate() {
        match found {
            Cached::Hit(row) => out.push(Some(row)),
            Cached::Miss(epoch) => {
                out.push(None);
                misses.push((i, epoch));
            }
        }
    }
    if misses.is_empty() {
        return Ok(out);
    }
    let txn = cell.read()?;
    let views = txn.open_table(PRODUCT_VIEWS.def)?;
    for (i, epoch) in misses {
        if let Some(v) = views.get(Key::store(store).id(ids[i]).bytes())? {
            let row: Arc<[u8]> = Arc::from(v.value());
            cache.fill(store, ids[i], epoch, row.clone());
            out[i] = Some(row);
        }
    }
    Ok(out)
}

/// One product's rendered JSON view and its status.
pub fn product_view(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<(Status, ViewRow)> {
    let row = view_rows(cell, store, &[id])?.pop().flatten().ok_or_else(ApiError::not_found)?;
    let row = ViewRow(row);
    row.status().map(|s| (s, row)).ok_or_else(|| ApiError::internal("malformed product view"))
}

pub async fn update_product(cell: &Cell, store: Uuid, id: Uuid, update: UpdateProduct) -> ApiResult<Product> {
    validate_update(&update, &product(cell, store, id)?)?;
    let update = Arc::new(update);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?;
            validate_update(&update, &old)?;
            let mut p = old.clone();
            let u = &update;
            if let Some(t) = &u.title {
                p.title = t.trim().to_string();
            }
            if let Some(d) = &u.description {
                p.description = d.clone();
            }
            if let Some(v) = &u.vendor {
                p.vendor = v.trim().to_string();
            }
            if let Some(t) = &u.product_type {
                p.product_type = t.trim().to_string();
            }
            if let Some(tags) = &u.tags {
                p.tags = tags.iter().map(|t| t.trim().to_string()).collect();
            }
            if let Some(s) = u.status.as_deref().and_then(Status::parse) {
                p.status = s;
            }
            if let Some(c) = &u.category_id {
                p.category_id = c.clone();
            }
            if let (Some(price), Some(v)) = (u.price, p.variants.first_mut()) {
                v.price = price.amount;
                v.updated_at = now;
            }
            if let Some(h) = &u.handle {
                p.handle = resolve_handle(tx, PRODUCT_HANDLES, store, id, Some(h), &p.title, "product")?;
            }
            p.updated_at = now;
            write_product(tx, store, Some(&old), Some(&p), now)?;
            Ok(p)
        })
        .await
}

pub async fn delete_product(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?;
            write_as(tx, store, Some(&old), None, Actor::System, now).map(drop)
        })
        .await
}

pub async fn add_variant(cell: &Cell, store: Uuid, id: Uuid, input: VariantInput, actor: Actor) -> ApiResult<(Product, Uuid)> {
    validate_new_variant(&input, &product(cell, store, id)?)?;
    let (vid, now) = (cell.clock.new_id(), cell.clock.now_ms());
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?;
            validate_new_variant(&input, &old)?;
            let mut p = old.clone();
            p.variants.push(new_variant(&input, None, &p.options, vid, now));
            p.updated_at = now;
            let p = write_as(tx, store, Some(&old), Some(p), actor, now)?.ok_or_else(|| ApiError::internal("written"))?;
            Ok((p, vid))
        })
        .await
}

pub async fn update_variant(
    cell: &Cell,
    store: Uuid,
    id: Uuid,
    variant: Uuid,
    update: UpdateVariant,
    actor: Actor,
) -> ApiResult<Product> {
    let update = Arc::new(update);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?;
            let i = old.variants.iter().position(|v| v.id == variant).ok_or_else(ApiError::not_found)?;
            let mut p = old.clone();
            p.variants[i] = apply_variant_update(&update, &old, &old.variants[i], now)?;
            p.updated_at = now;
            write_as(tx, store, Some(&old), Some(p), actor, now)?.ok_or_else(|| ApiError::internal("written"))
        })
        .await
}

pub async fn delete_variant(cell: &Cell, store: Uuid, id: Uuid, variant: Uuid) -> ApiResult<()> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?;
            let i = old.variants.iter().position(|v| v.id == variant).ok_or_else(ApiError::not_found)?;
            if old.variants.len() == 1 {
                return Err(ApiError::msg(Code::BUSINESS_RULE, "a product keeps at least one variant"));
            }
            let mut p = old.clone();
            p.variants.remove(i);
            p.updated_at = now;
            write_as(tx, store, Some(&old), Some(p), Actor::System, now).map(drop)
        })
        .await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn status() -> impl Strategy<Value = Status> {
        prop_oneof![Just(Status::Draft), Just(Status::Active), Just(Status::Archived)]
    }

    proptest! {
        /// A row read in place is the row the codec wrote, at every size of every number.
        #[test]
        fn sort_rows_read_in_place_as_the_codec_wrote_them(
            created_at in any::<i64>(),
            updated_at in any::<i64>(),
            title in ".{0,80}",
            price in any::<i64>(),
            inventory in prop_oneof![any::<i64>(), -300i64..300],
            status in status(),
        ) {
            let row = ProductSorts { created_at, updated_at, title, price, inventory, status };
            let mut read = ProductSorts { created_at: 1, updated_at: 1, title: "old".into(), price: 1, inventory: 1, status: Status::Draft };
            prop_assert!(read_sorts(&encode(&row).unwrap(), &mut read).is_some());
            prop_assert_eq!(read, row);
        }
    }

    #[test]
    fn a_list_number_naming_no_sort_lists_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::storage::open(&dir.path().join("cell.redb"), crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
        let store = Uuid::from_u128(3);
        let txn = db.begin_write().unwrap();
        let row =
            ProductSorts { created_at: 1, updated_at: 1, title: "t".into(), price: 1, inventory: 1, status: Status::Active };
        txn.open_table(PRODUCT_SORTS.def)
            .unwrap()
            .insert(Key::store(store).id(Uuid::from_u128(1)).bytes(), encode(&row).unwrap().as_slice())
            .unwrap();
        txn.commit().unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let keys = |which| stored_list_keys(&txn, store, which).unwrap().iter().map(Keys::len).sum::<usize>();
        assert_eq!(keys(list(0, ANY)), 1);
        assert_eq!(keys(list(200, ANY)), 0, "a damaged hint's number");
    }

    /// A write queues the product for indexing only when its search document changes: an order
    /// lowering its stock does not make the indexer read it and commit the index again.
    #[tokio::test]
    async fn only_a_write_changing_the_search_document_queues_the_product() {
        use redb::ReadableTableMetadata;
        let dir = tempfile::tempdir().unwrap();
        let memory = crate::memory::Shares::of_one_cell(64 << 20).cell;
        let cell = Cell::open("test", dir.path(), crate::clock::Clock::system(), &memory).unwrap();
        let store = Uuid::from_u128(7);
        let queued = cell
            .writer
            .write(Some(store), move |tx| {
                // Counted inside the one transaction: the indexer cannot have drained them yet.
                let outbox = |tx: &Tx| Ok::<_, ApiError>(tx.raw().open_table(crate::storage::tables::OUTBOX)?.len()?);
                let created = Product::sample();
                let mut sold = created.clone();
                sold.variants[0].inventory_quantity -= 1;
                let mut renamed = sold.clone();
                renamed.title = "Garden Bench".into();
                let mut counts = vec![outbox(tx)?];
                for (old, new) in [(None, &created), (Some(&created), &sold), (Some(&sold), &renamed)] {
                    write_product(tx, store, old, Some(new), 1)?;
                    counts.push(outbox(tx)?);
                }
                Ok(counts)
            })
            .await
            .unwrap();
        assert_eq!(queued, [0, 1, 1, 2], "created and renamed are queued, the stock change is not");
        cell.close();
    }

    #[test]
    fn a_row_that_does_not_read_in_place_is_refused() {
        let row =
            ProductSorts { created_at: 5, updated_at: 6, title: "t".into(), price: 7, inventory: 8, status: Status::Active };
        let mut bytes = encode(&row).unwrap();
        let mut into = row.clone();
        bytes.push(0);
        assert!(read_sorts(&bytes, &mut into).is_none(), "a longer row");
        assert!(read_sorts(&bytes[..bytes.len() - 3], &mut into).is_none(), "a shorter one");
    }
}
