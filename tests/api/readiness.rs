//! `/readyz`: what each role depends on, and a router that stays ready while any cell answers.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn serve_lists_what_it_hosts_as_ready() {
    let app = spawn_app_with_cells(&["eu-1", "us-1"]).await;
    let ready = app.client.get("/readyz", None).await.expect(200).body;
    assert_eq!(ready["mode"], "serve");
    assert_eq!(
        ready["dependencies"],
        json!([
            {"kind": "account", "name": "account", "state": "ready"},
            {"kind": "cell", "name": "eu-1", "state": "ready"},
            {"kind": "cell", "name": "us-1", "state": "ready"},
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_stays_ready_with_one_cell_down_and_is_unready_with_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (pa, p1, p2, pr) = (free_port(), free_port(), free_port(), free_port());
    let ua = format!("http://127.0.0.1:{pa}");
    let cells = format!("c1=http://127.0.0.1:{p1},c2=http://127.0.0.1:{p2}");
    let account = start_proc(&["account", "--data", &path("account"), "--cell", &cells], pa).await;
    let key = format!("{}/account/service.key", path("account"));
    // The cells and the router take every flag from the environment, as a unit file's
    // `Environment=` lines give them; the router's address is a host name.
    let cell = |name: &'static str, port: u16, data: String| {
        let (ua, key) = (ua.clone(), key.clone());
        async move {
            let listen = format!("127.0.0.1:{port}");
            let env = [
                ("SHOPCELL_CELL_NAME", name),
                ("SHOPCELL_DATA", data.as_str()),
                ("SHOPCELL_LISTEN", listen.as_str()),
                ("SHOPCELL_ACCOUNT_URL", ua.as_str()),
                ("SHOPCELL_SERVICE_KEY_FILE", key.as_str()),
            ];
            start_proc_with(&["cell"], &env, port).await
        }
    };
    let c1 = cell("c1", p1, path("cell1")).await;
    let c2 = cell("c2", p2, path("cell2")).await;
    let listen = format!("localhost:{pr}");
    let env = [
        ("SHOPCELL_LISTEN", listen.as_str()),
        ("SHOPCELL_ACCOUNT_URL", ua.as_str()),
        ("SHOPCELL_CELL_URLS", cells.as_str()),
        ("SHOPCELL_SERVICE_KEY_FILE", key.as_str()),
    ];
    let router = start_proc_with(&["router"], &env, pr).await;
    let c = HttpClient::new(&router.url);

    let ready = c.get("/readyz", None).await.expect(200).body;
    assert_eq!(ready["mode"], "router");
    let states = |body: &serde_json::Value| {
        let deps = body["dependencies"].as_array().unwrap().iter();
        deps.map(|d| (d["name"].as_str().unwrap().to_string(), d["state"].as_str().unwrap().to_string())).collect::<Vec<_>>()
    };
    let all = |s: &str| ["account", "c1", "c2"].map(|n| (n.to_string(), s.to_string())).to_vec();
    assert_eq!(states(&ready), all("ready"));
    assert_eq!(ready["dependencies"][2]["url"], format!("http://127.0.0.1:{p2}"));

    // A store in each cell: the directory places new stores across them.
    let u = create_user(&c).await;
    let (mut in1, mut in2) = (None, None);
    let direct1 = HttpClient::new(&c1.url);
    while in1.is_none() || in2.is_none() {
        let s = create_store(&c, &u).await;
        if direct1.get(&format!("/api/v1/stores/{s}"), Some(&u.token)).await.status == 200 {
            in1 = Some(s);
        } else {
            in2 = Some(s);
        }
    }
    let (in1, in2) = (in1.unwrap(), in2.unwrap());

    drop(c2);
    let ready = c.get("/readyz", None).await.expect(200).body;
    assert_eq!(states(&ready), [("account", "ready"), ("c1", "ready"), ("c2", "unreachable")].map(|(a, b)| (a.into(), b.into())));
    assert_eq!(ready["status"], "ready");
    // The cell's stores are unavailable for now; the other cell's serve as before.
    let down = c.get(&format!("/api/v1/stores/{in2}/products"), Some(&u.token)).await.expect(503);
    assert_eq!(down.code(), "UNAVAILABLE");
    assert_eq!(down.headers["retry-after"], "5");
    c.get(&format!("/api/v1/stores/{in1}/products"), Some(&u.token)).await.expect(200);

    drop(c1);
    let unready = c.get("/readyz", None).await.expect(503);
    assert_eq!(unready.code(), "UNAVAILABLE");
    assert_eq!(unready.body["error"]["message"], "not ready: every cell is unreachable");
    assert_eq!(
        unready.body["error"]["fields"],
        json!([{"field": "cell:c1", "message": "unreachable"}, {"field": "cell:c2", "message": "unreachable"}])
    );

    drop(account);
    let unready = c.get("/readyz", None).await.expect(503);
    assert_eq!(unready.body["error"]["message"], "not ready: the account service is unreachable");
    assert_eq!(unready.body["error"]["fields"][0], json!({"field": "account:account", "message": "unreachable"}));
    // `shopcell healthcheck` says so with its exit code.
    let check = run_shopcell(&["healthcheck", "--url", &router.url], None, &[]);
    assert_eq!(check.code, 1);
    assert!(check.stderr.contains("is not ready: not ready: the account service is unreachable"), "{}", check.stderr);
}
