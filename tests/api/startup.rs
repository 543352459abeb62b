//! Start-up as an operator meets it: each failure names what failed, and the files the binary
//! creates are its user's alone whatever the umask.

use std::os::unix::fs::PermissionsExt;

use crate::support::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let ran = run_shopcell(&["serve", "--data", &dir.path().to_string_lossy(), "--listen", &addr], None, &[]);
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains(&format!("error: cannot listen on {addr}: Address already in use")), "{}", ran.stderr);
}

#[tokio::test]
async fn a_database_another_shopcell_holds_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let _first = start_proc(&["serve", "--data", &data], free_port()).await;
    let ran = run_shopcell(&["serve", "--data", &data, "--listen", "127.0.0.1:0"], None, &[]);
    assert_eq!(ran.code, 1);
    let file = dir.path().join("account").join("account.redb");
    assert!(
        ran.stderr.contains(&format!("database {} is already open: another shopcell process holds it", file.display())),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_data_directory_that_cannot_be_made_or_a_missing_key_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the directory should be: tests run as root, whom permissions do not stop.
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"").unwrap();
    let data = blocker.join("data");
    for role in [&["serve"][..], &["account"][..]] {
        let ran = run_shopcell(&[role, &["--data", &data.to_string_lossy(), "--listen", "127.0.0.1:0"]].concat(), None, &[]);
        assert_eq!(ran.code, 1);
        assert!(ran.stderr.contains(&format!("cannot create the data directory {}", data.display())), "{}", ran.stderr);
    }
    let key = dir.path().join("missing").join("service.key");
    let cell_data = dir.path().join("cell").to_string_lossy().into_owned();
    let cell = [
        "cell",
        "--name",
        "c1",
        "--data",
        &cell_data,
        "--account",
        "http://127.0.0.1:9",
        "--service-key-file",
        &key.to_string_lossy(),
    ];
    let ran = run_shopcell(&cell, None, &[]);
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains(&format!("cannot read the service key file {}", key.display())), "{}", ran.stderr);
}

#[test]
fn a_listen_address_that_does_not_resolve_is_refused_by_the_command_line() {
    let ran = run_shopcell(&["serve", "--listen", "no-such-host.invalid:8080"], None, &[]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("cannot resolve \"no-such-host.invalid:8080\""), "{}", ran.stderr);
}

#[tokio::test]
async fn files_are_0600_and_directories_0700_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    // `sh` sets the permissive umask a careless service manager might leave, then becomes shopcell.
    let script = format!("umask 022; exec {} \"$@\"", env!("CARGO_BIN_EXE_shopcell"));
    let listen = format!("localhost:{port}");
    let child = std::process::Command::new("sh")
        .args(["-c", &script, "sh", "serve", "--data", &data.to_string_lossy(), "--listen", &listen])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let proc = Proc { child, url: format!("http://127.0.0.1:{port}") };
    let c = HttpClient::new(&proc.url);
    eventually(|| c.try_send(hyper::Method::GET, "/healthz", None, &[], None)).await;
    // `--listen localhost:PORT` resolved to the loopback address this client reaches.
    assert_eq!(c.get("/readyz", None).await.expect(200).body["status"], "ready");
    let u = create_user(&c).await;
    create_store(&c, &u).await;
    for d in [data.clone(), data.join("account"), data.join("cells"), data.join("cells/cell-1")] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in [data.join("account/account.redb"), data.join("account/service.key"), data.join("cells/cell-1/cell.redb")] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}
