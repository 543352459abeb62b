//! Invitations: an email without an account is invited to a store, listed as invited, mailed a
//! one-use link, and becomes a member by accepting it; existing users are added and told by mail.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mail::mails;
use crate::passwords::{link_token, mails_in_order, read_mail};
use crate::support::*;

const ACCEPT: &str = "/admin/accept-invite";

fn new_email() -> String {
    format!("invitee-{}@example.com", uuid::Uuid::now_v7().simple())
}

/// The tokens of the invitation mails to `email` among the first `n` mails under `data`, oldest
/// first.
async fn invite_tokens(data: &std::path::Path, email: &str, n: usize) -> Vec<String> {
    mails_in_order(data, n)
        .await
        .into_iter()
        .filter(|(to, _, text)| to == email && text.contains(ACCEPT))
        .map(|(_, _, text)| link_token(&text, ACCEPT))
        .collect()
}

async fn accept(c: &HttpClient, token: &str) -> Answer {
    c.post("/api/v1/auth/invites/accept", None, json!({"token": token, "name": "New Staff", "password": PASSWORD})).await
}

fn entry<'a>(list: &'a Value, user: &str) -> Option<&'a Value> {
    list["data"].as_array().unwrap().iter().find(|m| m["userId"] == user)
}

#[tokio::test]
async fn an_invited_email_accepts_and_becomes_a_member() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    let email = new_email();

    let invited = c.post(&members, Some(&owner.token), json!({"email": email.to_uppercase(), "role": "staff"})).await.expect(201);
    assert_eq!(invited.body["status"], "invited");
    assert_eq!(invited.body["email"], email);
    assert_eq!(invited.body["role"], "staff");
    let user = invited.body["userId"].as_str().unwrap().to_string();
    let list = c.get(&members, Some(&owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 2);
    assert_eq!(entry(&list, &owner.id).unwrap()["status"], "active");
    assert_eq!(entry(&list, &user).unwrap()["status"], "invited");

    let sent = mails(app.dir.path(), 1).await;
    let (to, subject, text) = read_mail(&sent[0]);
    assert_eq!(to, email);
    assert_eq!(subject, "Test User invited you to Test Store");
    assert!(text.contains(&format!("{}{ACCEPT}#token=", app.base)), "{text}");
    assert!(text.contains("as staff"), "{text}");
    let token = link_token(&text, ACCEPT);

    let weak =
        c.post("/api/v1/auth/invites/accept", None, json!({"token": token, "name": "N", "password": "short"})).await.expect(400);
    assert_eq!(weak.body["error"]["fields"][0]["field"], "password");
    let login = accept(c, &token).await.expect(201).body;
    assert_eq!(login["user"]["id"], user.as_str());
    assert_eq!(login["user"]["email"], email);
    assert_eq!(login["user"]["name"], "New Staff");
    let t = login["accessToken"].as_str().unwrap();
    // A member now: reads the store, listed as active with the invited role.
    c.get(&format!("/api/v1/stores/{store}"), Some(t)).await.expect(200);
    let list = c.get(&members, Some(t)).await.expect(200).body;
    assert_eq!(list["total"], 2);
    let me = entry(&list, &user).unwrap();
    assert_eq!(
        (me["status"].as_str(), me["role"].as_str(), me["name"].as_str()),
        (Some("active"), Some("staff"), Some("New Staff"))
    );
    // Staff cannot add members.
    c.post(&members, Some(t), json!({"email": new_email(), "role": "staff"})).await.expect(403);
    // The link is spent; the account signs in with its password.
    assert_eq!(accept(c, &token).await.expect(400).body["error"]["fields"][0]["field"], "token");
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": PASSWORD})).await.expect(200);
    // A member now: inviting the email again is a conflict.
    c.post(&members, Some(&owner.token), json!({"email": email, "role": "admin"})).await.expect(409);
}

#[tokio::test]
async fn inviting_again_resends_and_voids_the_old_link_and_a_withdrawal_voids_all() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    let email = new_email();

    let first = c.post(&members, Some(&owner.token), json!({"email": email, "role": "staff"})).await.expect(201).body;
    let again = c.post(&members, Some(&owner.token), json!({"email": email, "role": "admin"})).await.expect(201).body;
    assert_eq!(first["userId"], again["userId"]);
    assert_eq!(again["role"], "admin");
    let list = c.get(&members, Some(&owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 2, "still one invitation: {list}");
    let tokens = invite_tokens(app.dir.path(), &email, 2).await;
    assert_eq!(tokens.len(), 2);
    assert_eq!(accept(c, &tokens[0]).await.expect(400).body["error"]["fields"][0]["field"], "token");

    // Withdrawn: gone from the list, its link void.
    let user = again["userId"].as_str().unwrap();
    c.delete(&format!("{members}/{user}"), Some(&owner.token)).await.expect(204);
    let list = c.get(&members, Some(&owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 1);
    assert!(entry(&list, user).is_none());
    assert_eq!(accept(c, &tokens[1]).await.expect(400).body["error"]["fields"][0]["field"], "token");
    c.delete(&format!("{members}/{user}"), Some(&owner.token)).await.expect(404);
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": PASSWORD})).await.expect(401);
}

#[tokio::test]
async fn an_invitation_lasts_seven_days() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    let email = new_email();
    c.post(&members, Some(&owner.token), json!({"email": email, "role": "staff"})).await.expect(201);
    let token = invite_tokens(app.dir.path(), &email, 1).await.remove(0);
    app.clock.advance(Duration::from_secs(7 * 24 * 3600));
    assert_eq!(accept(c, &token).await.expect(400).body["error"]["fields"][0]["field"], "token");
    // The owner's access token has expired meanwhile: sign in again to look.
    let t = c.post("/api/v1/auth/login", None, json!({"email": owner.email, "password": PASSWORD})).await.expect(200).body;
    let list = c.get(&members, t["accessToken"].as_str()).await.expect(200).body;
    assert_eq!(list["total"], 1, "an expired invitation is not listed: {list}");
    // Inviting again sends a fresh link that works.
    c.post(&members, t["accessToken"].as_str(), json!({"email": email, "role": "staff"})).await.expect(201);
    let tokens = invite_tokens(app.dir.path(), &email, 2).await;
    assert_eq!(tokens[0], token);
    accept(c, &tokens[1]).await.expect(201);
}

#[tokio::test]
async fn an_existing_user_is_added_at_once_and_told_by_mail() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let other = create_user(c).await;
    let store = create_store(c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    let added = c.post(&members, Some(&owner.token), json!({"email": other.email, "role": "admin"})).await.expect(201).body;
    assert_eq!(added["status"], "active");
    assert_eq!(added["userId"], other.id.as_str());
    c.post(&members, Some(&owner.token), json!({"email": other.email, "role": "staff"})).await.expect(409);
    let (to, subject, text) = read_mail(&mails(app.dir.path(), 1).await[0]);
    assert_eq!((to.as_str(), subject.as_str()), (other.email.as_str(), "You were added to Test Store"));
    assert!(text.contains("admin"), "{text}");
    let bad = c.post(&members, Some(&owner.token), json!({"email": "not an email", "role": "staff"})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "email");
}

#[tokio::test]
async fn invitations_work_through_a_cell_in_its_own_process() {
    let r = Routed::start().await;
    let c = HttpClient::new(&r.router.url);
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    let email = new_email();
    let invited = c.post(&members, Some(&owner.token), json!({"email": email, "role": "staff"})).await.expect(201).body;
    assert_eq!(invited["status"], "invited");
    let user = invited["userId"].as_str().unwrap().to_string();
    let list = c.get(&members, Some(&owner.token)).await.expect(200).body;
    assert_eq!(entry(&list, &user).unwrap()["status"], "invited");

    let sent = mails(&r.account_data(), 1).await;
    let (_, _, text) = read_mail(&sent[0]);
    // The account service's own URL, the default base of its links.
    assert!(text.contains(&format!("{}{ACCEPT}#token=", r.account.url)), "{text}");
    let login = accept(&c, &link_token(&text, ACCEPT)).await.expect(201).body;
    let t = login["accessToken"].as_str().unwrap();
    c.get(&format!("/api/v1/stores/{store}"), Some(t)).await.expect(200);
    let list = c.get(&members, Some(t)).await.expect(200).body;
    assert_eq!(entry(&list, &user).unwrap()["status"], "active");

    // A withdrawal travels the same way.
    let other = c.post(&members, Some(&owner.token), json!({"email": new_email(), "role": "staff"})).await.expect(201).body;
    let other = other["userId"].as_str().unwrap();
    c.delete(&format!("{members}/{other}"), Some(&owner.token)).await.expect(204);
    let list = c.get(&members, Some(&owner.token)).await.expect(200).body;
    assert!(entry(&list, other).is_none());
}

#[tokio::test]
async fn a_closed_store_s_invitations_cannot_be_accepted_and_go_with_it() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let email = new_email();
    c.post(&format!("/api/v1/stores/{store}/members"), Some(&owner.token), json!({"email": email, "role": "staff"}))
        .await
        .expect(201);
    let token = invite_tokens(app.dir.path(), &email, 1).await.remove(0);
    c.delete(&format!("/api/v1/stores/{store}"), Some(&owner.token)).await.expect(204);
    assert_eq!(accept(c, &token).await.expect(400).body["error"]["fields"][0]["field"], "token");
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": PASSWORD})).await.expect(401);

    // Forgotten for good after the grace period: no invitation row of it is left.
    let node = app.server.as_ref().unwrap().node.clone();
    app.clock.advance(Duration::from_secs(31 * 24 * 3600));
    let id: uuid::Uuid = store.parse().unwrap();
    assert_eq!(shopcell::node::closing::sweep(&node, app.clock.now_ms()).await.unwrap(), [id]);
    let account = node.account.as_ref().unwrap();
    let txn = redb::ReadableDatabase::begin_read(&*account.db).unwrap();
    let invitations = txn.open_table(shopcell::storage::tables::INVITATIONS).unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&invitations).unwrap(), 0);
    let tokens = txn.open_table(shopcell::storage::tables::INVITATION_TOKENS).unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&tokens).unwrap(), 0);
}

#[tokio::test]
async fn one_email_invited_by_two_stores_joins_both_with_one_account() {
    let app = spawn_app().await;
    let c = &app.client;
    let (a, b) = (create_user(c).await, create_user(c).await);
    let (sa, sb) = (create_store(c, &a).await, create_store(c, &b).await);
    let email = new_email();
    let ia = c.post(&format!("/api/v1/stores/{sa}/members"), Some(&a.token), json!({"email": email, "role": "staff"})).await;
    let ib = c.post(&format!("/api/v1/stores/{sb}/members"), Some(&b.token), json!({"email": email, "role": "admin"})).await;
    let user = ia.expect(201).body["userId"].clone();
    assert_eq!(ib.expect(201).body["userId"], user, "one future account for one email");
    let tokens = invite_tokens(app.dir.path(), &email, 2).await;
    let login = accept(c, &tokens[1]).await.expect(201).body;
    assert_eq!(login["user"]["id"], user);
    let mine = c.get("/api/v1/stores", login["accessToken"].as_str()).await.expect(200).body;
    let mut roles: Vec<String> = mine
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}={}", s["id"].as_str().unwrap(), s["role"].as_str().unwrap()))
        .collect();
    roles.sort();
    let mut expected = vec![format!("{sa}=staff"), format!("{sb}=admin")];
    expected.sort();
    assert_eq!(roles, expected);
    // The other link was spent with it.
    assert_eq!(accept(c, &tokens[0]).await.expect(400).body["error"]["fields"][0]["field"], "token");
}
