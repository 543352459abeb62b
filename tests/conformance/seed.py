"""Seeds a fresh `shopcell serve` for the conformance run and writes schemathesis.toml.

Everything is made through the public API as a client would (register, create a store, a
catalogue, a cart, checkouts and an order), so the ids schemathesis is given are real. Each
operation that ends a record (DELETE, complete, cancel) gets a record of its own, so that the
reads and updates of the shared ones keep answering 2xx for the whole run.

Usage: seed.py BASE_URL OUT_DIR   (stdlib only: runs with the venv's python or any python3)
"""

import json
import sys
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
OUT = sys.argv[2]
PASSWORD = "conformance owner password"


def call(method, path, body=None, token=None, expect=(200, 201, 202, 204)):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if status not in expect:
        sys.exit(f"seed: {method} {path} answered {status}: {raw[:500]!r}")
    return json.loads(raw) if raw else None


def main():
    owner = call("POST", "/api/v1/auth/register",
                 {"email": "owner@conformance.test", "password": PASSWORD, "name": "Conformance Owner"})
    t = owner["accessToken"]
    # A second user to be a member (updateMember, removeMember) without touching the owner.
    member = call("POST", "/api/v1/auth/register",
                  {"email": "member@conformance.test", "password": PASSWORD, "name": "Conformance Member"})
    # A third user, not yet a member: addMember's one success.
    call("POST", "/api/v1/auth/register",
         {"email": "invitee@conformance.test", "password": PASSWORD, "name": "Conformance Invitee"})
    # A second session of the owner: refreshTokens rotates (and, reused, ends) this one alone.
    spare_refresh = call("POST", "/api/v1/auth/login",
                         {"email": "owner@conformance.test", "password": PASSWORD})["refreshToken"]
    # The pro plan: createStore may add stores during the run.
    call("POST", "/api/v1/subscriptions", {"planId": "pro"}, t)
    store = call("POST", "/api/v1/stores",
                 {"name": "Conformance", "currency": "USD", "country": "US", "timezone": "UTC"}, t)["id"]

    def s(path):
        return f"/api/v1/stores/{store}{path}"

    def post(path, body):
        return call("POST", s(path), body, t)

    def product(title, units=100000):
        return post("/products", {
            "title": title, "status": "ACTIVE", "price": {"amount": 1500, "currency": "USD"},
            "variants": [{"title": "Default", "inventoryTracked": True, "inventoryQuantity": units}]})

    main_product = product("Mug")
    variant = main_product["variants"][0]["id"]
    spare_variant = post(f"/products/{main_product['id']}/variants", {"title": "Spare", "price": {"amount": 1500, "currency": "USD"}})["id"]
    doomed_product = product("To delete")

    zone = post("/shipping-zones", {"name": "US", "countries": [{"code": "US"}], "rates": [
        {"name": "Ground", "price": 800, "estimatedDelivery": {"minDays": 2, "maxDays": 4}}]})
    rate = zone["rates"][0]["id"]
    doomed_zone = post("/shipping-zones", {"name": "CA", "countries": [{"code": "CA"}], "rates": [
        {"name": "Ground", "price": 900, "estimatedDelivery": {"minDays": 3, "maxDays": 6}}]})["id"]
    # updateShippingZone changes its zone's rates: a zone no checkout ships by, so the payment
    # due of the seeded checkouts stays what their payment sessions are given.
    patched_zone = post("/shipping-zones", {"name": "MX", "countries": [{"code": "MX"}], "rates": [
        {"name": "Ground", "price": 700, "estimatedDelivery": {"minDays": 3, "maxDays": 6}}]})["id"]
    tax = post("/tax-rates", {"country": "US", "rate": 500, "name": "Sales tax", "shipping": False})["id"]
    doomed_tax = post("/tax-rates", {"country": "CA", "rate": 500, "name": "GST", "shipping": True})["id"]

    collection = post("/collections", {"title": "Kitchen"})["id"]
    post(f"/collections/{collection}/products", {"productIds": [main_product["id"]]})
    doomed_collection = post("/collections", {"title": "To delete"})["id"]

    discount_body = {"title": "Ten off", "code": "TENOFF", "valueType": "percentage", "value": 1000}
    discount = post("/discounts", discount_body)["id"]
    doomed_discount = post("/discounts", {**discount_body, "title": "Gone", "code": "GONE"})["id"]
    comment = post(f"/discounts/{discount}/comments", {"body": "Launch on Monday"})["id"]
    doomed_comment = post(f"/discounts/{discount}/comments", {"body": "To delete"})["id"]

    gift_card = post("/gift-cards", {"initialValue": {"amount": 5000, "currency": "USD"},
                                      "code": "CONF-GIFT-0001"})["id"]
    market = post("/markets", {"name": "US", "countries": ["US"]})["id"]
    doomed_market = post("/markets", {"name": "Canada", "countries": ["CA"]})["id"]
    catalog = post("/catalogs", {"name": "All", "marketId": market, "selection": "ALL"})["id"]
    doomed_catalog = post("/catalogs", {"name": "To delete", "marketId": market})["id"]
    location = post("/locations", {"name": "Shed", "priority": 1})["id"]

    post("/members", {"email": "member@conformance.test", "role": "staff"})
    key = post("/publishable-keys", {"environment": "live"})
    doomed_key = post("/publishable-keys", {"environment": "test"})["id"]

    webhook = post("/webhooks", {"topics": ["order.*"], "url": "http://127.0.0.1:9/in"})["id"]
    doomed_webhook = post("/webhooks", {"topics": ["*"], "url": "http://127.0.0.1:9/gone"})["id"]
    post(f"/webhooks/{webhook}/ping", {})
    deliveries = call("GET", s(f"/webhooks/{webhook}/deliveries"), None, t)["data"]

    cart = post("/carts/items", {"variantId": variant, "quantity": 1})["id"]
    doomed_cart = post("/carts/items", {"variantId": variant, "quantity": 1})["id"]

    address = {"firstName": "Ada", "lastName": "Lovelace", "address1": "1 Main St", "city": "Portland",
               "province": "OR", "country": "US", "postalCode": "97201"}

    def ready_checkout():
        co = post("/checkouts", {"lineItems": [{"variantId": variant, "quantity": 2}], "email": "buyer@example.com"})
        return call("PATCH", s(f"/checkouts/{co['id']}"), {"shippingAddress": address, "shippingMethodId": rate}, t)

    def paid(co):
        due = co["paymentDue"]
        intent = post(f"/checkouts/{co['id']}/payment-session",
                      {"amount": due["amount"], "currency": due["currency"]})["paymentIntentId"]
        post(f"/payment-intents/{intent}/confirm", {"paymentMethod": "pm_card_visa"})
        return intent

    def ordered():
        co = ready_checkout()
        intent = paid(co)
        return post(f"/checkouts/{co['id']}/complete", {"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})

    checkout = ready_checkout()
    post(f"/checkouts/{checkout['id']}/discount-codes", {"code": "TENOFF"})
    checkout = call("GET", s(f"/checkouts/{checkout['id']}"), None, t)
    # An intent left unconfirmed: confirmPaymentIntent's own.
    due = checkout["paymentDue"]
    open_intent = post(f"/checkouts/{checkout['id']}/payment-session",
                       {"amount": due["amount"], "currency": due["currency"]})["paymentIntentId"]
    # Paid checkouts that completeCheckout and its alias complete once each.
    to_complete = {}
    for op in ("completeCheckout", "completeCheckoutAlias"):
        co = ready_checkout()
        to_complete[op] = (co["id"], paid(co))

    # Checkouts of their own for the operations that change a checkout's code or payment.
    code_checkout = ready_checkout()["id"]
    coded_checkout = ready_checkout()["id"]
    post(f"/checkouts/{coded_checkout}/discount-codes", {"code": "TENOFF"})
    session_checkouts = {op: ready_checkout() for op in
                         ("createCheckoutPaymentSession", "createCheckoutPaymentSessionAlias")}

    order = ordered()
    fulfillment_orders = call("GET", s(f"/orders/{order['id']}/fulfillment-orders"), None, t)["data"]
    fo = fulfillment_orders[0]["id"]
    # Fulfilling and cancelling end a fulfillment order: each gets an order of its own, and a
    # fulfilled one gives the tracking entry.
    def fresh_fo():
        o = ordered()
        return o["id"], call("GET", s(f"/orders/{o['id']}/fulfillment-orders"), None, t)["data"][0]["id"]

    fulfill_order, fulfill_fo = fresh_fo()
    cancel_order, cancel_fo = fresh_fo()
    shipped_order, shipped_fo = fresh_fo()
    shipped = post(f"/orders/{shipped_order}/fulfillment-orders/{shipped_fo}/fulfill",
                   {"tracking": {"number": "1Z999AA10123456784", "company": "UPS"}})
    held_order, held_fo = fresh_fo()
    post(f"/orders/{held_order}/fulfillment-orders/{held_fo}/hold", {"reason": "OTHER"})
    fulfillment = shipped["fulfillment"]["id"]
    tracking = shipped["fulfillment"]["tracking"][0]["id"]

    category = call("GET", "/api/v1/categories?limit=1")["data"][0]["id"]
    session = call("GET", "/api/v1/auth/sessions", None, t)[0]["id"]

    shared = {
        "storeId": store, "productId": main_product["id"], "variantId": variant, "collectionId": collection,
        "id": collection, "discountId": discount, "commentId": comment, "giftCardId": gift_card,
        "marketId": market, "catalogId": catalog, "locationId": location, "zoneId": zone["id"],
        "taxRateId": tax, "webhookId": webhook, "cartId": cart, "checkoutId": checkout["id"],
        "orderId": order["id"], "fulfillmentOrderId": fo, "fulfillmentId": fulfillment,
        "trackingId": tracking, "paymentIntentId": open_intent, "userId": member["user"]["id"],
        "keyId": doomed_key, "sessionId": session, "code": "TENOFF",
    }
    if deliveries:
        shared["deliveryId"] = deliveries[0]["id"]
    own = {
        "deleteProduct": {"productId": doomed_product["id"]},
        "deleteProductVariant": {"variantId": spare_variant},
        "deleteCollection": {"id": doomed_collection},
        "deleteDiscount": {"discountId": doomed_discount},
        "deleteDiscountComment": {"commentId": doomed_comment},
        "deleteShippingZone": {"zoneId": doomed_zone},
        "updateShippingZone": {"zoneId": patched_zone},
        "deleteTaxRate": {"taxRateId": doomed_tax},
        "deleteMarket": {"marketId": doomed_market},
        "deleteCatalog": {"catalogId": doomed_catalog},
        "deleteWebhook": {"webhookId": doomed_webhook},
        "removeCartItem": {"cartId": doomed_cart},
        "fulfillFulfillmentOrder": {"orderId": fulfill_order, "fulfillmentOrderId": fulfill_fo},
        "cancelFulfillmentOrder": {"orderId": cancel_order, "fulfillmentOrderId": cancel_fo},
        "updateFulfillmentTracking": {"orderId": shipped_order},
        "getCategory": {"id": category},
        "listCategoryAttributes": {"id": category},
        "moveFulfillmentOrder": {"body.locationId": location},
        "addCartItem": {"body.variantId": variant, "body.cartId": cart},
        "updateCartItem": {"body.variantId": variant},
        "confirmPaymentIntent": {"body.paymentMethod": "pm_card_visa"},
        "addCollectionProducts": {"body.productIds": [main_product["id"]]},
        "removeCollectionProducts": {"body.productIds": [main_product["id"]]},
        "reorderCollectionProducts": {"body.productIds": [main_product["id"]]},
        "addCatalogProducts": {"body.productIds": [main_product["id"]]},
        "removeCatalogProducts": {"body.productIds": [main_product["id"]]},
        "adjustInventoryLevel": {"body.variantId": variant, "body.locationId": location},
        "setInventoryLevel": {"body.variantId": variant, "body.locationId": location},
        "createCatalog": {"body.marketId": market},
        "createCheckout": {"body.lineItems": [{"variantId": variant, "quantity": 1}]},
        "createCheckoutAlias": {"body.lineItems": [{"variantId": variant, "quantity": 1}]},
        "calculate": {"body.lineItems": [{"variantId": variant, "quantity": 1}]},
        "applyCheckoutCode": {"body.code": "TENOFF"},
        "applyCheckoutCodeAlias": {"body.code": "TENOFF"},
        "subscribe": {"body.planId": "pro"},
        "addMember": {"body.email": "invitee@conformance.test", "body.role": "staff"},
        "updateMember": {"body.role": "staff"},
        "login": {"body.email": "owner@conformance.test", "body.password": PASSWORD},
        "register": {"body.email": "newcomer@conformance.test", "body.password": PASSWORD, "body.name": "Newcomer"},
        "refreshTokens": {"body.refreshToken": spare_refresh},
        "createStore": {"body.name": "Second", "body.currency": "USD", "body.country": "US", "body.timezone": "UTC"},
        "createProduct": {"body.title": "Generated", "body.price.amount": 1200, "body.price.currency": "USD"},
        "createProductVariant": {"body.title": "Generated", "body.price.amount": 1200, "body.price.currency": "USD"},
        "createMarket": {"body.name": "Germany", "body.countries": ["DE"]},
        "createShippingZone": {"body.name": "France", "body.countries": [{"code": "FR"}]},
        "createTaxRate": {"body.country": "DE", "body.name": "VAT", "body.rate": 1900},
        "createWebhook": {"body.url": "http://127.0.0.1:9/generated", "body.topics": ["order.*"]},
        "updateCartItem": {"body.variantId": variant, "body.quantity": 1},
        "validateDiscountCodes": {"body.codes": ["TENOFF"]},
        "scheduleCollection": {"body.publishAt": "2030-01-31T09:00:00Z"},
        "adjustInventoryLevel": {"body.variantId": variant, "body.locationId": location, "body.delta": 5},
        "holdFulfillmentOrder": {"body.reason": "OTHER"},
        "releaseFulfillmentOrderHold": {"orderId": held_order, "fulfillmentOrderId": held_fo},
        "applyCheckoutCode": {"checkoutId": code_checkout, "body.code": "TENOFF"},
        "removeCheckoutDiscountCode": {"checkoutId": coded_checkout},
        "lookupCheckoutGiftCard": {"body.code": "CONF-GIFT-0001"},
        "updateDiscount": {"body.title": "Ten off", "body.usageLimit": 100},
    }
    own["addCartItem"]["body.quantity"] = 1
    for op, co in session_checkouts.items():
        due = co["paymentDue"]
        own[op] = {"checkoutId": co["id"], "body.amount": due["amount"], "body.currency": due["currency"]}
    # Request-context operations read the real User-Agent and Referer (API.md).
    context = {"User-Agent": "Mozilla/5.0 (conformance)", "Referer": "https://shop.conformance.test/"}
    for op, (co, intent) in to_complete.items():
        own[op] = {"checkoutId": co, "body.paymentIntentId": intent, "body.paymentMethodId": "pm_card_visa"}

    with open(f"{OUT}/schemathesis.toml", "w") as f:
        f.write(toml(shared, own, {op: context for op in ("startStorefrontSession", "trackStorefrontEvent")}))
    with open(f"{OUT}/owner.token", "w") as f:
        f.write(t)
    with open(f"{OUT}/publishable.key", "w") as f:
        f.write(key["key"])
    print(f"seed: store {store}, {len(shared)} shared ids, {len(own)} operations with their own")


def toml(shared, own, headers):
    def value(v):
        if isinstance(v, dict):
            return "{ " + table(v) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    def table(values):
        return ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in values.items())

    lines = ["[parameters]"] + [f"{json.dumps(k)} = {value(v)}" for k, v in shared.items()]
    for op in sorted(set(own) | set(headers)):
        lines += ["", "[[operations]]", f"include-operation-id = {json.dumps(op)}"]
        if op in own:
            lines.append(f"parameters = {{ {table(own[op])} }}")
        if op in headers:
            lines.append(f"headers = {{ {table(headers[op])} }}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
