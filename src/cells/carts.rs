//! Carts in a cell: the record (never listed; written through `storage::record`), line changes
//! as write jobs, and the priced view. A cart is priced on every read through [`Cell::price`]; lines whose variant can no
//! longer be bought are listed apart instead of failing the whole cart.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use redb::ReadTransaction;
use serde::Serialize;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::calculate::{self, CalcLineInput, CalcRequest, CartContext, CartLineInput};
use crate::domain::cart::{Attributes, Cart};
use crate::domain::pricing::calc::Calculation;
use crate::domain::product::{Product, Status};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, List, Record};
use crate::storage::tables::{CARTS, PRODUCTS, StoreTable, VARIANTS};

impl Record for Cart {
    const TABLE: StoreTable = CARTS;
    const NAME: &'static str = "carts";
    const LIST: List<Self> = List::none();

    fn id(&self) -> Uuid {
        self.id
    }
}

/// What a line shows besides its price: the product and variant it names.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineInfo {
    pub title: String,
    pub variant_title: String,
    pub sku: Option<String>,
    #[serde(skip)]
    pub status: Status,
}

/// The products behind `variants`, each product decoded once. Unknown variants are absent.
pub fn line_infos(txn: &ReadTransaction, store: Uuid, variants: &[Uuid]) -> ApiResult<HashMap<Uuid, LineInfo>> {
    let mut products: HashMap<Uuid, Option<Product>> = HashMap::new();
    let mut out = HashMap::with_capacity(variants.len());
    for &v in variants {
        let Some(pid) = read::get_raw(txn, VARIANTS, Key::store(store).id(v).bytes())? else { continue };
        let pid = Uuid::from_slice(&pid).map_err(ApiError::internal)?;
        let p = match products.entry(pid) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(read::get(txn, PRODUCTS, Key::store(store).id(pid).bytes())?),
        };
        let Some(p) = p else { continue };
        if let Some(variant) = p.variants.iter().find(|x| x.id == v) {
            let info = LineInfo {
                title: p.title.clone(),
                variant_title: variant.title.clone(),
                sku: variant.sku.clone(),
                status: p.status,
            };
            out.insert(v, info);
        }
    }
    Ok(out)
}

/// Why a line cannot be bought by this caller, or `None` when it can.
pub fn unavailable(info: Option<&LineInfo>, shopper: bool) -> Option<&'static str> {
    match info.map(|i| i.status) {
        None => Some("the variant no longer exists"),
        Some(Status::Archived) => Some("the product is archived"),
        // Shoppers buy what the store sells; members may prepare orders of drafts.
        Some(Status::Draft) if shopper => Some("the variant no longer exists"),
        Some(_) => None,
    }
}

/// A line that was left out of the price, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnavailableLine {
    pub variant_id: Uuid,
    pub quantity: u32,
    pub reason: &'static str,
}

/// One priced cart line: the calculation's figures with what the line names.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CartLineView {
    #[serde(flatten)]
    pub priced: crate::domain::pricing::calc::LineResult,
    #[serde(flatten)]
    pub info: LineInfo,
    pub custom_attributes: Attributes,
}

/// `GET S/carts/{cartId}`: the cart with its calculation.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CartView {
    pub id: Uuid,
    pub line_items: Vec<CartLineView>,
    pub unavailable_line_items: Vec<UnavailableLine>,
    pub item_count: u32,
    pub subtotal: crate::domain::money::Money,
    pub discount: crate::domain::money::Money,
    pub shipping: crate::domain::money::Money,
    pub tax: crate::domain::money::Money,
    pub total: crate::domain::money::Money,
    pub taxes_included: bool,
    pub tax_lines: Vec<crate::domain::pricing::tax::TaxLine>,
    pub applied_discount_codes: Vec<String>,
    pub warnings: Vec<crate::domain::pricing::Warning>,
    pub created_at: String,
    pub updated_at: String,
}

pub fn cart(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<Cart> {
    cell.get::<Cart>(store, id)
}

pub async fn create_cart(cell: &Cell, store: Uuid) -> ApiResult<Cart> {
    let cart = Cart::new(cell.clock.new_id(), cell.clock.now_ms());
    let row = cart.clone();
    cell.writer.write(Some(store), move |tx| record::put(tx, store, &row)).await?;
    Ok(cart)
}

/// A discount `cart` context with a stored cart's lines in place of its `cartId`.
pub fn resolve_cart_context(cell: &Cell, store: Uuid, mut cart: CartContext) -> ApiResult<CartContext> {
    let Some(id) = cart.cart_id.take() else { return Ok(cart) };
    if !cart.line_items.is_empty() {
        return Err(ApiError::field("cart.lineItems", "give cart.cartId or cart.lineItems, not both"));
    }
    let stored = self::cart(cell, store, id).map_err(|_| ApiError::field("cart.cartId", "no such cart in this store"))?;
    cart.line_items = stored.lines.iter().map(|l| CartLineInput { variant_id: l.variant_id, quantity: l.quantity }).collect();
    Ok(cart)
}

/// Fails with a 400 naming `variantId` unless the caller may buy the variant.
pub fn check_purchasable(cell: &Cell, store: Uuid, variant: Uuid, shopper: bool) -> ApiResult<()> {
    let infos = line_infos(&cell.read()?, store, &[variant])?;
    match unavailable(infos.get(&variant), shopper) {
        Some(reason) => Err(ApiError::field("variantId", reason)),
        None => Ok(()),
    }
}

/// Adds a line (or to a line) of `cart`, creating the cart when `cart` is `None`.
/// Returns the cart and whether it was created.
pub async fn add_cart_item(
    cell: &Cell,
    store: Uuid,
    cart: Option<Uuid>,
    variant: Uuid,
    quantity: u32,
    attributes: Option<Attributes>,
    shopper: bool,
) -> ApiResult<(Cart, bool)> {
    check_purchasable(cell, store, variant, shopper)?;
    let now = cell.clock.now_ms();
    let new_id = cell.clock.new_id();
    cell.writer
        .write(Some(store), move |tx| {
            let (mut c, created) = match cart {
                Some(id) => (record::must_load::<Cart>(tx, store, id)?, false),
                None => (Cart::new(new_id, now), true),
            };
            c.add(variant, quantity, attributes.clone())?;
            c.updated_at = now;
            record::put(tx, store, &c)?;
            Ok((c, created))
        })
        .await
}

pub async fn update_cart_item(
    cell: &Cell,
    store: Uuid,
    cart: Uuid,
    variant: Uuid,
    quantity: u32,
    attributes: Option<Attributes>,
) -> ApiResult<Cart> {
    change_cart(cell, store, cart, move |c| c.set(variant, quantity, attributes.clone())).await
}

pub async fn remove_cart_item(cell: &Cell, store: Uuid, cart: Uuid, variant: Uuid) -> ApiResult<Cart> {
    change_cart(cell, store, cart, move |c| c.remove(variant)).await
}

async fn change_cart(
    cell: &Cell,
    store: Uuid,
    id: Uuid,
    change: impl Fn(&mut Cart) -> ApiResult<()> + Send + 'static,
) -> ApiResult<Cart> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let mut c = record::must_load::<Cart>(tx, store, id)?;
            change(&mut c)?;
            c.updated_at = now;
            record::put(tx, store, &c)?;
            Ok(c)
        })
        .await
}

/// The cart priced now. Lines that cannot be bought any more are listed in
/// `unavailableLineItems` and left out of the totals.
pub fn cart_view(cell: &Cell, store: Uuid, cart: Cart, shopper: bool) -> ApiResult<CartView> {
    let ids: Vec<Uuid> = cart.lines.iter().map(|l| l.variant_id).collect();
    let infos = line_infos(&cell.read()?, store, &ids)?;
    let mut buyable = Vec::new();
    let mut unavailable_lines = Vec::new();
    for l in &cart.lines {
        match unavailable(infos.get(&l.variant_id), shopper) {
            Some(reason) => unavailable_lines.push(UnavailableLine { variant_id: l.variant_id, quantity: l.quantity, reason }),
            None => buyable.push(l),
        }
    }
    let req = CalcRequest {
        lines: buyable.iter().map(|l| CalcLineInput { variant_id: l.variant_id, quantity: l.quantity, discount: None }).collect(),
        shopper,
        ..CalcRequest::default()
    };
    let calc: Calculation = calculate::price(cell, store, &req, cell.clock.now_ms())?.calculation;
    let line_items = calc
        .line_items
        .iter()
        .zip(&buyable)
        .filter_map(|(priced, l)| {
            Some(CartLineView {
                priced: priced.clone(),
                info: infos.get(&l.variant_id)?.clone(),
                custom_attributes: l.custom_attributes.clone(),
            })
        })
        .collect();
    Ok(CartView {
        id: cart.id,
        line_items,
        unavailable_line_items: unavailable_lines,
        item_count: buyable.iter().map(|l| l.quantity).sum(),
        subtotal: calc.subtotal,
        discount: calc.discount,
        shipping: calc.shipping,
        tax: calc.tax,
        total: calc.total,
        taxes_included: calc.taxes_included,
        tax_lines: calc.tax_lines,
        applied_discount_codes: calc.applied_discount_codes,
        warnings: calc.warnings,
        created_at: rfc3339(cart.created_at),
        updated_at: rfc3339(cart.updated_at),
    })
}
