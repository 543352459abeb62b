//! Fulfillment orders held, released, moved and cancelled; fulfills with tracking and the
//! tracking update; the order's fulfillment state and the shopper's shipping mails; scheduled
//! fulfillment orders opened by the clock; release and restock for what comes after the sale.

use std::collections::HashMap;
use std::time::Duration;

use hyper::Method;
use mail_parser::MessageParser;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::calculate::Shop;
use crate::checkout::{stocked, us_shipping};
use crate::mail::mails;
use crate::stock::{adjust, complete, create_location, levels};
use crate::support::*;

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// The fulfillment orders of `order`, oldest first.
async fn fos(c: &HttpClient, shop: &Shop, order: &str) -> Vec<Value> {
    let t = Some(shop.owner.token.as_str());
    let list = c.get(&shop.path(&format!("/orders/{order}/fulfillment-orders?sortOrder=asc")), t).await.expect(200).body;
    list["data"].as_array().unwrap().clone()
}

async fn order(c: &HttpClient, shop: &Shop, order: &str) -> Value {
    c.get(&shop.path(&format!("/orders/{order}")), Some(&shop.owner.token)).await.expect(200).body
}

/// POST `…/fulfillment-orders/{fo}/{action}`.
async fn act(c: &HttpClient, shop: &Shop, order: &str, fo: &str, action: &str, body: Value) -> Answer {
    let path = shop.path(&format!("/orders/{order}/fulfillment-orders/{fo}/{action}"));
    c.post(&path, Some(&shop.owner.token), body).await
}

/// (fulfilledQuantity, fulfillableQuantity) of the order's first line, and its status.
fn state(o: &Value) -> (i64, i64, String) {
    let l = &o["lineItems"][0];
    (
        l["fulfilledQuantity"].as_i64().unwrap(),
        l["fulfillableQuantity"].as_i64().unwrap(),
        o["fulfillmentStatus"].as_str().unwrap().to_string(),
    )
}

/// (status, remaining of the first line) of a fulfillment order.
fn fo_state(fo: &Value) -> (&str, i64) {
    (fo["status"].as_str().unwrap(), fo["lineItems"][0]["remainingQuantity"].as_i64().unwrap())
}

fn subject(eml: &[u8]) -> String {
    MessageParser::default().parse(eml).unwrap().subject().unwrap().to_string()
}

fn text(eml: &[u8]) -> String {
    MessageParser::default().parse(eml).unwrap().body_text(0).unwrap().into_owned()
}

#[tokio::test]
async fn an_order_is_held_moved_and_shipped_in_parts_with_tracking_and_mail() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, &shop).await;

    // Five mugs at home, four in the shed, two in the barn.
    let mug = stocked(c, &shop, "Mug", 1200, 5).await;
    let home = c.get(&shop.path("/locations"), t).await.expect(200).body["data"][0]["id"].as_str().unwrap().to_string();
    let shed = create_location(c, &shop, "Shed", 5).await;
    let barn = create_location(c, &shop, "Barn", 7).await;
    adjust(c, &shop, &mug, &shed, 4).await.expect(200);
    adjust(c, &shop, &mug, &barn, 2).await.expect(200);

    // Six: split by priority, five at home and one in the shed.
    let placed = complete(c, &shop, json!([{"variantId": mug, "quantity": 6}]), &rate).await.expect(201).body;
    let (oid, line) = (id(&placed), placed["lineItems"][0]["id"].as_str().unwrap().to_string());
    let split = fos(c, &shop, &oid).await;
    assert_eq!(split.len(), 2);
    let at = |l: &str| split.iter().find(|f| f["locationId"] == l).unwrap();
    let (at_home, in_shed) = (id(at(&home)), id(at(&shed)));
    assert_eq!((fo_state(at(&home)), fo_state(at(&shed))), (("OPEN", 5), ("OPEN", 1)));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 0, 5), (shed.clone(), 3, 1), (barn.clone(), 2, 0)]);

    // Held with a reason in any case; the order is ON_HOLD only once both are.
    let held = act(c, &shop, &oid, &in_shed, "hold", json!({"reason": "Incorrect_Address", "notes": "check the street"}))
        .await
        .expect(200)
        .body;
    assert_eq!(fo_state(&held), ("ON_HOLD", 1));
    assert_eq!(
        (held["hold"]["reason"].as_str(), held["hold"]["notes"].as_str()),
        (Some("INCORRECT_ADDRESS"), Some("check the street"))
    );
    assert_eq!(state(&order(c, &shop, &oid).await).2, "UNFULFILLED");
    act(c, &shop, &oid, &at_home, "hold", json!({"reason": "awaiting_payment"})).await.expect(200);
    assert_eq!(state(&order(c, &shop, &oid).await), (0, 6, "ON_HOLD".into()));
    let again = act(c, &shop, &oid, &at_home, "hold", json!({"reason": "other"})).await.expect(409);
    assert!(again.body["error"]["message"].as_str().unwrap().contains("ON_HOLD"), "{}", again.body);
    let unknown = act(c, &shop, &oid, &in_shed, "hold", json!({"reason": "bored"})).await.expect(400);
    assert_eq!(unknown.body["error"]["fields"][0]["field"], "reason");
    // Held: neither fulfilled nor moved.
    let refused = act(c, &shop, &oid, &at_home, "fulfill", json!({})).await.expect(409);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("ON_HOLD"), "{}", refused.body);
    act(c, &shop, &oid, &in_shed, "move", json!({"locationId": barn})).await.expect(409);
    for fo in [&at_home, &in_shed] {
        let released = act(c, &shop, &oid, fo, "release-hold", json!({})).await.expect(200).body;
        assert_eq!((released["status"].as_str(), released["hold"].is_null()), (Some("OPEN"), true));
    }
    let twice = act(c, &shop, &oid, &at_home, "release-hold", json!({})).await.expect(409);
    assert!(twice.body["error"]["message"].as_str().unwrap().contains("OPEN"), "{}", twice.body);
    assert_eq!(state(&order(c, &shop, &oid).await).2, "UNFULFILLED");

    // A move carries the commitment: the shed's unit goes back to available, the barn's is committed.
    let moved = act(c, &shop, &oid, &in_shed, "move", json!({"locationId": barn})).await.expect(200).body;
    assert_eq!((id(&moved), moved["locationId"].as_str(), fo_state(&moved)), (in_shed.clone(), Some(barn.as_str()), ("OPEN", 1)));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 0, 5), (shed.clone(), 4, 0), (barn.clone(), 1, 1)]);
    // Not to a location short of units (naming the variant), an inactive one, nor another store's.
    let short = act(c, &shop, &oid, &at_home, "move", json!({"locationId": barn})).await.expect(409);
    assert!(short.body["error"]["message"].as_str().unwrap().contains(&mug), "{}", short.body);
    let idle = create_location(c, &shop, "Idle", 9).await;
    c.patch(&shop.path(&format!("/locations/{idle}")), t, json!({"active": false})).await.expect(200);
    act(c, &shop, &oid, &at_home, "move", json!({"locationId": idle})).await.expect(422);
    let other = Shop::new(c).await;
    let foreign = c.get(&other.path("/locations"), Some(&other.owner.token)).await.expect(200).body["data"][0]["id"].clone();
    let far = act(c, &shop, &oid, &at_home, "move", json!({"locationId": foreign})).await.expect(400);
    assert_eq!(far.body["error"]["fields"][0]["field"], "locationId");
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 0, 5), (shed.clone(), 4, 0), (barn.clone(), 1, 1)]);

    // Two of the five at home ship with a UPS number: the link is built.
    let first = act(
        c,
        &shop,
        &oid,
        &at_home,
        "fulfill",
        json!({"lineItems": [{"lineItemId": line, "quantity": 2}], "tracking": {"number": "1Z999AA10123456784", "company": "UPS"}}),
    )
    .await
    .expect(201)
    .body;
    let shipment = &first["fulfillment"];
    assert_eq!(shipment["shipmentStatus"], "CONFIRMED");
    assert_eq!(shipment["lineItems"], json!([{"lineItemId": line, "variantId": mug, "quantity": 2}]));
    assert_eq!(shipment["tracking"][0]["url"], "https://www.ups.com/track?tracknum=1Z999AA10123456784");
    assert_eq!(fo_state(&first["fulfillmentOrder"]), ("IN_PROGRESS", 3));
    assert_eq!(first["fulfillmentOrder"]["lineItems"][0]["fulfilledQuantity"], 2);
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 0, 3), (shed.clone(), 4, 0), (barn.clone(), 1, 1)]);
    assert_eq!(state(&order(c, &shop, &oid).await), (2, 4, "PARTIALLY_FULFILLED".into()));
    // More than remains names the quantity; a line of another fulfillment order is not this one's.
    let over =
        act(c, &shop, &oid, &at_home, "fulfill", json!({"lineItems": [{"lineItemId": line, "quantity": 4}]})).await.expect(422);
    assert_eq!(over.body["error"]["fields"][0]["field"], "lineItems[0].quantity");
    let zero =
        act(c, &shop, &oid, &at_home, "fulfill", json!({"lineItems": [{"lineItemId": line, "quantity": 0}]})).await.expect(400);
    assert_eq!(zero.body["error"]["fields"][0]["field"], "lineItems[0].quantity");

    // Moving one in progress: it closes with what it shipped; a new OPEN one in the shed takes the rest.
    let rest = act(c, &shop, &oid, &at_home, "move", json!({"locationId": shed})).await.expect(200).body;
    assert_eq!((rest["movedFrom"].as_str(), rest["locationId"].as_str()), (Some(at_home.as_str()), Some(shed.as_str())));
    assert_eq!((fo_state(&rest), rest["lineItems"][0]["quantity"].as_i64()), (("OPEN", 3), Some(3)));
    let now = fos(c, &shop, &oid).await;
    let closed = now.iter().find(|f| f["id"] == at_home.as_str()).unwrap();
    assert_eq!((fo_state(closed), closed["lineItems"][0]["quantity"].as_i64()), (("CLOSED", 0), Some(2)));
    // The three left at home are available there again.
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 3, 0), (shed.clone(), 1, 3), (barn.clone(), 1, 1)]);

    // The rest ships: everything that remains, without a body; the barn's without a mail.
    let path = shop.path(&format!("/orders/{oid}/fulfillment-orders/{}/fulfill", id(&rest)));
    let second = c.send(Method::POST, &path, t, &[], None).await.expect(201).body;
    assert_eq!(
        (fo_state(&second["fulfillmentOrder"]), second["fulfillment"]["tracking"].as_array().map(Vec::len)),
        (("CLOSED", 0), Some(0))
    );
    // A tracking entry given as a list of its fields is refused, alone or in a list; nothing ships.
    let before = fos(c, &shop, &oid).await;
    for tracking in [json!(["A1", "Acme Freight"]), json!([["A1", "Acme Freight"]])] {
        let bad = act(c, &shop, &oid, &in_shed, "fulfill", json!({"tracking": tracking})).await.expect(400);
        let field = bad.body["error"]["fields"][0]["field"].as_str().unwrap_or_default().to_string();
        assert!(field.starts_with("tracking"), "{}", bad.body);
    }
    assert_eq!(fos(c, &shop, &oid).await, before);
    let third = act(
        c,
        &shop,
        &oid,
        &in_shed,
        "fulfill",
        json!({"notifyCustomer": false, "tracking": [{"number": "A1", "company": "Acme Freight"}, {"number": "B2", "url": "https://track.example/B2"}]}),
    )
    .await
    .expect(201)
    .body;
    assert_eq!(third["fulfillment"]["tracking"][0]["url"], Value::Null, "an unknown carrier gets no link");
    assert_eq!(third["fulfillment"]["tracking"][1]["url"], "https://track.example/B2");
    let done = order(c, &shop, &oid).await;
    assert_eq!(state(&done), (6, 0, "FULFILLED".into()));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 3, 0), (shed.clone(), 1, 0), (barn.clone(), 1, 0)]);
    let over = act(c, &shop, &oid, &in_shed, "fulfill", json!({})).await.expect(409);
    assert!(over.body["error"]["message"].as_str().unwrap().contains("CLOSED"), "{}", over.body);
    act(c, &shop, &oid, &in_shed, "cancel", json!({})).await.expect(409);

    // The fulfillments of the order; one tracking entry edited, with the shipment's status.
    let list = c.get(&shop.path(&format!("/orders/{oid}/fulfillments?sortOrder=asc")), t).await.expect(200).body;
    assert_eq!(list["total"], 3);
    let quantities: Vec<i64> =
        list["data"].as_array().unwrap().iter().map(|f| f["lineItems"][0]["quantity"].as_i64().unwrap()).collect();
    assert_eq!(quantities, [2, 3, 1]);
    let (fid, tid) = (id(&first["fulfillment"]), id(&first["fulfillment"]["tracking"][0]));
    let tracking = shop.path(&format!("/orders/{oid}/fulfillments/{fid}/tracking/{tid}"));
    let edited = c
        .put(&tracking, t, json!({"number": "1Z999AA10123456785", "company": "ups", "shipmentStatus": "IN_TRANSIT"}))
        .await
        .expect(200)
        .body;
    assert_eq!(edited["shipmentStatus"], "IN_TRANSIT");
    assert_eq!(
        edited["tracking"],
        json!([{"id": tid, "number": "1Z999AA10123456785", "company": "ups", "url": "https://www.ups.com/track?tracknum=1Z999AA10123456785"}])
    );
    let kept = c.get(&shop.path(&format!("/orders/{oid}/fulfillments?sortOrder=asc")), t).await.expect(200).body;
    assert_eq!(kept["data"][0], edited);

    // Lists of several filters or with a query are views held in memory: they follow writes.
    let waiting = shop.path("/orders?fulfillmentStatus=UNFULFILLED,ON_HOLD&status=OPEN&sortBy=total");
    let ids = |v: &Value| -> Vec<String> { v["data"].as_array().unwrap().iter().map(id).collect() };
    let none = c.get(&waiting, t).await.expect(200).body;
    assert_eq!((none["total"].as_i64(), ids(&none)), (Some(0), Vec::<String>::new()));

    // A second order: another order's tracking is not found through it, nor an unknown entry.
    let other_order = complete(c, &shop, json!([{"variantId": mug, "quantity": 1}]), &rate).await.expect(201).body;
    let bid = id(&other_order);
    let one = c.get(&waiting, t).await.expect(200).body;
    assert_eq!((one["total"].as_i64(), ids(&one)), (Some(1), vec![bid.clone()]));
    let number = other_order["number"].as_i64().unwrap();
    for (query, found) in [(format!("%23{number}"), vec![bid.clone()]), (format!("%23{}", number - 1), vec![oid.clone()])] {
        let page = c.get(&shop.path(&format!("/orders?search={query}&status=OPEN")), t).await.expect(200).body;
        assert_eq!(ids(&page), found, "{query}");
    }
    let wrong = shop.path(&format!("/orders/{bid}/fulfillments/{fid}/tracking/{tid}"));
    c.put(&wrong, t, json!({"number": "X"})).await.expect(404);
    let unknown = shop.path(&format!("/orders/{oid}/fulfillments/{fid}/tracking/{}", Uuid::now_v7()));
    c.put(&unknown, t, json!({"number": "X"})).await.expect(404);

    // The unshipped order is the one UNFULFILLED, counted.
    let open = c.get(&shop.path("/orders?fulfillmentStatus=UNFULFILLED"), t).await.expect(200).body;
    assert_eq!((open["total"].as_i64(), open["data"][0]["id"].as_str()), (Some(1), Some(bid.as_str())));
    let full = c.get(&shop.path("/orders?fulfillmentStatus=FULFILLED"), t).await.expect(200).body;
    assert_eq!((full["total"].as_i64(), full["data"][0]["id"].as_str()), (Some(1), Some(oid.as_str())));

    // Cancelled, its unit is available again where it was committed.
    let b_fo = id(&fos(c, &shop, &bid).await[0]);
    let before = levels(c, &shop, &mug).await;
    assert_eq!(before.iter().map(|l| l.2).sum::<i64>(), 1);
    let cancelled = act(c, &shop, &bid, &b_fo, "cancel", json!({})).await.expect(200).body;
    assert_eq!(fo_state(&cancelled), ("CANCELLED", 0));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 3, 0), (shed.clone(), 1, 0), (barn.clone(), 1, 0)]);
    let again = act(c, &shop, &bid, &b_fo, "cancel", json!({})).await.expect(409);
    assert!(again.body["error"]["message"].as_str().unwrap().contains("CANCELLED"), "{}", again.body);
    // Not another order's fulfillment order.
    act(c, &shop, &bid, &at_home, "hold", json!({"reason": "other"})).await.expect(404);

    // Every change, in order, as events.
    let wanted = "fulfillment_order.held,fulfillment_order.released,fulfillment_order.moved,fulfillment_order.cancelled,\
                  fulfillment.created,fulfillment.updated,order.partially_fulfilled,order.fulfilled";
    let events = c.get(&shop.path(&format!("/events?topic={wanted}&sortOrder=asc&limit=100")), t).await.expect(200).body;
    let topics: Vec<&str> = events["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        topics,
        [
            "fulfillment_order.held",
            "fulfillment_order.held",
            "fulfillment_order.released",
            "fulfillment_order.released",
            "fulfillment_order.moved",
            "fulfillment.created",
            "order.partially_fulfilled",
            "fulfillment_order.moved",
            "fulfillment.created",
            "fulfillment.created",
            "order.fulfilled",
            "fulfillment.updated",
            "fulfillment_order.cancelled",
        ]
    );
    let split_move = &events["data"][7]["data"];
    assert_eq!(
        (split_move["original"]["status"].as_str(), split_move["moved"]["id"].as_str()),
        (Some("CLOSED"), rest["id"].as_str())
    );
    assert_eq!(events["data"][4]["data"]["original"]["locationId"], shed.as_str());
    assert_eq!(events["data"][4]["data"]["moved"]["locationId"], barn.as_str());

    // Mail: two order confirmations, two shipping confirmations (the third asked for none), one tracking update.
    mails(app.dir.path(), 5).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = mails(app.dir.path(), 5).await;
    assert_eq!(sent.len(), 5);
    let shipped: Vec<&Vec<u8>> = sent.iter().filter(|m| subject(m).ends_with("is on its way")).collect();
    assert_eq!(shipped.len(), 2);
    let with_link = shipped.iter().find(|m| text(m).contains("Mug x 2")).expect("the first shipment's mail");
    assert!(
        text(with_link).contains("UPS 1Z999AA10123456784: https://www.ups.com/track?tracknum=1Z999AA10123456784"),
        "{}",
        text(with_link)
    );
    let update = sent.iter().find(|m| subject(m).starts_with("Shipping update")).expect("the tracking update");
    assert!(text(update).contains(": In transit."), "{}", text(update));
    assert!(text(update).contains("1Z999AA10123456785"), "{}", text(update));
}

#[tokio::test]
async fn two_fulfills_of_the_last_unit_ship_it_once() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let rate = us_shipping(c, &shop).await;
    let mug = stocked(c, &shop, "Mug", 1200, 1).await;
    let placed = complete(c, &shop, json!([{"variantId": mug, "quantity": 1}]), &rate).await.expect(201).body;
    let (oid, line) = (id(&placed), placed["lineItems"][0]["id"].as_str().unwrap().to_string());
    let fo = id(&fos(c, &shop, &oid).await[0]);
    let body = json!({"lineItems": [{"lineItemId": line, "quantity": 1}]});
    let (a, b) = tokio::join!(act(c, &shop, &oid, &fo, "fulfill", body.clone()), act(c, &shop, &oid, &fo, "fulfill", body));
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [201, 409]);
    let list = c.get(&shop.path(&format!("/orders/{oid}/fulfillments")), Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 1);
    let (_, available, committed) = levels(c, &shop, &mug).await.remove(0);
    assert_eq!((available, committed), (0, 0));
    assert_eq!(state(&order(c, &shop, &oid).await), (1, 0, "FULFILLED".into()));
}

/// Runs `f` in one write of the app's cell for `store`.
async fn write<T: Send + 'static>(
    app: &TestApp,
    store: Uuid,
    f: impl FnMut(&mut shopcell::storage::tx::Tx) -> shopcell::error::ApiResult<T> + Send + 'static,
) -> T {
    app.cell().writer.write(Some(store), f).await.unwrap()
}

#[tokio::test]
async fn a_scheduled_fulfillment_order_opens_when_the_clock_reaches_it() {
    use redb::ReadableDatabase;
    use shopcell::cells::fulfillment::place_order;
    use shopcell::domain::order::Order;
    use shopcell::storage::record;

    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, &shop).await;
    let mug = stocked(c, &shop, "Mug", 1200, 3).await;
    let home = levels(c, &shop, &mug).await[0].0.clone();
    let placed = complete(c, &shop, json!([{"variantId": mug, "quantity": 2}]), &rate).await.expect(201).body;
    let oid = id(&placed);
    // The order as placed for a later delivery: its units go back, then are placed again for
    // half an hour from now (within the owner's token's hour).
    let first = id(&fos(c, &shop, &oid).await[0]);
    act(c, &shop, &oid, &first, "cancel", json!({})).await.expect(200);
    let (store, order_id, variant) =
        (shop.store.parse::<Uuid>().unwrap(), oid.parse::<Uuid>().unwrap(), mug.parse::<Uuid>().unwrap());
    let wait = Duration::from_secs(1800);
    let at = app.clock.now_ms() + wait.as_millis() as i64;
    let now = app.clock.now_ms();
    write(&app, store, move |tx| {
        let o = record::must_load::<Order>(tx, store, order_id)?;
        place_order(tx, store, &o, &HashMap::from([(variant, true)]), Some(at), now)?;
        shopcell::cells::fulfillment::write_order_state(tx, store, order_id, now)
    })
    .await;
    let all = fos(c, &shop, &oid).await;
    let scheduled = all.iter().find(|f| f["status"] == "SCHEDULED").unwrap();
    assert_eq!(fo_state(scheduled), ("SCHEDULED", 2));
    assert_eq!(state(&order(c, &shop, &oid).await), (0, 2, "SCHEDULED".into()));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 1, 2)]);
    let fo = id(scheduled);
    let one = |list: Vec<Value>| list.into_iter().find(|f| f["id"] == fo.as_str()).unwrap();
    let early = act(c, &shop, &oid, &fo, "fulfill", json!({})).await.expect(409);
    assert!(early.body["error"]["message"].as_str().unwrap().contains("SCHEDULED"), "{}", early.body);
    act(c, &shop, &oid, &fo, "hold", json!({"reason": "other"})).await.expect(409);

    // Not before its time; then OPEN, with its event, and the order UNFULFILLED.
    app.clock.advance(wait / 2);
    app.cell().jobs.wake();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fo_state(&one(fos(c, &shop, &oid).await)), ("SCHEDULED", 2));
    app.clock.advance(wait / 2 + Duration::from_secs(1));
    app.cell().jobs.wake();
    let opened = |app: &TestApp| {
        let cell = app.cell();
        let txn = cell.db.begin_read().unwrap();
        record::get_in::<shopcell::domain::fulfillment::FulfillmentOrder>(&txn, store, Some(order_id), fo.parse().unwrap())
            .unwrap()
            .is_some_and(|f| f.status == shopcell::domain::fulfillment::FoStatus::Open)
    };
    wait_until("the fulfillment order opens when its time comes", || opened(&app)).await;
    assert_eq!(state(&order(c, &shop, &oid).await), (0, 2, "UNFULFILLED".into()));
    let events = c.get(&shop.path("/events?topic=fulfillment_order.opened"), t).await.expect(200).body;
    assert_eq!((events["total"].as_i64(), events["data"][0]["data"]["id"].as_str()), (Some(1), Some(fo.as_str())));
    act(c, &shop, &oid, &fo, "fulfill", json!({})).await.expect(201);
}

#[tokio::test]
async fn released_units_are_restocked_or_written_off_and_returns_restocked_where_chosen() {
    use shopcell::cells::fulfillment::release::{Units, release, restock};
    use shopcell::domain::stock::{Actor, Reason, Why};

    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, &shop).await;
    let mug = stocked(c, &shop, "Mug", 1200, 6).await;
    let home = levels(c, &shop, &mug).await[0].0.clone();
    let placed = complete(c, &shop, json!([{"variantId": mug, "quantity": 5}]), &rate).await.expect(201).body;
    let (oid, line) = (id(&placed), placed["lineItems"][0]["id"].as_str().unwrap().to_string());
    let fo = id(&fos(c, &shop, &oid).await[0]);
    act(c, &shop, &oid, &fo, "fulfill", json!({"lineItems": [{"lineItemId": line, "quantity": 1}]})).await.expect(201);
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 1, 4)]);
    let (store, order, line_id) =
        (shop.store.parse::<Uuid>().unwrap(), oid.parse::<Uuid>().unwrap(), line.parse::<Uuid>().unwrap());
    let now = app.clock.now_ms();

    // One unit written off: it leaves committed and onHand; the fulfillment order shrinks.
    let o =
        write(&app, store, move |tx| release(tx, store, order, Units::Lines(&[(line_id, 1)]), false, Actor::System, now)).await;
    assert_eq!((o.line_items[0].fulfilled_quantity, o.line_items[0].fulfillable_quantity), (1, 3));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 1, 3)]);
    assert_eq!(fo_state(&fos(c, &shop, &oid).await[0]), ("IN_PROGRESS", 3));
    // More than remains unshipped changes nothing.
    let err = app
        .cell()
        .writer
        .write(Some(store), move |tx| release(tx, store, order, Units::Lines(&[(line_id, 4)]), true, Actor::System, now))
        .await;
    assert_eq!(err.unwrap_err().code.status(), 422);
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 1, 3)]);

    // The rest restocked: available again, and the fulfillment order INCOMPLETE (one had shipped).
    let o = write(&app, store, move |tx| release(tx, store, order, Units::All, true, Actor::System, now)).await;
    assert_eq!((o.line_items[0].fulfilled_quantity, o.line_items[0].fulfillable_quantity), (1, 0));
    assert_eq!(o.fulfillment_status, shopcell::domain::order::FulfillmentStatus::Fulfilled);
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 4, 0)]);
    let after = fos(c, &shop, &oid).await;
    assert_eq!(fo_state(&after[0]), ("INCOMPLETE", 0));
    assert_eq!(after[0]["lineItems"][0]["fulfilledQuantity"], 1);

    // The shipped unit comes back to a shelf of our choosing.
    let variant = mug.parse::<Uuid>().unwrap();
    let location = home.parse::<Uuid>().unwrap();
    let why = Why { reason: Reason::Restock, actor: Actor::System, reference: None };
    let level = write(&app, store, move |tx| restock(tx, store, variant, location, 1, &why, now)).await;
    assert_eq!((level.quantities.available, level.quantities.committed), (5, 0));
    let h = c.get(&shop.path(&format!("/inventory-history?variantId={mug}")), t).await.expect(200).body;
    let reasons: Vec<&str> = h["data"].as_array().unwrap().iter().take(4).map(|c| c["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["restock", "restock", "released", "fulfilled"]);
}
