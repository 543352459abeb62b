//! `S/members`: adding, listing, changing and removing members, and ownership transfer.

use serde_json::{Value, json};

use crate::support::*;

fn members(store: &str) -> String {
    format!("/api/v1/stores/{store}/members")
}

fn member(store: &str, user: &User) -> String {
    format!("/api/v1/stores/{store}/members/{}", user.id)
}

/// The caller's role in `store` according to `GET /stores`, `None` when not a member.
async fn role_in(c: &HttpClient, user: &User, store: &str) -> Option<String> {
    let list = c.get("/api/v1/stores", Some(&user.token)).await.expect(200).body;
    list.as_array().unwrap().iter().find(|s| s["id"] == store).map(|s| s["role"].as_str().unwrap().to_string())
}

async fn add(c: &HttpClient, by: &User, store: &str, who: &User, role: &str) -> Value {
    c.post(&members(store), Some(&by.token), json!({"email": who.email, "role": role})).await.expect(201).body
}

#[tokio::test]
async fn members_are_added_listed_changed_and_removed() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let alice = create_user(c).await;
    let bob = create_user(c).await;
    let s = create_store(c, &owner).await;

    let list = c.get(&members(&s), Some(&owner.token)).await.expect(200).body;
    assert_eq!((list["total"].as_u64(), list["page"].as_u64(), list["totalPages"].as_u64()), (Some(1), Some(1), Some(1)));
    let me = &list["data"][0];
    assert_eq!((me["userId"].as_str(), me["role"].as_str()), (Some(owner.id.as_str()), Some("owner")));
    assert_eq!((me["email"].as_str(), me["name"].as_str()), (Some(owner.email.as_str()), Some("Test User")));
    assert!(me["addedAt"].as_str().is_some_and(|t| t.ends_with('Z')));

    // Emails match without regard to case.
    let a = c
        .post(&members(&s), Some(&owner.token), json!({"email": alice.email.to_uppercase(), "role": "admin"}))
        .await
        .expect(201)
        .body;
    assert_eq!(
        (a["userId"].as_str(), a["email"].as_str(), a["role"].as_str()),
        (Some(alice.id.as_str()), Some(alice.email.as_str()), Some("admin"))
    );
    add(c, &alice, &s, &bob, "staff").await;
    assert_eq!(role_in(c, &bob, &s).await.as_deref(), Some("staff"));

    let again = c.post(&members(&s), Some(&owner.token), json!({"email": bob.email, "role": "admin"})).await.expect(409);
    assert_eq!(again.code(), "CONFLICT");
    // An email without an account is invited (tests/api/invitations.rs); one that is no address is a 400.
    let bad = c.post(&members(&s), Some(&owner.token), json!({"email": "nobody", "role": "staff"})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "email");
    for role in ["owner", "manager", ""] {
        let bad = c.post(&members(&s), Some(&owner.token), json!({"email": bob.email, "role": role})).await.expect(400);
        assert_eq!(bad.body["error"]["fields"][0]["field"], "role", "{role}");
    }
    c.post(&members(&s), Some(&owner.token), json!({"email": bob.email})).await.expect(400);

    let sorted = c.get(&format!("{}?sortBy=email&sortOrder=asc", members(&s)), Some(&bob.token)).await.expect(200).body;
    let emails: Vec<&str> = sorted["data"].as_array().unwrap().iter().map(|m| m["email"].as_str().unwrap()).collect();
    let mut expected = vec![owner.email.as_str(), alice.email.as_str(), bob.email.as_str()];
    expected.sort();
    assert_eq!(emails, expected);
    let paged = c.get(&format!("{}?limit=2&page=2&sortOrder=asc", members(&s)), Some(&bob.token)).await.expect(200).body;
    assert_eq!((paged["total"].as_u64(), paged["totalPages"].as_u64()), (Some(3), Some(2)));
    assert_eq!(paged["data"].as_array().unwrap().len(), 1);
    assert_eq!(paged["data"][0]["userId"], bob.id.as_str(), "oldest first when ascending");
    c.get(&format!("{}?sortBy=role", members(&s)), Some(&bob.token)).await.expect(400);

    let changed = c.patch(&member(&s, &bob), Some(&owner.token), json!({"role": "admin"})).await.expect(200).body;
    assert_eq!(changed["role"], "admin");
    assert_eq!(role_in(c, &bob, &s).await.as_deref(), Some("admin"));
    // Now an admin, bob may change the store's settings.
    c.patch(&format!("/api/v1/stores/{s}"), Some(&bob.token), json!({"name": "Bob's"})).await.expect(200);

    c.delete(&member(&s, &bob), Some(&owner.token)).await.expect(204);
    assert_eq!(role_in(c, &bob, &s).await, None);
    assert_eq!(c.get(&format!("/api/v1/stores/{s}"), Some(&bob.token)).await.expect(404).code(), "NOT_FOUND");
    c.delete(&member(&s, &bob), Some(&owner.token)).await.expect(404);
    c.patch(&member(&s, &bob), Some(&owner.token), json!({"role": "staff"})).await.expect(404);
    c.delete(&format!("{}/not-a-uuid", members(&s)), Some(&owner.token)).await.expect(400);

    let list = c.get(&members(&s), Some(&owner.token)).await.expect(200).body;
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|m| m["userId"].as_str().unwrap()).collect();
    assert_eq!(ids, [alice.id.as_str(), owner.id.as_str()], "newest first by default");
}

#[tokio::test]
async fn the_owner_is_protected_and_ownership_moves_only_by_transfer() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let (a, b, staff, outsider) = (create_user(c).await, create_user(c).await, create_user(c).await, create_user(c).await);
    let s = create_store(c, &owner).await;
    add(c, &owner, &s, &a, "admin").await;
    add(c, &owner, &s, &b, "admin").await;
    add(c, &owner, &s, &staff, "staff").await;

    // Nobody demotes or removes the owner, not even the owner.
    for (who, is_patch) in [(&a, true), (&a, false), (&owner, true), (&owner, false)] {
        let r = if is_patch {
            c.patch(&member(&s, &owner), Some(&who.token), json!({"role": "staff"})).await
        } else {
            c.delete(&member(&s, &owner), Some(&who.token)).await
        };
        assert_eq!((r.status.as_u16(), r.code()), (422, "BUSINESS_RULE"));
        assert!(r.body["error"]["message"].as_str().unwrap().contains("transfer ownership"));
    }
    // Admins manage staff, not other admins.
    let r = c.patch(&member(&s, &b), Some(&a.token), json!({"role": "staff"})).await.expect(403);
    assert_eq!(r.code(), "FORBIDDEN");
    c.delete(&member(&s, &b), Some(&a.token)).await.expect(403);
    assert_eq!(c.patch(&member(&s, &staff), Some(&a.token), json!({"role": "admin"})).await.expect(200).body["role"], "admin");
    c.patch(&member(&s, &staff), Some(&owner.token), json!({"role": "staff"})).await.expect(200);
    // Staff manage nobody.
    c.post(&members(&s), Some(&staff.token), json!({"email": outsider.email, "role": "staff"})).await.expect(403);
    c.delete(&member(&s, &staff), Some(&staff.token)).await.expect(403);
    // An admin may step down and leave.
    c.patch(&member(&s, &b), Some(&b.token), json!({"role": "staff"})).await.expect(200);
    assert_eq!(role_in(c, &b, &s).await.as_deref(), Some("staff"));
    c.patch(&member(&s, &b), Some(&owner.token), json!({"role": "admin"})).await.expect(200);
    c.delete(&member(&s, &b), Some(&b.token)).await.expect(204);
    assert_eq!(role_in(c, &b, &s).await, None);

    // Only the owner transfers, and only to a member.
    let transfer = |to: &User| format!("{}/transfer-ownership", member(&s, to));
    assert_eq!(c.post(&transfer(&staff), Some(&a.token), json!({})).await.expect(403).code(), "FORBIDDEN");
    c.post(&transfer(&a), Some(&staff.token), json!({})).await.expect(403);
    c.post(&transfer(&outsider), Some(&owner.token), json!({})).await.expect(404);
    c.post(&transfer(&owner), Some(&owner.token), json!({})).await.expect(422);
    let t = c.send(hyper::Method::POST, &transfer(&staff), Some(&owner.token), &[], None).await.expect(200).body;
    assert_eq!((t["owner"]["userId"].as_str(), t["owner"]["role"].as_str()), (Some(staff.id.as_str()), Some("owner")));
    assert_eq!(
        (t["previousOwner"]["userId"].as_str(), t["previousOwner"]["role"].as_str()),
        (Some(owner.id.as_str()), Some("admin"))
    );
    assert_eq!(role_in(c, &staff, &s).await.as_deref(), Some("owner"));
    assert_eq!(role_in(c, &owner, &s).await.as_deref(), Some("admin"));
    let settings = c.get(&format!("/api/v1/stores/{s}"), Some(&staff.token)).await.expect(200).body;
    assert_eq!(settings["ownerId"], staff.id.as_str(), "the cell's settings follow the transfer");
    // The previous owner is an ordinary admin now.
    c.post(&transfer(&owner), Some(&owner.token), json!({})).await.expect(403);
    c.patch(&member(&s, &staff), Some(&owner.token), json!({"role": "staff"})).await.expect(422);
    c.delete(&member(&s, &a), Some(&owner.token)).await.expect(403);
    // The new owner can demote the previous one.
    c.patch(&member(&s, &owner), Some(&staff.token), json!({"role": "staff"})).await.expect(200);
    assert_eq!(role_in(c, &owner, &s).await.as_deref(), Some("staff"));
    c.patch(&format!("/api/v1/stores/{s}"), Some(&owner.token), json!({"name": "x"})).await.expect(403);
}
